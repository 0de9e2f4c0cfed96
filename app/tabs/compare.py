"""The Compare tab: one prompt, the chosen lanes side by side, live, the shared timeline and small charts.

Layout and behaviour apart: `layout` builds the components (a CompareView), `CompareHandlers` holds the
handlers as plain methods over explicit values (callable and testable without a browser), `wire` connects
the two. A run becomes one value, a Comparison (app/comparison.py), and every picture is drawn from it.

Every control's raw value is checked by app/links.py inside the handlers (events run with
`preprocess=False`), so whatever a browser or an API client sends — text in a number field, None, a list —
ends as one line in the status, never as a traceback. The same settings travel in share links: opening
one restores every control and runs the comparison.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import html
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qsl

import gradio as gr
from gradio.components.plot import PlotData

from engine.contract.interface import EngineLike
from engine.contract.methods import METHOD_REGISTRY, method_label
from engine.contract.presets import OVERLAP_CHOICES, SCHEDULERS, VERIFY_RULES
from engine.contract.summary import summarize
from engine.contract.types import MAX_DRAFTS, MAX_TEMPERATURE, MAX_TREE_NODES, EngineError

from ..draw.projector import adopt_from_link
from ..draw.charts import CHART_IDS, NUM_CHARTS, comparison_figures
from ..examples import example_prompts
from ..words import prose_note
from ..settings import (MAX_NEW_TOKENS_UI, MAX_PROMPT_CHARS, MAX_REQUESTS_AT_ONCE_UI, PARSERS, SettingError, Settings,
                        default_settings, parse_controls, quoted)
from ..links import build_query, is_link, parse_query
from ..comparison import Comparison, LaneResult, RecordError, read_comparison, settings_dict
from ..draw.render import LEGEND_HTML, clock_note, empty_lane_html, lane_html, status_html
from .. import runner
from ..runner import LaneRun, run_lanes as run_lanes_here
from ..hosting import memory
from ..servers import lanes as server_lanes
from ..hosting.sessions import SessionStore
from ..hosting.uploads import SavedFileButton
from . import device_recordings

REDRAW_EVERY_S = 0.5  # lanes redraw at most this often while a lane runs (each redraw briefly holds
# the interpreter the engine runs in; a lane that ends is drawn while the next one has not started yet)
# While lanes run, the page gets only light updates (a running lane's new tokens, a finished lane's chips);
# the full lanes (hover text, lists of steps) and the charts are built and sent once, after the last lane:
# building and drawing them would otherwise share the cores, and the interpreter, with the lane being measured.
NOT_SELECTED = "not selected"
NO_FILE = "no file arrived: open a saved comparison's .json file"

# Before the share-link handler runs, the browser swaps in the page's own address (origin + path, so a
# link made on a Space points at the Space); afterwards it copies the link where the browser allows.
PAGE_ADDRESS_JS = "(address, ...controls) => [window.location.origin + window.location.pathname, ...controls]"
# ... then puts the link in the address bar (so the page's own address is the comparison's) and says so, beside
# the button, for a few seconds: "Copied" once the clipboard took it, else where to copy it from.
COPY_JS = """(link) => {
  if (!link) return;
  try {
    const url = new URL(link, window.location.href);
    if (new URLSearchParams(window.location.search).get("projector") === "1") url.searchParams.set("projector", "1");
    if (url.origin === window.location.origin) window.history.replaceState(null, "", url.pathname + url.search);
  } catch (error) {}
  const say = (text) => {
    let note = document.getElementById("copy-confirm");
    if (!note) {
      note = document.createElement("span");
      note.id = "copy-confirm";
      note.setAttribute("role", "status");
      document.getElementById("copy-link").after(note);
    }
    note.textContent = text;
    note.hidden = false;
    clearTimeout(note.timer);
    note.timer = setTimeout(() => { note.hidden = true; }, 5000);
  };
  const manual = () => say("Link in the address bar: copy it from there");
  if (navigator.clipboard) navigator.clipboard.writeText(link).then(() => say("Copied ✓ (also in the address bar)"), manual);
  else manual();
}"""
# A share link runs as soon as the page has finished drawing itself (the browser is idle, or 3 s passed):
# on a small machine, a page still laying itself out would slow the first lane being measured.
WHEN_IDLE_JS = ("async (...inputs) => { await new Promise((done) => window.requestIdleCallback ? "
                "window.requestIdleCallback(done, {timeout: 3000}) : setTimeout(done, 0)); return inputs; }")

MAX_RUN_S = 180.0  # one comparison's wall-time limit: the engine is shared, so the queue must keep moving
LONG_LINK_CHARS = 8_000  # past this, some servers and proxies refuse the address
MAX_LINK_CHARS = 60_000  # past this no link is made: the server itself cannot open an address over 65,536 bytes

ACCEPTANCE_CAPTION = ("At temperature 0 a drafted token is accepted exactly when it is the target's own choice (its "
                      "most likely token). Above 0, the rejection rule accepts it with probability "
                      "min(1, p_target / p_draft), decided by a random draw r; the match rule (More settings) "
                      "accepts it when the target's own sample is the same token. Hover any token for both "
                      "probabilities and what decided it, or click it to pin them in a panel on the page.")
TIMELINE_CAPTION = ("**Timeline.** Each lane's measured work on one time axis: orange is drafting, blue is the "
                    "target's verify forward, grey is host bookkeeping, and gaps are bubbles where nothing ran. "
                    "A serial drafter (AR, Classic) starts every step with K draft forwards, one after another, "
                    "in alternating light and dark orange (at large K each is under a pixel wide here: drag across "
                    "the chart to zoom in and count them); the block drafters draft the whole block in one. "
                    "Overlap (More settings) is meant to close those gaps by running each step's host work under "
                    "the next step's device work; whether it does on this machine shows here, on the same comparison "
                    "run with it on and with it off.")
CHARTS_CAPTION = ("**How each lane did:** how many drafts each step kept (τ, the tokens a step commits on average, "
                  "is that number plus the target's own token), where each lane's time went, and the measured "
                  "speedup beside the formula τ / (1 + cost_draft / cost_target) fed with this run's own τ and "
                  "times. The formula counts each verify as one baseline forward; the striped bar divides the formula "
                  "by how many baseline forwards one of the lane's verifies cost in this run (printed above it: "
                  "above 1 a verify cost more than a forward, below 1 less; the chart's subtitle says which); "
                  "what remains between that bar and the "
                  "measured one is host work, bubbles and the prefill. ✂ in a lane marks where a scheduler cut the "
                  "block before verification.")


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


def parse_show_drafts(value) -> bool:
    if not isinstance(value, bool):
        raise SettingError(f"show drafts must be true or false, got {value!r:.40}")
    return value


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


def running_message(lane: LaneRun, device: str, max_new_tokens: int) -> str:
    """The status while a lane runs: its numbers so far (its own box shows only its tokens until it ends)."""
    message = f"running {method_label(lane.method)} on {device}…"
    if lane.steps:
        s = summarize(lane.steps)
        message += f" {s.num_new_tokens} of {max_new_tokens} tokens, τ {s.tau:.2f}, {s.tokens_per_s:.0f} tokens/s so far"
    return message


def timing_message(lane_runs: list[LaneRun]) -> str:
    """The status while the lanes are timed again (app/runner.py): which lane, which run."""
    lane = next((lane for lane in lane_runs if lane.repeating), None)
    if lane is None:
        return "…"
    return (f"timing: {method_label(lane.method)} again, run {lane.timing_runs + 1} (the lanes run again in turn, "
            "each step keeping its fastest timing: speedups that hold still on a shared machine)…")


# --- the layout ------------------------------------------------------------------------------------------

@dataclass
class CompareView:
    """The tab's components, as `layout` built them."""

    prompt: gr.Textbox
    run_button: gr.Button
    stop_button: gr.Button
    copy_button: gr.Button
    download_button: gr.DownloadButton
    upload: gr.UploadButton
    controls: dict  # Settings field -> its component, in PARSERS order
    show_drafts: gr.Checkbox
    link_notes: gr.HTML
    share_link: gr.Textbox
    page_address: gr.Textbox
    status: gr.HTML
    lane_boxes: list
    charts: list  # NUM_CHARTS plots, in comparison_figures' order
    link_query: gr.Textbox
    focus: gr.HTML  # a lesson point's "look at" note
    examples: gr.Dataset  # the example prompts; a click puts one in the prompt box
    server_boxes: list = field(default_factory=list)  # one per server lane (app/servers/lanes.py), after the local lanes

    @property
    def run_outputs(self) -> list:
        return [self.status, *self.lane_boxes, *self.charts]

    @property
    def survival_plot(self):
        return self.charts[3]


def _prompt_row(defaults: Settings):
    with gr.Row(equal_height=True):
        prompt = gr.Textbox(label="Prompt", value=defaults.prompt, lines=5, max_lines=12, elem_id="prompt", scale=4,
                            max_length=MAX_PROMPT_CHARS)
        with gr.Column(scale=1, min_width=160):
            buttons = (gr.Button("Run", variant="primary", elem_id="run"),
                       gr.Button("Stop", variant="stop", elem_id="stop"),
                       gr.Button("Copy link", elem_id="copy-link", size="sm"),
                       gr.DownloadButton("Download this comparison", elem_id="download", size="sm", visible=False),
                       SavedFileButton("Open a saved comparison", elem_id="open-saved", size="sm",
                                       file_types=[".json"], type="binary"))
    # A Dataset with its own handler rather than gr.Examples, whose handler fails on an index it has no example for
    examples = gr.Dataset(components=[prompt], samples=[[e] for e in example_prompts()], type="index",
                          label="Examples (the tiny models know Python)", samples_per_page=6, elem_id="examples")
    return prompt, examples, buttons


def _draft_label(one_pass: bool, most: int = MAX_DRAFTS) -> str:
    names = " / ".join(m.label for m in METHOD_REGISTRY.values() if m.drafts and m.one_pass == one_pass)
    return (f"{names}: drafts per block (up to {most}, the block its drafter was trained on)" if one_pass
            else f"{names}: draft length K (serial forwards per step)")


def block_most(methods: list[str], caps: dict[str, int | None]) -> int:
    """The longest block any loaded one-pass drafter can draft: the block control's top."""
    blocks = [caps.get(m) or MAX_DRAFTS for m in methods if METHOD_REGISTRY[m].one_pass and METHOD_REGISTRY[m].drafts]
    return min(MAX_DRAFTS, max(blocks, default=MAX_DRAFTS))


def _settings(methods: list[str], defaults: Settings, block_top: int = MAX_DRAFTS) -> tuple[dict, gr.Checkbox]:
    """The lanes and every setting; returns the controls by Settings field, and the display-only checkbox."""
    c = {"methods": gr.CheckboxGroup([(method_label(m), m) for m in methods], value=list(defaults.methods),
                                     label="Lanes", elem_id="lanes")}
    with gr.Row():
        c["temperature"] = gr.Slider(0.0, MAX_TEMPERATURE, value=defaults.temperature, step=0.05,
                                     label="Temperature (0 = greedy)", elem_id="temperature")
        c["max_new_tokens"] = gr.Slider(1, MAX_NEW_TOKENS_UI, value=defaults.max_new_tokens, step=1,
                                        label="Max new tokens", elem_id="max-new-tokens")
        c["requests_at_once"] = gr.Slider(1, MAX_REQUESTS_AT_ONCE_UI, value=defaults.requests_at_once, step=1,
                                          elem_id="requests-at-once",
                                          label="Requests at once (a busy server: your prompt among held-out ones, "
                                                "one batch; each lane shows your request)")
    with gr.Row():  # how much each family drafts per step
        c["serial_k"] = gr.Slider(1, MAX_DRAFTS, value=defaults.serial_k, step=1, elem_id="serial-k",
                                   label=_draft_label(False))
        c["drafts_per_block"] = gr.Slider(1, block_top, value=min(defaults.drafts_per_block, block_top), step=1,
                                   elem_id="drafts-per-block", label=_draft_label(True, block_top))
        trees = " / ".join(m.label for m in METHOD_REGISTRY.values() if m.tree)
        c["tree_nodes"] = gr.Slider(1, MAX_TREE_NODES, value=defaults.tree_nodes, step=1, elem_id="tree-nodes",
                                    label=f"{trees}: node budget (drafts per step, as a tree no deeper than K or the "
                                          f"block)")
    with gr.Accordion("More settings", open=False):
        with gr.Row():
            # Text, not a number box: a browser's numbers are doubles, and a seed may need all 63 bits.
            c["seed"] = gr.Textbox(value=str(defaults.seed), max_lines=1, elem_id="seed",
                                   label="Seed (temperature > 0; a whole number from 0 to 2⁶³ − 1)")
            c["verify_rule"] = gr.Radio(list(VERIFY_RULES), value=defaults.verify_rule, elem_id="verify-rule",
                                        label="Verification rule at temperature > 0")
            show_drafts = gr.Checkbox(value=True, label="Show rejected, unverified and cut drafts inline")
        scheduled = " / ".join(m.label for m in METHOD_REGISTRY.values() if m.cuts)
        with gr.Row():
            c["scheduler"] = gr.Radio(list(SCHEDULERS), value=defaults.scheduler, elem_id="scheduler",
                                      label=f"{scheduled}: how much of the block to verify (none = all)")
            c["confidence_threshold"] = gr.Slider(0.0, 1.0, value=defaults.confidence_threshold, step=0.05,
                                                  elem_id="threshold", label=f"{scheduled} static cut: confidence threshold")
            c["overlap"] = gr.Radio(list(OVERLAP_CHOICES), value=defaults.overlap, elem_id="overlap",
                                    label="Overlap each step's host work with the next step's device work "
                                          "(auto: on for CUDA, off on the CPU)")

    return c, show_drafts


def _results(methods: list[str], defaults: Settings, drafters: dict[str, str],
             servers=()) -> tuple[list, list, list]:
    """The lane boxes (then the server lanes' boxes, in the same row) and the charts under them."""
    gr.HTML(LEGEND_HTML)
    gr.Markdown(ACCEPTANCE_CAPTION, elem_classes="note")
    with gr.Row(equal_height=False, elem_id="compare-lanes"):
        boxes = [gr.HTML(empty_lane_html(m, "waiting", drafters[m]), elem_id=f"lane-{m}",
                         min_width=300, visible=m in defaults.methods) for m in methods]
        server_boxes = server_lanes.boxes(list(servers))
    gr.Markdown(TIMELINE_CAPTION, elem_classes="note")
    timeline = gr.Plot(elem_id="timeline", show_label=False)
    gr.Markdown("**Below:** tokens against time (the steepest line is the fastest lane), each position's conditional "
                "acceptance (solid) and survival (dotted) along the block, and for a scheduled drafter whether its confidences predicted what the target "
                "accepted.", elem_classes="note")
    cutting = any(METHOD_REGISTRY[m].cuts for m in defaults.methods)
    with gr.Row(elem_classes="chart-row"):
        small = [gr.Plot(elem_id="progress", show_label=False), gr.Plot(elem_id="acceptance", show_label=False),
                 gr.Plot(elem_id="survival", show_label=False, visible=cutting)]
    gr.Markdown(CHARTS_CAPTION, elem_classes="note")
    with gr.Row(elem_classes="chart-row"):
        lower = [gr.Plot(elem_id=e, show_label=False) for e in ("accepted-histogram", "formula-vs-measured",
                                                                 "time-split")]
    device_recordings.compare_layout()  # the default comparison recorded on a GPU (a CPU's until one exists)
    return boxes, [timeline, *small, *lower], server_boxes


def layout(methods: list[str], defaults: Settings, drafters: dict[str, str], block_top: int = MAX_DRAFTS,
           servers=()) -> CompareView:
    """Build the tab's components (inside a gr.Blocks); no behaviour. block_top: the block control's top;
    servers: the operator's server lanes."""
    prompt, examples, (run_button, stop_button, copy_button, download_button, upload) = _prompt_row(defaults)
    controls, show_drafts = _settings(methods, defaults, block_top)
    controls["prompt"] = prompt
    link_notes = gr.HTML("", elem_id="link-notes", visible=False)
    focus = gr.HTML("", elem_id="compare-focus", visible=False)  # what a lesson point asks to look at
    share_link = gr.Textbox(label="Link to this comparison (opening it restores these settings, then shows the run "
                                  "this server recorded for them, or runs them)",
                            elem_id="share-link", visible=False, interactive=False, buttons=["copy"], max_lines=1)
    page_address = gr.Textbox(visible=False)
    status = gr.HTML(status_html("Press Run. Lanes run one after another, so no lane slows another's timings."),
                     elem_id="status")
    boxes, charts, server_boxes = _results(methods, defaults, drafters, servers)
    # The canonical query of the link this page was opened with: set once by the page load, it runs the
    # comparison. (A text box, not gr.State, which would hold a heartbeat connection open for every visitor.)
    link_query = gr.Textbox(visible=False, elem_id="link-query")
    controls = {name: controls[name] for name in PARSERS}
    assert tuple(chart.elem_id for chart in charts) == CHART_IDS
    return CompareView(prompt, run_button, stop_button, copy_button, download_button, upload, controls, show_drafts,
                       link_notes, share_link, page_address, status, boxes, charts, link_query, focus, examples,
                       server_boxes)


# --- the behaviour ---------------------------------------------------------------------------------------

class LaneViews:
    """How this page draws a comparison: each lane's HTML and the charts, for the lanes this engine runs."""

    def __init__(self, engine: EngineLike, sessions: SessionStore):
        self.sessions = sessions
        self.methods = list(engine.methods())
        # shown in each lane's header: the drafter at temperature 0, and above it (a checkpoint trained for sampling)
        self.drafters = {m: engine.drafter_label(m) for m in self.methods}
        self.sampled_drafters = {m: engine.drafter_label(m, 1.0) for m in self.methods}
        self.caps = {m: engine.max_drafts(m) for m in self.methods}  # a block drafter's trained block
        self.defaults = default_settings(self.methods)

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
        draw it forty times, nor wait for forty drawings (app/hosting/sessions.py DrawnOnce)."""
        def draw() -> tuple:
            boxes, figures = self.views.draw(comparison, show, projector)
            return boxes, tuple(as_sent(f) for f in figures)

        return self.sessions.replays.get(f"{key}|{show}|{projector}", comparison, draw)


def raw_controls(prompt, methods, temperature, serial_k, drafts_per_block, max_new_tokens, seed, verify_rule, scheduler,
                 confidence_threshold, overlap, tree_nodes, requests_at_once) -> dict:
    """The Run button's control values, as the page sends them (unchecked), by the names parse_controls reads."""
    return dict(prompt=prompt, methods=methods, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                serial_k=serial_k, drafts_per_block=drafts_per_block, verify_rule=verify_rule, scheduler=scheduler,
                confidence_threshold=confidence_threshold, overlap=overlap, tree_nodes=tree_nodes,
                requests_at_once=requests_at_once)


class RunController:
    """Runs comparisons: checks the settings, runs the lanes (app/runner.py), yields the page's outputs as they
    fill, records complete runs; Stop, the time limit, saved files and the download. Per-session state lives in
    `sessions` (app/hosting/sessions.py), nothing here."""

    def __init__(self, engine: EngineLike, views: LaneViews, replays: Replays, sessions: SessionStore,
                 run_lanes: Callable[..., Iterator[None]] = run_lanes_here, max_run_s: float = MAX_RUN_S):
        self.engine, self.views, self.replays, self.sessions = engine, views, replays, sessions
        self.run_lanes = run_lanes
        self.max_run_s = max_run_s
        self.servers = None  # the server lanes (app/servers/lanes.py ServerLaneHandlers), where the page has any

    def _live_lanes(self, settings: Settings, lane_runs: list[LaneRun], ended: dict[str, LaneResult]) -> Comparison:
        """The comparison so far: ended lanes with their summaries, the running one without."""
        lanes = {}
        drafters = self.views.sampled_drafters if settings.temperature > 0 else self.views.drafters
        for run in lane_runs:
            if run.state not in ("waiting", "running") and run.method not in ended:
                ended[run.method] = LaneResult.ended(run.method, run.steps, drafters[run.method], run.state,
                                                     max(1, run.timing_runs), run.rates, run.engine_share)
            lanes[run.method] = ended.get(run.method) or LaneResult(run.method, tuple(run.steps),
                                                                    drafters[run.method], run.state)
        return Comparison(settings_dict(settings), lanes, self.engine.device_name, self.engine.preset,
                          dict(versions()))

    def _checked(self, settings: Settings) -> list[LaneRun]:
        """The lanes to run, every setting checked by the engine first (raises EngineError)."""
        lane_runs = [LaneRun(m, settings.config(m)) for m in settings.methods]
        for lane in lane_runs:
            lane.config.validate()
        self.engine.encode_prompt(settings.prompt)
        return lane_runs

    def run_comparison(self, settings: Settings, show: bool, session: str, reuse: bool = False,
                       pin: bool = False, timing_runs: int | None = None) -> Iterator[tuple]:
        """Run the chosen lanes one after another and yield the page's outputs as they fill. The one place
        lanes run: the button, a share link and the API all come here. reuse: show the recorded run of the
        same configuration when there is one (share links: thirty visitors of one link compute it once);
        pin: the operator's link, whose recorded run is never evicted; timing_runs: each lane's complete runs
        (default: the lane runner's own, app/runner.py TIMING_RUNS)."""
        try:
            lane_runs = self._checked(settings)
        except EngineError as exc:
            yield self.views.refused(str(exc))
            return
        state = self.sessions.get(session)
        asked_s = state.run_pressed_s  # an identical run that ended since is shared (app/runner.py run_lanes)
        if state.withdrawn():
            yield status_html("withdrawn: Stop was pressed while this run waited in the queue; nothing ran."), \
                *[gr.skip()] * (len(self.views.methods) + NUM_CHARTS)
            return
        key = self.replays.result_key(settings)
        replay = self.replays.recorded_outputs(key, session, show) if reuse else None
        if replay is not None:
            if pin:
                self.replays.pin(key)
            yield replay
            return
        stop = state.stop = threading.Event()
        try:
            yield from self._run(settings, show, lane_runs, stop, state, key, pin, timing_runs, asked_s)
        finally:
            stop.set()  # a closed page or a cancelled event also ends the worker
            state.stop = None

    def _run(self, settings: Settings, show: bool, lane_runs: list[LaneRun], stop: threading.Event, state,
             key: str, pin: bool = False, timing_runs: int | None = None,
             asked_s: float | None = None) -> Iterator[tuple]:
        shown, drawn, ended = {}, {}, {}
        last_draw, started, out_of_time = 0.0, time.monotonic(), False
        runs = {"asked_s": asked_s} if timing_runs is None else {"timing_runs": timing_runs, "asked_s": asked_s}
        for _ in self.run_lanes(self.engine, settings.prompt, lane_runs, stop, **runs):
            now = time.monotonic()
            if now - started > self.max_run_s and not stop.is_set():
                stop.set()  # the running lane ends after its current step
                out_of_time = True
            running = next((lane for lane in lane_runs if lane.state == "running"), None)
            if running is not None and now - last_draw < REDRAW_EVERY_S:
                continue
            last_draw = now
            message = running_message(running, self.engine.device_name, settings.max_new_tokens) if running \
                else timing_message(lane_runs)
            live = self._live_lanes(settings, lane_runs, ended)
            yield status_html(message), *self.views.lanes_html(live, show, shown, drawn, True), *[None] * NUM_CHARTS
        comparison = self._live_lanes(settings, lane_runs, {})  # each step's fastest timing, now that all have ended
        recorded = self.sessions.recorded.last(key)
        shared = recorded is not None and all(  # it took the lanes of the identical run just recorded (app/runner.py)
            lane.steps and recorded.lanes.get(lane.method) is not None and recorded.lanes[lane.method].steps
            and recorded.lanes[lane.method].steps[-1] is lane.steps[-1] for lane in lane_runs)
        comparison = recorded if shared else comparison  # that very run: a class sharing it draws it once
        state.last = comparison
        # Only complete runs are replayed: every lane done and every timing run it began finished (a Stop or the
        # time limit during the timing runs leaves lanes "done" with fewer runs behind their figures).
        if all(lane.state == "done" for lane in lane_runs) and not stop.is_set():
            if shared and pin:
                self.replays.pin(key)
            elif not shared:
                self.sessions.recorded.remember(key, comparison, pinned=pin)
        text, error = self._final_status(lane_runs, stop, out_of_time)
        text += self._capped_note(settings) + load_note(settings) + clock_note(comparison, runner.REPEAT_WITHIN_S) \
            + prose_note(settings.prompt)
        final = (lambda: (self.views.lanes_html(comparison, show, {}, {}, False),
                          tuple(as_sent(f) for f in comparison_figures(comparison, state.projector))))
        boxes, figures = (self.sessions.replays.get(f"shared|{key}|{show}|{state.projector}", comparison, final)
                          if shared else (self.views.lanes_html(comparison, show, shown, drawn, False),
                                          comparison_figures(comparison, state.projector)))
        yield status_html(text, error=error), *boxes, *figures

    def _capped_note(self, settings: Settings) -> str:
        """Where a lane drafted less than asked, because its drafter was trained on a shorter block."""
        caps = self.views.caps
        capped = [f"{method_label(m)} drafted {caps[m]} per step (its trained block), not {asked}"
                  for m in settings.methods if METHOD_REGISTRY[m].drafts
                  and caps.get(m) is not None and (asked := settings.config(m).drafts_per_step) > caps[m]]
        return f" {'; '.join(capped)}." if capped else ""

    def _final_status(self, lane_runs: list[LaneRun], stop: threading.Event, out_of_time: bool) -> tuple[str, bool]:
        errors = [f"{lane.method}: {lane.state}" for lane in lane_runs if lane.state.startswith("error")]
        done = "stopped" if stop.is_set() else "done"
        text = "; ".join(errors) if errors else f"{done} on {self.engine.device_name}. Hover any token for its numbers, or click it to pin them."
        if out_of_time:
            errors.append("time limit")
            text = (f"stopped after {self.max_run_s:.0f} s, the most one comparison may take on this shared server; "
                    f"fewer new tokens or fewer lanes fit. {text}")
        return text, bool(errors)

    # Event handlers (their names are the events' names in tests and logs).

    def on_run(self, prompt, methods, temperature, serial_k, drafts_per_block, max_new_tokens, seed, verify_rule,
               show_drafts, scheduler, confidence_threshold, overlap, tree_nodes, requests_at_once,
               request: gr.Request):
        """Check every raw value (events here skip Gradio's preprocessing), then run."""
        raw = raw_controls(prompt, methods, temperature, serial_k, drafts_per_block, max_new_tokens, seed, verify_rule,
                           scheduler, confidence_threshold, overlap, tree_nodes, requests_at_once)
        try:
            settings, show = parse_controls(raw, self.views.methods), parse_show_drafts(show_drafts)
        except SettingError as exc:
            yield self.views.refused(str(exc))
            return
        yield from self.run_comparison(settings, show, request.session_hash)

    def show_lanes(self, selected):
        chosen = selected if isinstance(selected, (list, tuple)) else []
        cutting = any(m in METHOD_REGISTRY and METHOD_REGISTRY[m].cuts for m in chosen)
        return *[gr.update(visible=m in chosen) for m in self.views.methods], gr.update(visible=cutting)

    def on_stop(self, request: gr.Request):
        """Stop your own run: the running one ends within a batch of steps (a quarter of a second); one still
        waiting in the queue is withdrawn. (Gradio's `cancels=` would also withdraw a queued run, but it kills
        a running one without its last update: the finished lanes and the charts would never be drawn.)"""
        self.sessions.get(request.session_hash).press_stop()

    def on_requested(self, request: gr.Request):
        self.sessions.get(request.session_hash).press_run()

    # (session) -> (its place, seconds until its run should start): the app's queue (app/main.py); None: no words
    where: Callable[[str], tuple[int, float]] | None = None

    def where_it_stands(self, prompt, methods, temperature, serial_k, drafts_per_block, max_new_tokens, seed,
                        verify_rule, show_drafts, scheduler, confidence_threshold, overlap, tree_nodes,
                        requests_at_once, request: gr.Request):
        """Beside a Run press, outside the queue: a run expected to wait long is told so on the status line, with
        the recorded run of the same settings when this server has one (app/hosting/fairness.py waiting_note)."""
        raw = raw_controls(prompt, methods, temperature, serial_k, drafts_per_block, max_new_tokens, seed, verify_rule,
                           scheduler, confidence_threshold, overlap, tree_nodes, requests_at_once)
        try:
            settings = parse_controls(raw, self.views.methods)
        except SettingError:
            return gr.skip()  # the run itself says what is wrong
        if self.where is None:
            return gr.skip()
        from ..hosting.fairness import waiting_note

        recorded = self.sessions.recorded.last(self.replays.result_key(settings))
        note = waiting_note(*self.where(request.session_hash), recorded.recorded_at if recorded else None,
                            build_query(settings, self.engine.preset))
        return gr.skip() if note is None else note

    @staticmethod
    def on_example(index):
        """The example prompt the page asks for by its index (an API client can send any value)."""
        prompts = example_prompts()
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(prompts):
            return prompts[index]
        raise gr.Error(f"there is no example {quoted(index)}: the examples are numbered 0 to {len(prompts) - 1}",
                       print_exception=False)

    def offer_download(self, request: gr.Request):
        """After a run: the session's comparison as one JSON file, every lane's trace with its settings."""
        state = self.sessions.peek(request.session_hash)
        if state is None or state.last is None:
            return gr.update(visible=False)
        comparison = state.last if self.servers is None else \
            replace(state.last, servers=self.servers.figures(request.session_hash))  # marked as the server's report
        return gr.update(value=str(download_path(comparison.to_json())), visible=True)

    def open_saved(self, data, show_drafts, request: gr.Request):
        """Show a saved comparison exactly as it was recorded, without running any model. (Files are opened one
        at a time: what the last one's reading and drawing freed goes back to the system first.)"""
        memory.release()
        if not isinstance(data, bytes):  # an API client's string, dict or number (app/hosting/uploads.py)
            return self.views.refused(NO_FILE)
        try:
            comparison = read_comparison(data)
        except RecordError as exc:
            return self.views.refused(f"cannot open that file: {exc}")
        self.sessions.opened(request.session_hash, comparison)  # the Step-through and Why tabs read it too
        return self.replays.show_recorded(comparison, show_drafts if isinstance(show_drafts, bool) else True,
                                  "opened from a file", self.views.projector(request.session_hash))

    def redraw_charts(self, session: str) -> tuple:
        """The charts of the session's last comparison drawn again (projector mode turned on or off); skips
        when it has none."""
        last = self.sessions.get(session).last
        if last is None:
            return (gr.skip(),) * NUM_CHARTS
        return self.views.draw(last, True, self.views.projector(session))[1]


class LinkHandlers:
    """Share links: opening the page with one (its controls set, its recorded run replayed or run afresh), and
    making one from the controls."""

    def __init__(self, engine: EngineLike, views: LaneViews, replays: Replays, run: RunController,
                 pin_key: str | None = None):
        self.engine, self.views, self.replays, self.run = engine, views, replays, run
        self.pin_key = pin_key or None  # a link opened with `pin=` this key pins its recorded run (app/recordings.py)

    def pins(self, request: gr.Request | None) -> bool:
        """Whether the page was opened with the operator's pin key (`pin=KEY` in its address)."""
        given = [v for k, v in query_items(request) if k == "pin"]
        return self.pin_key is not None and len(given) == 1 and hmac.compare_digest(
            given[0].encode("utf-8", "surrogatepass"), self.pin_key.encode("utf-8", "surrogatepass"))

    def run_link(self, query, show_drafts, request: gr.Request):
        if not isinstance(query, str) or not query:
            yield (gr.skip(),) * (1 + len(self.views.methods) + NUM_CHARTS)
            return
        settings, _ = parse_query(parse_qsl(query, keep_blank_values=True), self.views.defaults,
                                  available=self.views.methods)
        yield from self.run.run_comparison(settings, show_drafts if isinstance(show_drafts, bool) else True,
                                           request.session_hash, reuse=True, pin=self.pins(request))

    def restore(self, request: gr.Request):
        """Opening the page: a share link's parameters set every control, then the comparison runs. A link
        whose comparison this server has recorded is shown at once, from here: it never waits in the
        engine's queue behind other visitors' runs (a classroom on one link), nor fills it."""
        items = query_items(request)
        adopt_from_link(self.replays.sessions, request)
        settings, messages = parse_query(items, self.views.defaults, available=self.views.methods,
                                         preset=self.engine.preset)
        outputs = 1 + len(self.views.methods) + NUM_CHARTS
        if not messages and not is_link(items):
            return (gr.skip(),) * (len(PARSERS) + 2 + outputs)
        values = control_values(settings)
        notes = notes_update(messages, "This link had problems; the rest of it was used:")
        replay = (self.replays.recorded_outputs(self.replays.result_key(settings), request.session_hash, True)
                  if is_link(items) else None)
        if replay is not None:
            if self.pins(request):
                self.replays.pin(self.replays.result_key(settings))
            return *values, notes, gr.skip(), *replay
        return *values, notes, build_query(settings) if is_link(items) else gr.skip(), *[gr.skip()] * outputs

    def make_link(self, address, *values):
        """The link to the current controls, on the page's own address (the browser fills `address`)."""
        try:
            settings = parse_controls(dict(zip(PARSERS, values)), self.views.methods)
        except SettingError as exc:
            return gr.update(value="", visible=False), notes_update([str(exc)], "No link made:")
        base = address if isinstance(address, str) and address.startswith(("http://", "https://")) else ""
        link = f"{base}?{build_query(settings, self.engine.preset)}"
        if len(link) > MAX_LINK_CHARS:
            return gr.update(value="", visible=False), notes_update(
                [f"this comparison's link would be {len(link):,} characters, more than this server can open "
                 f"({MAX_LINK_CHARS:,}); a shorter prompt fits, or share the file from “Download this comparison”"],
                "No link made:")
        long = (notes_update([f"it is {len(link):,} characters long; some browsers and servers cut links past "
                              f"about {LONG_LINK_CHARS:,}, so a shorter prompt travels more safely"],
                             "Note on this link:") if len(link) > LONG_LINK_CHARS else notes_update([], ""))
        return gr.update(value=link, visible=True), long


@dataclass(frozen=True)
class CompareHandlers:
    """The tab's handlers, one job each: drawing, the replay cache, running, links."""

    views: LaneViews
    replays: Replays
    run: RunController
    links: LinkHandlers

    @classmethod
    def over(cls, engine: EngineLike, sessions: SessionStore, run_lanes: Callable[..., Iterator[None]] = run_lanes_here,
             max_run_s: float = MAX_RUN_S, pin_key: str | None = None) -> "CompareHandlers":
        views = LaneViews(engine, sessions)
        replays = Replays(engine, views, sessions)
        run = RunController(engine, views, replays, sessions, run_lanes, max_run_s)
        return cls(views, replays, run, LinkHandlers(engine, views, replays, run, pin_key))

    @property
    def methods(self) -> list[str]:
        return self.views.methods


def wire(view: CompareView, handlers: CompareHandlers, demo: gr.Blocks) -> None:
    """Connect the components to the handlers."""
    run, links = handlers.run, handlers.links
    quiet = dict(api_visibility="private", show_progress="hidden")
    download = dict(fn=run.offer_download, inputs=None, outputs=[view.download_button], **quiet)
    engine_queue = dict(concurrency_limit=1, concurrency_id="engine")
    run_inputs = [view.prompt, view.controls["methods"], *(view.controls[n] for n in (
        "temperature", "serial_k", "drafts_per_block", "max_new_tokens", "seed", "verify_rule")), view.show_drafts,
        view.controls["scheduler"], view.controls["confidence_threshold"], view.controls["overlap"],
        view.controls["tree_nodes"], view.controls["requests_at_once"]]
    view.run_button.click(run.on_run, inputs=run_inputs, outputs=view.run_outputs, preprocess=False,
                          api_name="run", show_progress="minimal", show_progress_on=[view.status],  # its place in line
                          **engine_queue).then(**download)
    # One file read at a time (each takes many times its size while it is read and drawn), apart from the engine.
    view.upload.upload(run.open_saved, inputs=[view.upload, view.show_drafts], outputs=view.run_outputs,
                       concurrency_limit=1, concurrency_id="open-file", api_name="open_saved", show_progress="hidden")
    view.examples.click(run.on_example, inputs=[view.examples], outputs=[view.prompt], preprocess=False,
                        queue=False, **quiet)
    view.run_button.click(run.on_requested, inputs=None, outputs=None, queue=False, **quiet)
    view.run_button.click(run.where_it_stands, inputs=run_inputs, outputs=[view.status], preprocess=False,
                          queue=False, **quiet)  # after the run's own: it finds the run in line
    view.stop_button.click(run.on_stop, inputs=None, outputs=None, queue=False, api_name="stop")
    view.controls["methods"].change(run.show_lanes, inputs=[view.controls["methods"]],
                                    outputs=[*view.lane_boxes, view.survival_plot], preprocess=False, queue=False,
                                    **quiet)
    view.copy_button.click(links.make_link, inputs=[view.page_address, *view.controls.values()],
                           outputs=[view.share_link, view.link_notes], js=PAGE_ADDRESS_JS, preprocess=False,
                           concurrency_limit=None, **quiet) \
        .then(None, inputs=[view.share_link], outputs=None, js=COPY_JS)
    # Outside the queue: opening the page (a link's settings, a recorded run's replay, its download) never waits
    # behind runs nor takes one of the queue's places, so a class opening one recorded link at once is served at once.
    demo.load(links.restore, inputs=None,
              outputs=[*view.controls.values(), view.link_notes, view.link_query, *view.run_outputs],
              queue=False, **quiet).then(**download, queue=False)
    view.link_query.change(links.run_link, inputs=[view.link_query, view.show_drafts], outputs=view.run_outputs,
                           preprocess=False, js=WHEN_IDLE_JS, **engine_queue, **quiet).then(**download)


def render(engine: EngineLike, demo: gr.Blocks, sessions: SessionStore,
           run_lanes: Callable[..., Iterator[None]] = run_lanes_here,
           max_run_s: float = MAX_RUN_S, servers: server_lanes.ServerLaneHandlers | None = None,
           pin_key: str | None = None) -> tuple[CompareView, CompareHandlers]:
    """The tab: its layout, its handlers, wired. run_lanes advances the lanes (app/runner.py's in this process;
    app/hosting/gpu.py's under ZeroGPU); max_run_s: past this many seconds a comparison is stopped (its finished
    lanes kept); servers: the server lanes run beside the local ones (app/servers/lanes.py), if any."""
    handlers = CompareHandlers.over(engine, sessions, run_lanes, max_run_s, pin_key)
    handlers.run.servers = servers
    views = handlers.views
    view = layout(views.methods, views.defaults, views.drafters, block_most(views.methods, views.caps),
                  servers.specs if servers else ())
    if servers is not None and servers.specs:
        server_lanes.wire(view, servers)  # first: a page sends a click's events in the order they were wired
    wire(view, handlers, demo)
    return view, handlers
