"""How the Compare tab draws and replays a comparison: each lane's HTML and the charts (LaneViews), the replay
cache of recorded runs (Replays), the status words while a run goes on, and the downloaded file."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import gradio as gr
from gradio.components.plot import PlotData

from engine.contract.interface import EngineLike
from engine.contract.methods import method_label
from engine.contract.summary import summarize

from .. import lesson
from ..blocks import block_default, follow_temperature, recorded_best, sweep_data, sweep_temperature
from ..comparison import Comparison, LaneResult, settings_dict
from ..draw.charts import NUM_CHARTS, comparison_figures
from ..draw.render import empty_lane_html, lane_html, status_html
from ..run.sessions import SessionStore
from ..settings import PARSERS, Settings, default_settings, parse_controls

NOT_SELECTED = "not selected"


@functools.cache
def versions() -> dict:
    """Versions that shape a run's numbers, read once from the installed packages (no import of torch here)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("torch", "transformers", "gradio"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


MAX_DOWNLOADS = 256  # download files kept (one per comparison, the latest offered): the folder stays under ~1.3 GB


def download_path(text: str, keep: int = MAX_DOWNLOADS) -> Path:
    """The file "Download this comparison" offers for a comparison's JSON `text`: named by its content and written
    once, so every session downloading one comparison (a class on a recorded link) shares it, and shares Gradio's
    copy of it too (Gradio keeps one copy per content and name). Past `keep` files the least recently offered are
    removed (Gradio serves its own copy, so a page that still shows a removed file's button keeps working a while)."""
    folder = Path(tempfile.gettempdir()) / "speclab-comparisons"
    folder.mkdir(exist_ok=True)
    path = folder / f"speclab-comparison-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    try:
        os.utime(path)  # offered again: the latest
    except FileNotFoundError:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, suffix=".part", delete=False) as part:
            part.write(text)
        os.replace(part.name, path)  # whole or not at all: another browser session may be reading it
    others = []
    for other in folder.glob("speclab-comparison-*.json"):
        try:
            others.append((other.stat().st_mtime, other))
        except OSError:  # removed by another thread meanwhile
            pass
    for _, old in sorted(others, reverse=True)[max(0, keep - 1):]:
        if old != path:
            old.unlink(missing_ok=True)
    return path


def control_values(settings: Settings) -> list:
    """Every control's value for `settings`, in PARSERS order (the seed as text, the lanes as a list)."""
    return [str(v) if name == "seed" else list(v) if name == "methods" else v
            for name, v in ((name, getattr(settings, name)) for name in PARSERS)]


def notes_update(messages: list[str], heading: str):
    """The link notes' update: the messages under a heading, or hidden when there are none."""
    if not messages:
        return gr.update(value="", visible=False)
    items = "".join(f"<li>{html.escape(m)}</li>" for m in messages)
    return gr.update(value=f'<div class="status-error link-notes">{html.escape(heading)}<ul>{items}</ul></div>',
                     visible=True)


def query_items(request: gr.Request | None) -> list[tuple[str, str]]:
    """The page's query parameters, repeats kept (Gradio forwards the page's query with every event)."""
    params = getattr(request, "query_params", None) if request is not None else None
    if params is None:
        return []
    if hasattr(params, "multi_items"):
        return [(str(k), str(v)) for k, v in params.multi_items()]
    return [(str(k), str(v)) for k, v in dict(params).items()]  # a pickled request holds a plain dict


def load_note(settings: Settings) -> str:
    """What a run with requests at once above 1 measured: one request of a full batch."""
    n = settings.requests_at_once
    if n == 1:
        return ""
    return (f" Each lane decoded your prompt among {n} requests at once, one batch (the others held-out prompts, each "
            "replaced as it finished): the lane shows your request, each step is the whole batch's, and its batch "
            "tokens/s is what all of them wrote.")


def running_message(method: str, lane: LaneResult | None, device: str, max_new_tokens: int) -> str:
    """The status while a lane runs: its numbers so far (its own box shows only its tokens until it ends)."""
    message = f"running {method_label(method)} on {device}…"
    if lane is not None and lane.steps:
        s = summarize(list(lane.steps))
        message += f" {s.num_new_tokens} of {max_new_tokens} tokens, τ {s.tau:.2f}, {s.tokens_per_s:.0f} tokens/s so far"
    return message


def timing_message(repeating: tuple[str, int] | None) -> str:
    """The status while the lanes are timed again (app/run/runner.py): which lane, which run."""
    if repeating is None:
        return "…"
    method, run = repeating
    return (f"timing: {method_label(method)} again, run {run} (the lanes run again in turn, "
            "each step keeping its fastest timing: speedups that hold still on a shared machine)…")


# --- drawing and replaying a comparison -------------------------------------------------------------

class LaneViews:
    """How this page draws a comparison: each lane's HTML and the charts, for the lanes this engine runs."""

    def __init__(self, engine: EngineLike, sessions: SessionStore):
        self.sessions = sessions
        self.methods = list(engine.methods())
        # shown in each lane's header: the drafter at temperature 0, and above it (a checkpoint trained for sampling)
        self.drafters = {m: engine.drafter_label(m) for m in self.methods}
        self.sampled_drafters = {m: engine.drafter_label(m, 1.0) for m in self.methods}
        self.caps = {m: engine.max_drafts(m) for m in self.methods}  # a block drafter's trained block
        defaults = default_settings(self.methods)
        # the block slider starts at the recorded fastest block for the run's temperature, else at the trained block
        # (app/blocks.py); it follows the temperature between the two starts until the visitor sets it
        sweep = sweep_data(lesson.recorded().get("blocks"))  # assets/lessons/blocks.json, read with the lesson's
        labels = {"0.0": self.drafters, "1.0": self.sampled_drafters}
        self.block_starts = {t: block_default(self.methods, self.caps, defaults.drafts_per_step_one_pass, float(t),
                                              sweep, labels[t]) for t in labels}
        self.block_recorded = {t: recorded_best(self.methods, self.caps, sweep, float(t), labels[t]) is not None
                               for t in labels}
        self.defaults = replace(defaults, drafts_per_step_one_pass=self.block_starts[
            sweep_temperature(defaults.temperature)])

    def follow_temperature(self, temperature, block):
        """The block slider after the visitor moves the temperature (app/blocks.py follow_temperature)."""
        try:
            moved = follow_temperature(float(temperature), int(block), self.block_starts)
        except (TypeError, ValueError):
            moved = None
        return gr.update() if moved is None else gr.update(value=moved)

    def refused(self, message: str) -> tuple:
        return status_html(f"⚠ {message}", error=True), *[gr.skip()] * (len(self.methods) + NUM_CHARTS)

    def projector(self, session: str) -> bool:
        """Whether the session's page is in projector mode (its charts then drawn for a room)."""
        return self.sessions.get(session).projector

    def draw(self, comparison: Comparison, show: bool, projector: bool = False) -> tuple[list, tuple]:
        """What the page draws of a comparison: each lane's HTML (None when not in it) and the charts."""
        boxes = [lane_html(comparison, m, show) if m in comparison.lanes else None for m in self.methods]
        shown = Comparison({**comparison.settings}, {m: l for m, l in comparison.lanes.items() if m in self.methods},
                           comparison.device, comparison.preset, comparison.versions, comparison.recorded_at)
        return boxes, comparison_figures(shown, projector)

    def page_outputs(self, comparison: Comparison, show: bool, status: str, drawn: tuple | None = None,
                     projector: bool = False) -> tuple:
        """The run's outputs for a comparison: the status, each lane (hidden when not in it), the charts.
        `drawn`: what `draw` returned for it before. (The updates are made anew each time: Gradio consumes them.)"""
        boxes, figures = drawn or self.draw(comparison, show, projector)
        return status, *[gr.update(value=box, visible=True) if box is not None else gr.update(visible=False)
                         for box in boxes], *figures

    def lanes_html(self, comparison: Comparison, show: bool, shown: dict, drawn: dict, live: bool) -> list[str]:
        """Every box's HTML. live: the light view, re-rendered only for a lane that changed (an unchanged lane is
        resent as the same string, which Gradio sends no bytes for; never gr.skip(), which in Gradio 6 adds a
        component to the session's state for good)."""
        for m in self.methods:
            lane = comparison.lanes.get(m)
            if lane is None:
                shown.setdefault(m, empty_lane_html(m, NOT_SELECTED, self.drafters[m]))
                continue
            mark = (len(lane.steps), lane.state)
            if not (live and drawn.get(m) == mark):
                drawn[m] = mark
                shown[m] = lane_html(comparison, m, show, live=live)
        return [shown[m] for m in self.methods]


def as_sent(figure):
    """A plotly figure as the JSON Gradio sends, so a drawing kept for every visitor is made JSON once, not once a
    visitor (None stays None)."""
    return None if figure is None else PlotData(type="plotly", plot=figure.to_json())


class Replays:
    """The replay cache: complete runs recorded by configuration (app/recordings.py, shared by every visitor) and
    what the page drew of them, so a class opening one link computes and draws it once."""

    def __init__(self, engine: EngineLike, views: LaneViews, sessions: SessionStore):
        self.engine, self.views, self.sessions = engine, views, sessions

    def pin(self, key: str) -> None:
        """The run recorded under `key` is never evicted (an operator's link)."""
        self.sessions.recorded.pin(key)

    def result_key(self, settings: Settings) -> str:
        """Everything a run's outcome depends on: the models, the device and every setting."""
        return json.dumps([self.engine.preset, self.engine.device_name, settings_dict(settings)], sort_keys=True)

    def status_recorded(self, comparison: Comparison, how: str) -> str:
        missing = [m for m in comparison.lanes if m not in self.views.methods]
        note = f" (lanes this server cannot show: {', '.join(missing)})" if missing else ""
        return status_html(f"recorded {comparison.recorded_at} on {comparison.device}, preset "
                           f"{comparison.preset} ({how}): nothing was rerun{note}.")

    def show_recorded(self, comparison: Comparison, show: bool, how: str, projector: bool = False) -> tuple:
        """The page's outputs for a recorded comparison: its lanes and charts as they were measured."""
        return self.views.page_outputs(comparison, show, self.status_recorded(comparison, how), projector=projector)

    def show_comparison(self, comparison: Comparison, session: str, how: str) -> tuple:
        """A recorded comparison shown as if just run (a lesson point): every control set to its settings, then
        its lanes and charts; it becomes the session's last comparison (Step through and Why read it)."""
        self.sessions.get(session).last = comparison
        settings = parse_controls(comparison.settings)
        settings = replace(settings, methods=tuple(m for m in settings.methods if m in self.views.methods))
        drawn = self.draw_once(f"shown|{id(comparison)}", comparison, True, self.views.projector(session))
        status = self.status_recorded(comparison, how)
        return *control_values(settings), *self.views.page_outputs(comparison, True, status, drawn)

    def recorded_outputs(self, key: str, session: str, show: bool) -> tuple | None:
        """The page's outputs for the run this server recorded under `key` (it becomes the session's last
        comparison), or None when there is none."""
        recorded = self.sessions.recorded.last(key)
        if recorded is None:
            return None
        self.sessions.get(session).last = recorded
        status = self.status_recorded(recorded, "the same comparison ran before on this server; this is that run")
        drawn = self.draw_once(key, recorded, show, self.views.projector(session))
        return self.views.page_outputs(recorded, show, status, drawn)

    def draw_once(self, key: str, comparison: Comparison, show: bool, projector: bool = False) -> tuple:
        """What `draw` makes of a comparison every visitor sees alike (a recorded run, a lesson's recording),
        made once and kept (the charts as the JSON Gradio sends): a class opening one link at once must not
        draw it forty times, nor wait for forty drawings (app/run/sessions.py DrawnOnce)."""
        def draw() -> tuple:
            boxes, figures = self.views.draw(comparison, show, projector)
            return boxes, tuple(as_sent(f) for f in figures)

        return self.sessions.replays.get(f"{key}|{show}|{projector}", comparison, draw)
