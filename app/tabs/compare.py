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
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import gradio as gr

from engine.contract.interface import EngineLike
from engine.contract.methods import METHOD_REGISTRY, method_label
from engine.contract.presets import OVERLAP_CHOICES, SCHEDULERS, VERIFY_RULES
from engine.contract.types import MAX_DRAFTS, MAX_TEMPERATURE, MAX_TREE_NODES, EngineError

from ..draw.charts import CHART_IDS, NUM_CHARTS, comparison_figures
from ..examples import example_prompts
from ..words import prose_note
from ..settings import (MAX_NEW_TOKENS_UI, MAX_PROMPT_CHARS, MAX_REQUESTS_AT_ONCE_UI, PARSERS, RUN_INPUTS,
                        SettingError, Settings, quoted)
from ..links import build_query
from ..comparison import RecordError, read_comparison
from ..draw.render import LEGEND_HTML, clock_note, empty_lane_html, status_html
from ..run import runner
from ..run.controller import Finished, LiveRun
from ..run.plan import RunPlan, controls_by_name, read_controls
from ..run.runner import EVERY_RUN_FIRST, Turns, run_lanes as run_lanes_here
from ..hosting import memory
from ..hosting.disk import download_label
from ..servers import lanes as server_lanes
from ..run.sessions import SessionStore
from ..hosting.uploads import SavedFileButton
from . import device_recordings
from .compare_links import LONG_LINK_CHARS, MAX_LINK_CHARS, LinkHandlers
from .compare_views import (NOT_SELECTED, LaneViews, Replays, as_sent, control_values, download_path, load_note,
                            notes_update, query_items, running_message, timing_message, versions)

__all__ = ["CHART_IDS", "LONG_LINK_CHARS", "MAX_LINK_CHARS", "NOT_SELECTED", "NUM_CHARTS", "CompareHandlers",
           "LaneViews", "LinkHandlers", "Replays", "RunController", "as_sent", "clock_note", "control_values",
           "download_path", "notes_update", "query_items", "render", "versions"]

REDRAW_EVERY_S = 0.5  # lanes redraw at most this often while a lane runs (each redraw briefly holds
# the interpreter the engine runs in; a lane that ends is drawn while the next one has not started yet)
# While lanes run, the page gets only light updates (a running lane's new tokens, a finished lane's chips);
# the full lanes (hover text, lists of steps) and the charts are built and sent once, after the last lane:
# building and drawing them would otherwise share the cores, and the interpreter, with the lane being measured.
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
                       gr.DownloadButton(download_label(), elem_id="download", size="sm", visible=False),
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


def block_info(starts: dict[str, int], recorded: dict[str, bool]) -> str | None:
    """The block slider's note where its starts come from the recorded block sweep (app/blocks.py): where it starts
    at each temperature. None where neither does."""
    if not any(recorded.values()):
        return None
    if starts["0.0"] == starts["1.0"]:
        return f"Starts at {starts['0.0']}, the block recorded fastest for these drafters at temperature 0 and at 1."
    return (f"Starts at {starts['0.0']} at temperature 0 and {starts['1.0']} above it, the blocks recorded fastest "
            "for these drafters; it follows the temperature until you set it.")


def _settings(methods: list[str], defaults: Settings, block_top: int = MAX_DRAFTS,
              block_note: str | None = None) -> tuple[dict, gr.Checkbox]:
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
        c["drafts_per_step_serial"] = gr.Slider(1, MAX_DRAFTS, value=defaults.drafts_per_step_serial, step=1,
                                                elem_id="drafts-per-step-serial", label=_draft_label(False))
        c["drafts_per_step_one_pass"] = gr.Slider(1, block_top, value=min(defaults.drafts_per_step_one_pass, block_top),
                                                  step=1, elem_id="drafts-per-step-one-pass",
                                                  label=_draft_label(True, block_top), info=block_note)
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
           servers=(), block_note: str | None = None) -> CompareView:
    """Build the tab's components (inside a gr.Blocks); no behaviour. block_top: the block control's top;
    servers: the operator's server lanes; block_note: where the block control starts (block_info)."""
    prompt, examples, (run_button, stop_button, copy_button, download_button, upload) = _prompt_row(defaults)
    controls, show_drafts = _settings(methods, defaults, block_top, block_note)
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

def by_name(handle: Callable) -> Callable:
    """A Run event's handler that takes the controls as one dict by name (RUN_INPUTS) and the request. The page and
    the API still send the inputs in RUN_INPUTS order, and the API documents each under its name: the event's
    signature is made from RUN_INPUTS (one list of names, never a second hand-written one)."""

    def called(self, values, request):
        if request is None:
            *values, request = values
        return handle(self, controls_by_name(values), request)

    if inspect.isgeneratorfunction(handle):  # Gradio streams a generator's outputs: the event must be one too
        def event(self, *values, request=None):
            yield from called(self, values, request)
    else:
        def event(self, *values, request=None):
            return called(self, values, request)
    event = functools.wraps(handle)(event)
    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
    event.__signature__ = inspect.Signature([inspect.Parameter("self", plain),
                                             *(inspect.Parameter(name, plain) for name in RUN_INPUTS),
                                             inspect.Parameter("request", plain, annotation=gr.Request)])
    return event


class RunController:
    """Runs comparisons: plans them (app/run/plan.py), runs the plan (app/run/controller.py), draws each moment and
    the result, records complete runs; Stop, saved files and the download. Per-session state lives in `sessions`
    (app/run/sessions.py), nothing here."""

    def __init__(self, engine: EngineLike, views: LaneViews, replays: Replays, sessions: SessionStore,
                 run_lanes: Callable[..., Iterator] = run_lanes_here, max_run_s: float = MAX_RUN_S,
                 turns: Turns = EVERY_RUN_FIRST, servers: server_lanes.ServerLaneHandlers | None = None,
                 where: Callable[[str], tuple[int, float]] | None = None):
        self.engine, self.views, self.replays, self.sessions = engine, views, replays, sessions
        self.run_lanes, self.max_run_s, self.turns = run_lanes, max_run_s, turns
        self.servers = servers  # the server lanes (app/servers/lanes.py ServerLaneHandlers), where the page has any
        # (session) -> (its place, seconds until its run should start): the app's queue (app/main.py); None: no words
        self.where = where

    def run_comparison(self, settings: Settings, show: bool, session: str, reuse: bool = False,
                       pin: bool = False, timing_runs: int | None = None) -> Iterator[tuple]:
        """Run the chosen lanes one after another and yield the page's outputs as they fill. The one place
        lanes run: the button, a share link and the API all come here. reuse: show the recorded run of the
        same configuration when there is one (share links: thirty visitors of one link compute it once);
        pin: the operator's link, whose recorded run is never evicted; timing_runs: each lane's complete runs
        (default: the lane runner's own, app/run/runner.py TIMING_RUNS)."""
        try:
            plan = RunPlan.of(settings, self.engine)
        except EngineError as exc:
            yield self.views.refused(str(exc))
            return
        state = self.sessions.get(session)
        asked_s = state.run_pressed_s  # an identical run that ended since is shared (app/run/runner.py run_events)
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
            yield from self._run(plan, show, stop, state, key, pin, timing_runs, asked_s)
        finally:
            stop.set()  # a closed page or a cancelled event also ends the worker
            state.stop = None

    def _run(self, plan: RunPlan, show: bool, stop: threading.Event, state, key: str, pin: bool = False,
             timing_runs: int | None = None, asked_s: float | None = None) -> Iterator[tuple]:
        drafters = self.views.sampled_drafters if plan.settings.temperature > 0 else self.views.drafters
        run = LiveRun(self.engine, plan, drafters, versions(), self.run_lanes, self.turns, self.max_run_s)
        shown, drawn, last_draw = {}, {}, 0.0
        for moment in run.moments(stop, timing_runs, asked_s):
            now = time.monotonic()
            if moment.running is not None and now - last_draw < REDRAW_EVERY_S:
                continue
            last_draw = now
            message = (running_message(moment.running, moment.comparison.lanes.get(moment.running),
                                       self.engine.device_name, plan.settings.max_new_tokens)
                       if moment.running else timing_message(moment.repeating))
            yield status_html(message), *self.views.lanes_html(moment.comparison, show, shown, drawn, True), \
                *[None] * NUM_CHARTS
        finished = run.finished
        comparison, shared = self._recorded(finished, key, pin)
        state.last = comparison
        text, error = self._final_status(finished, plan)
        final = (lambda: (self.views.lanes_html(comparison, show, {}, {}, False),
                          tuple(as_sent(f) for f in comparison_figures(comparison, state.projector))))
        boxes, figures = (self.sessions.replays.get(f"shared|{key}|{show}|{state.projector}", comparison, final)
                          if shared else (self.views.lanes_html(comparison, show, shown, drawn, False),
                                          comparison_figures(comparison, state.projector)))
        yield status_html(text, error=error), *boxes, *figures

    def _recorded(self, finished: Finished, key: str, pin: bool):
        """The comparison to show, and whether it is the identical run just recorded, whose lanes this one took
        (app/run/runner.py): that very run, so a class sharing it draws it once. Only complete runs are recorded
        for replay (a Stop or the time limit during the timing runs leaves lanes "done" with fewer runs)."""
        comparison, recorded = finished.comparison, self.sessions.recorded.last(key)
        shared = recorded is not None and all(
            lane.steps and recorded.lanes.get(m) is not None and recorded.lanes[m].steps
            and recorded.lanes[m].steps[-1] is lane.steps[-1] for m, lane in comparison.lanes.items())
        comparison = recorded if shared else comparison
        if finished.complete:
            if shared and pin:
                self.replays.pin(key)
            elif not shared:
                self.sessions.recorded.remember(key, comparison, pinned=pin)
        return comparison, shared

    def _final_status(self, finished: Finished, plan: RunPlan) -> tuple[str, bool]:
        """The status once the run ended: how it ended, and notes on what ran (a lane that drafted fewer per step
        than asked, as the run's end says it ran), the load and the clock."""
        errors, settings = finished.errors, plan.settings
        done = "stopped" if finished.ended.stopped else "done"
        text = "; ".join(errors) if errors else f"{done} on {self.engine.device_name}. Hover any token for its numbers, or click it to pin them."
        if finished.out_of_time:
            errors.append("time limit")
            text = (f"stopped after {self.max_run_s:.0f} s, the most one comparison may take on this shared server; "
                    f"fewer new tokens or fewer lanes fit. {text}")
        capped = [f"{method_label(m)} drafted {ran} per step (its trained block), not {asked}"
                  for m, ran, asked in finished.ended.capped(plan.asked())]
        text += f" {'; '.join(capped)}." if capped else ""
        text += load_note(settings) + clock_note(finished.comparison, runner.REPEAT_WITHIN_S) + prose_note(settings.prompt)
        return text, bool(errors)

    # Event handlers (their names are the events' names in tests and logs).

    @by_name
    def on_run(self, controls: dict, request: gr.Request):
        """The Run button: its controls by name, every raw value checked (events here skip Gradio's preprocessing),
        then run."""
        try:
            settings, show = read_controls(controls, self.views.methods)
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

    @by_name
    def where_it_stands(self, controls: dict, request: gr.Request):
        """Beside a Run press, outside the queue: a run expected to wait long is told so on the status line, with
        the recorded run of the same settings when this server has one (app/hosting/fairness.py waiting_note)."""
        try:
            settings, _ = read_controls(controls, self.views.methods)
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


@dataclass(frozen=True)
class CompareHandlers:
    """The tab's handlers, one job each: drawing, the replay cache, running, links."""

    views: LaneViews
    replays: Replays
    run: RunController
    links: LinkHandlers

    @classmethod
    def over(cls, engine: EngineLike, sessions: SessionStore, run_lanes: Callable[..., Iterator] = run_lanes_here,
             max_run_s: float = MAX_RUN_S, pin_key: str | None = None, turns: Turns = EVERY_RUN_FIRST,
             servers: server_lanes.ServerLaneHandlers | None = None,
             where: Callable[[str], tuple[int, float]] | None = None) -> "CompareHandlers":
        views = LaneViews(engine, sessions)
        replays = Replays(engine, views, sessions)
        run = RunController(engine, views, replays, sessions, run_lanes, max_run_s, turns, servers, where)
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
    run_inputs = [view.show_drafts if name == "show_drafts" else view.controls[name] for name in RUN_INPUTS]
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
    block = view.controls["drafts_per_step_one_pass"]  # follows the visitor's temperature while at a start
    view.controls["temperature"].input(handlers.views.follow_temperature, inputs=[view.controls["temperature"], block],
                                       outputs=[block], queue=False, **quiet)
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
           run_lanes: Callable[..., Iterator] = run_lanes_here,
           max_run_s: float = MAX_RUN_S, servers: server_lanes.ServerLaneHandlers | None = None,
           pin_key: str | None = None, turns: Turns = EVERY_RUN_FIRST,
           where: Callable[[str], tuple[int, float]] | None = None) -> tuple[CompareView, CompareHandlers]:
    """The tab: its layout, its handlers, wired. run_lanes advances the lanes (app/run/runner.py's in this process;
    app/hosting/gpu.py's under ZeroGPU); max_run_s: past this many seconds a comparison is stopped (its finished
    lanes kept); servers: the server lanes run beside the local ones (app/servers/lanes.py), if any; turns: who
    goes first between two lanes (app/run/runner.py Turns); where: a browser's place in the app's queue and its
    expected wait (RunController.where_it_stands)."""
    handlers = CompareHandlers.over(engine, sessions, run_lanes, max_run_s, pin_key, turns, servers, where)
    views = handlers.views
    view = layout(views.methods, views.defaults, views.drafters, block_most(views.methods, views.caps),
                  servers.specs if servers else (), block_info(views.block_starts, views.block_recorded))
    if servers is not None and servers.specs:
        server_lanes.wire(view, servers)  # first: a page sends a click's events in the order they were wired
    wire(view, handlers, demo)
    return view, handlers
