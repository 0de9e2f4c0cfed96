"""The Why tab's panel on long outputs (lesson point 11): τ against the position in the output for every feature
drafter, as shipped, cut to its trained window and tuning itself, with its table and the papers' figures beside ours
(app/lesson/long.py words them, app/draw/long.py draws them). The tab (app/tabs/why.py) places it and wires it.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from .. import lesson
from ..draw.charts import styled
from ..draw.long import long_figure, long_table
from ..lesson.long import LIVE_LONG_PROMPTS, LIVE_LONG_TOKENS, LONG_PROMPTS, PAPERS, RECORDING_MINUTES, long_words

LONG_CAPTION = ("**Long outputs: acceptance by output position.** Each feature drafter generates to the target's whole "
                f"context on {LONG_PROMPTS} held-out prompts (measured here: DFlash as shipped "
                f"on {LIVE_LONG_PROMPTS} prompts, {LIVE_LONG_TOKENS} new tokens each), and its τ is drawn against how "
                "far into the output each step drafts, with 95 % intervals over the prompts. The dash-dot line marks "
                "where the drafters' trained window (the sequence length they were trained on, prompt included) ends "
                "for the median prompt. Beside DFlash as shipped: the same drafter cut to that window (dashed) and "
                "tuning itself after every verify (dotted; its training steps are timed as work of their own, “train”, "
                "black on a timeline). Every output is still the target's: the options change only what is proposed.")
LONG_NOTE = (f"The recording takes about {RECORDING_MINUTES} minutes on one core (`python scripts/record_lessons.py "
             "long`); the same measurement from the command line: `python -m engine.measure.positions --prompts "
             f"{LONG_PROMPTS}`. {PAPERS}")


@dataclass
class LongPanel:
    button: gr.Button
    stop: gr.Button
    plot: gr.Plot
    text: gr.Markdown


def long_outputs(recorded: dict | None, projector: bool = False) -> tuple:
    """The panel's chart and its words (the takeaway, the table, the note) for a measurement, or what to do without."""
    if recorded is None:
        return None, "Not recorded here: press the button to measure it on this machine."
    figure = long_figure(recorded)
    words = f"{long_words(recorded)}\n\n{long_table(recorded)}\n\n*{lesson.recorded_words(recorded)}.* {LONG_NOTE}"
    return (styled(figure, projector) if figure is not None else None), words


def layout(recording: dict | None, stop_button, folded) -> LongPanel:
    """The caption, the button and its Stop, the chart, then its words folded under it in projector mode."""
    figure, words = long_outputs(recording)
    gr.Markdown(LONG_CAPTION, elem_classes="note")
    with gr.Row():
        button = gr.Button("Measure long outputs (a small version)", elem_id="long", size="sm")
        stop = stop_button("long")
    plot = gr.Plot(figure, elem_id="why-long-plot", show_label=False)
    with folded("why-long-plot"):
        text = gr.Markdown(words, elem_id="why-long-table")
    return LongPanel(button, stop, plot, text)
