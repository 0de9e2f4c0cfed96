"""The Why tab: the seed's argument, with curves from the formula and points measured on this machine.

Points 1, 3, 4 and 5 of the argument (see app/theory.py): speedup ≈ τ / (1 + cost_draft / cost_target);
a serial drafter pays K forwards, so its cost grows with K; acceptance does not grow linearly with K, so
there is a best K; a one-pass drafter pays one forward whatever K. Sliders move the prediction; a K sweep
measures the AR lane on this machine and draws it beside the formula fed with that sweep's own measured
acceptance and cost; the last view sets this machine's measured costs beside published datacenter-GPU
figures, each labelled with its source.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from engine.methods import METHOD_REGISTRY, method_label
from engine.sweep import SWEEP_KS, k_sweep
from engine.types import EngineError

from ..charts import machine_vs_gpu_figure, theory_figure
from ..examples import example_choices, example_prompts
from ..sessions import SessionStore
from ..theory import PUBLISHED, best_k, one_pass_curve, serial_curve

SWEEP_TOKENS = 64

def _labels(one_pass: bool) -> str:
    """The registered drafting methods' labels, serial or one-pass, for the text."""
    return ", ".join(m.label for m in METHOD_REGISTRY.values() if m.drafts and m.one_pass == one_pass)


INTRO = f"""### Why parallel drafting wins, and why by how much depends on the machine
Every verify step commits **τ** tokens on average: the accepted drafts plus the one the target writes itself.
Drafting costs time too, so the speedup over the target alone is about

**speedup ≈ τ / (1 + cost_draft / cost_target)**

A serial drafter ({_labels(one_pass=False)}) pays one forward per drafted token, so its cost grows with K, while τ grows
ever more slowly (each position must survive all the ones before it): past some K, drafting more loses.
A one-pass drafter ({_labels(one_pass=True)}) pays one forward for the whole block, so a longer block costs nothing
more. The curves below are **predictions** from that formula (dashed); move the sliders to see how
acceptance and cost move the best K."""


def _settings_prediction(acceptance: float, serial_cost: float, block_cost: float, points=None):
    return theory_figure(serial_curve([acceptance], serial_cost), one_pass_curve([acceptance], block_cost),
                         run_points=points)


def run_points(comparison) -> dict[str, tuple[int, float]]:
    """A Compare run's lanes as points on the K axis: each drafting lane at its draft length, with its
    measured speedup over the same run's baseline (tokens/s over tokens/s)."""
    points = {}
    for method, lane in comparison.lanes.items():
        entry, ratio = METHOD_REGISTRY.get(method), comparison.speedup(method)
        if entry is None or not entry.drafts or ratio is None:
            continue
        k = int(comparison.settings.get(entry.setting, 1))
        points[f"{entry.label} (τ {lane.summary.tau:.2f})"] = (k, ratio)
    return points


def measure_sweep(engine, prompt: str, ks=SWEEP_KS, max_new_tokens: int = SWEEP_TOKENS, rounds: int = 2) -> dict:
    """The serial drafter at every K and the block drafters at their defaults against the baseline, on one
    prompt (engine/sweep.py), with the formula fed with the sweep's own measured acceptance and cost."""
    try:
        sweep = k_sweep(engine, [prompt], max_new_tokens, ks, rounds=rounds, one_pass=True)
    except EngineError as exc:
        raise gr.Error(str(exc)) from None
    rows, label = sweep["rows"], method_label(sweep["method"])
    points = {k: row["speedup"] for k, row in rows.items()}
    best = sweep["best_k"]
    here = {f"{label} (K={best}) · {sweep['drafter']}": {**rows[best], "tau": rows[best]["tau"]}}
    for method, row in sweep["others"].items():
        here[f"{method_label(method)} · {row['drafter']}"] = row
    return {"points": points, "taus": {k: row["tau"] for k, row in rows.items()}, "acceptance": sweep["acceptance"],
            "per_forward_cost": sweep["per_forward_cost"], "method": sweep["method"],
            "prediction": serial_curve(sweep["acceptance"], sweep["per_forward_cost"], max(ks)),
            "here": here, "device": sweep["device"], "max_new_tokens": max_new_tokens}


def sweep_table(sweep: dict) -> str:
    ks = sorted(sweep["points"])
    best = max(ks, key=sweep["points"].get)
    rows = ["| K | " + " | ".join(str(k) for k in ks) + " |", "|---|" + "---|" * len(ks),
            "| measured speedup | " + " | ".join(f"{sweep['points'][k]:.2f}×" for k in ks) + " |",
            "| measured τ | " + " | ".join(f"{sweep['taus'][k]:.2f}" for k in ks) + " |",
            "| formula from the measured acceptance and cost | "
            + " | ".join(f"{v:.2f}×" for v in sweep["prediction"]) + " |"]
    acceptance = ", ".join(f"{p:.2f}" for p in sweep["acceptance"])
    return (f"Measured on **{html.escape(sweep['device'])}**, one prompt, {sweep['max_new_tokens']} new tokens, "
            f"temperature 0: best K = **{best}** (formula: {best_k(sweep['prediction'])}). One draft forward costs "
            f"{sweep['per_forward_cost']:.2f} of a verify forward; per-position acceptance at K = {ks[-1]}: "
            f"{acceptance}.\n\n"
            + "\n".join(rows))


SWEEP_CAPTION = ("**Measure it here.** The K sweep runs the serial drafter for K = 1..8 on one prompt (and the "
                 "block drafters once, at their default block), every output checked against the baseline's, and "
                 "draws the measured speedup (solid) beside the formula fed with the sweep's own measured "
                 "acceptance and cost (dotted).")
MACHINE_CAPTION = ("**This machine against a datacenter GPU.** Left: drafting cost over verify cost; right: speedup. "
                   "Orange-red bars are measured by the sweep on this machine; blue bars are published H200/B200 "
                   "figures (sources on hover and below), their cost implied by their τ and speedup through the "
                   "formula. Compare the bars, not a rule of thumb: what decides the best K is how a draft "
                   "forward's cost stands to a verify's here, and how fast acceptance decays along the block.")
NO_RUN = "Run a comparison with the Baseline lane on the Compare tab first."


# --- the layout ------------------------------------------------------------------------------------------

@dataclass
class WhyView:
    """The tab's components, as `layout` built them."""

    acceptance: gr.Slider
    serial_cost: gr.Slider
    block_cost: gr.Slider
    overlay_button: gr.Button
    overlay_note: gr.Markdown
    prediction: gr.Plot
    prompt: gr.Dropdown
    sweep_button: gr.Button
    sweep_plot: gr.Plot
    sweep_text: gr.Markdown
    machine_plot: gr.Plot

    @property
    def sliders(self) -> list:
        return [self.acceptance, self.serial_cost, self.block_cost]


def layout() -> WhyView:
    """Build the tab's components (inside a gr.Blocks); no behaviour."""
    gr.Markdown(INTRO)
    with gr.Row():
        acceptance = gr.Slider(0.3, 0.98, value=0.75, step=0.01, label="per-position acceptance p (prediction)")
        serial_cost = gr.Slider(0.02, 1.0, value=0.15, step=0.01,
                                label="serial drafter: one draft forward's cost / a verify forward's")
        block_cost = gr.Slider(0.05, 1.5, value=0.4, step=0.01,
                               label="one-pass drafter: the whole block's cost / a verify forward's")
    with gr.Row():
        overlay_button = gr.Button("Overlay my last Compare run", elem_id="overlay-last-run", size="sm", scale=0)
        overlay_note = gr.Markdown(elem_id="overlay-note")
    prediction = gr.Plot(_settings_prediction(0.75, 0.15, 0.4), elem_id="why-prediction", show_label=False)
    gr.Markdown(SWEEP_CAPTION, elem_classes="note")
    with gr.Row():
        prompt = gr.Dropdown(example_choices(), value=example_prompts()[0], label="Prompt for the sweep", scale=4)
        sweep_button = gr.Button("Run the K sweep", variant="primary", elem_id="sweep", scale=1)
    sweep_plot = gr.Plot(elem_id="why-sweep", show_label=False)
    sweep_text = gr.Markdown(elem_id="why-sweep-table")
    gr.Markdown(MACHINE_CAPTION, elem_classes="note")
    machine_plot = gr.Plot(elem_id="why-machine", show_label=False)
    gr.Markdown("Sources: " + "; ".join(f"{p.method}, {p.setting}: {p.speedup}× / τ {p.tau} ({p.source})"
                                       for p in PUBLISHED) + ".", elem_classes="note")
    return WhyView(acceptance, serial_cost, block_cost, overlay_button, overlay_note, prediction, prompt,
                   sweep_button, sweep_plot, sweep_text, machine_plot)


# --- the behaviour ---------------------------------------------------------------------------------------

class WhyHandlers:
    """The tab's handlers: plain methods over explicit values; the session's last comparison comes from
    `sessions` (app/sessions.py)."""

    def __init__(self, engine, sessions: SessionStore):
        self.engine = engine
        self.sessions = sessions

    def _last(self, session: str):
        return self.sessions.get(session).last

    def predict(self, p, c, b, request: gr.Request):
        """The prediction at the sliders' values, with the session's last run's lanes as crosses."""
        comparison = self._last(request.session_hash)
        return _settings_prediction(p, c, b, run_points(comparison) if comparison else None)

    def overlay(self, p, c, b, request: gr.Request):
        comparison = self._last(request.session_hash)
        if comparison is None or comparison.baseline is None:
            return gr.skip(), NO_RUN
        return self.predict(p, c, b, request), (f"Crosses: your last run's lanes at their draft lengths, measured on "
                                                f"{html.escape(comparison.device)} (speedup = tokens/s over the "
                                                f"baseline's).")

    def on_sweep(self, prompt_text, p, c, b):
        sweep = measure_sweep(self.engine, prompt_text, max_new_tokens=SWEEP_TOKENS)
        figure = theory_figure(serial_curve([p], c, len(SWEEP_KS)), one_pass_curve([p], b, len(SWEEP_KS)),
                               sweep["points"], sweep["prediction"])
        return figure, sweep_table(sweep), machine_vs_gpu_figure(sweep["here"], PUBLISHED)


def wire(view: WhyView, handlers: WhyHandlers) -> None:
    """Connect the components to the handlers; the sweep waits in the engine's queue like a comparison."""
    for slider in view.sliders:
        slider.change(handlers.predict, view.sliders, view.prediction, show_progress="hidden", queue=False)
    view.overlay_button.click(handlers.overlay, view.sliders, [view.prediction, view.overlay_note], queue=False,
                              show_progress="hidden")
    view.sweep_button.click(handlers.on_sweep, [view.prompt, *view.sliders],
                            [view.sweep_plot, view.sweep_text, view.machine_plot],
                            concurrency_limit=1, concurrency_id="engine", api_name="k_sweep")


def render(engine, sessions: SessionStore) -> WhyHandlers:
    """The tab: its layout and its handlers, wired."""
    handlers = WhyHandlers(engine, sessions)
    wire(layout(), handlers)
    return handlers
