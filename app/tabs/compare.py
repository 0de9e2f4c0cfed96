"""The Compare tab: one prompt, the chosen lanes side by side, live, the shared timeline and small charts.

Every control's raw value is checked by app/links.py inside the handlers (events run with
`preprocess=False`), so whatever a browser or an API client sends — text in a number field, None, a list —
ends as one line in the status, never as a traceback. The same settings travel in share links: opening
one restores every control and runs the comparison.
"""

from __future__ import annotations

import functools
import html
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl

import gradio as gr

from engine.methods import METHOD_REGISTRY
from engine.presets import OVERLAP_CHOICES, SCHEDULERS, VERIFY_RULES
from engine.summary import summarize
from engine.types import MAX_DRAFT_LEN, MAX_TEMPERATURE, EngineError

from ..charts import (acceptance_figure, accepted_length_figure, bubble_share_figure, predicted_vs_measured_figure,
                      progress_figure, survival_figure, timeline_figure)
from ..examples import example_prompts
from ..links import (MAX_NEW_TOKENS_UI, MAX_PROMPT_CHARS, PARSERS, SettingError, Settings, build_query,
                     default_settings, is_link, parse_controls, parse_query)
from ..record import LAST, Comparison, LastComparisons, RecordError, read_comparison, settings_dict
from ..render import LEGEND_HTML, lane_html
from ..runner import LaneRun, run_lanes as run_lanes_here

REDRAW_EVERY_S = 0.5  # lanes redraw at most this often while a lane runs (each redraw briefly holds
# the interpreter the engine runs in; a lane that ends is drawn while the next one has not started yet)
NUM_CHARTS = 7  # the run's outputs end with this many figures
# While lanes run, the page gets only light updates (a running lane's new tokens, a finished lane's chips);
# the full lanes (hover text, lists of steps) and the charts are built and sent once, after the last lane:
# building and drawing them would otherwise share the cores, and the interpreter, with the lane being measured.
NOT_SELECTED = "not selected"

# Before the share-link handler runs, the browser swaps in the page's own address (origin + path, so a
# link made on a Space points at the Space); afterwards it copies the link where the browser allows.
PAGE_ADDRESS_JS = "(address, ...controls) => [window.location.origin + window.location.pathname, ...controls]"
COPY_JS = "(link) => { if (link && navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {}); }"
# A share link runs as soon as the page has finished drawing itself (the browser is idle, or 3 s passed):
# on a small machine, a page still laying itself out would slow the first lane being measured.
WHEN_IDLE_JS = ("async (...inputs) => { await new Promise((done) => window.requestIdleCallback ? "
                "window.requestIdleCallback(done, {timeout: 3000}) : setTimeout(done, 0)); return inputs; }")

MAX_RUN_S = 180.0  # one comparison's wall-time limit: the engine is shared, so the queue must keep moving
LONG_LINK_CHARS = 8_000  # past this, some servers and proxies refuse the address

_stop_events: dict[str, threading.Event] = {}  # one per browser session, so Stop only stops your own run
# Stop also withdraws a run still waiting in the queue: when a session pressed Run, and when it pressed Stop
# with no run of its own going (monotonic seconds, newest last; both forgotten when its run starts).
_run_requested: dict[str, float] = {}
_stop_pressed: dict[str, float] = {}
MAX_TRACKED_SESSIONS = 4096  # past this the oldest marks are forgotten (pages closed while queued)


def _mark(marks: dict[str, float], session: str) -> None:
    marks.pop(session, None)
    marks[session] = time.monotonic()
    while len(marks) > MAX_TRACKED_SESSIONS:
        marks.pop(next(iter(marks)))


def _withdrawn(session: str) -> bool:
    """Whether this session pressed Stop after it pressed Run, before its run started; forgets both marks."""
    requested, stopped = _run_requested.pop(session, None), _stop_pressed.pop(session, None)
    return requested is not None and stopped is not None and stopped > requested


RESULTS = LastComparisons(limit=32)  # complete runs by configuration, oldest evicted (share links reuse them)


def _result_key(engine, settings: Settings) -> str:
    """Everything a run's outcome depends on: the models, the device and every setting."""
    return json.dumps([engine.preset, engine.device_name, settings_dict(settings)], sort_keys=True)


@functools.cache
def _versions() -> dict:
    """Versions that shape a run's numbers, read once from the installed packages (no import of torch here)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("torch", "transformers", "gradio"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def _download_path(session: str) -> Path:
    """One file per browser session, overwritten by its next run, so downloads never pile up."""
    folder = Path(tempfile.gettempdir()) / "speclab-comparisons"
    folder.mkdir(exist_ok=True)
    safe = "".join(c for c in session if c.isalnum())[:32] or "session"
    return folder / f"speclab-comparison-{safe}.json"


def _status(text: str, error: bool = False) -> str:
    cls = "status-error" if error else "note"
    return f'<div class="{cls}">{html.escape(text)}</div>'


def _running_message(lane: LaneRun, engine, max_new_tokens: int) -> str:
    """The status while a lane runs: its numbers so far (its own box shows only its tokens until it ends)."""
    message = f"running {METHOD_REGISTRY[lane.method].label} on {engine.device_name}…"
    if lane.steps:
        s = summarize(lane.steps, max_new_tokens, engine.eos_id)
        message += f" {s.num_new_tokens} of {max_new_tokens} tokens, τ {s.tau:.2f}, {s.tokens_per_s:.0f} tokens/s so far"
    return message


def _notes(messages: list[str], heading: str):
    """The link notes' update: the messages under a heading, or hidden when there are none."""
    if not messages:
        return gr.update(value="", visible=False)
    items = "".join(f"<li>{html.escape(m)}</li>" for m in messages)
    return gr.update(value=f'<div class="status-error link-notes">{html.escape(heading)}<ul>{items}</ul></div>',
                     visible=True)


def _show_drafts(value) -> bool:
    if not isinstance(value, bool):
        raise SettingError(f"show drafts must be true or false, got {value!r:.40}")
    return value


def _query_items(request: gr.Request | None) -> list[tuple[str, str]]:
    """The page's query parameters, repeats kept (Gradio forwards the page's query with every event)."""
    params = getattr(request, "query_params", None) if request is not None else None
    if params is None:
        return []
    if hasattr(params, "multi_items"):
        return [(str(k), str(v)) for k, v in params.multi_items()]
    return [(str(k), str(v)) for k, v in dict(params).items()]  # a pickled request holds a plain dict


def render(engine, methods: list[str], demo: gr.Blocks, run_lanes: Callable[..., Iterator[None]] = run_lanes_here,
           max_run_s: float = MAX_RUN_S):
    """methods: every lane this engine can run (one box each); the Lanes selector picks which run. run_lanes
    advances the lanes (app/runner.py's in this process; app/gpu.py's under ZeroGPU); max_run_s: past this
    many seconds a comparison is stopped (its finished lanes kept)."""
    methods_available = list(methods)
    defaults = default_settings(methods_available)
    examples = example_prompts()
    drafters = {m: engine.drafter_label(m) for m in methods}  # which drafter each lane runs, in its header
    with gr.Row(equal_height=True):
        prompt = gr.Textbox(label="Prompt", value=defaults.prompt, lines=5, max_lines=12, elem_id="prompt", scale=4,
                            max_length=MAX_PROMPT_CHARS)
        with gr.Column(scale=1, min_width=160):
            run_button = gr.Button("Run", variant="primary", elem_id="run")
            stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
            copy_button = gr.Button("Copy link", elem_id="copy-link", size="sm")
            download_button = gr.DownloadButton("Download this comparison", elem_id="download", size="sm",
                                                visible=False)
            upload = gr.UploadButton("Open a saved comparison", elem_id="open-saved", size="sm",
                                     file_types=[".json"], type="binary")
    gr.Examples(examples=[[e] for e in examples], inputs=[prompt], label="Examples (the tiny models know Python)",
                examples_per_page=6)
    lanes = gr.CheckboxGroup([(METHOD_REGISTRY[m].label, m) for m in methods], value=list(defaults.methods),
                             label="Lanes", elem_id="lanes")
    with gr.Row():
        temperature = gr.Slider(0.0, MAX_TEMPERATURE, value=defaults.temperature, step=0.05,
                                label="Temperature (0 = greedy)", elem_id="temperature")
        draft_len = gr.Slider(1, MAX_DRAFT_LEN, value=defaults.draft_len, step=1, elem_id="draft-len",
                              label="AR / Classic: draft length K (serial forwards per step)")
        block_len = gr.Slider(1, MAX_DRAFT_LEN, value=defaults.block_len, step=1, elem_id="block-len",
                              label="DFlash / DSpark: tokens drafted per block (at most what it was trained on)")
        max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS_UI, value=defaults.max_new_tokens, step=1,
                                   label="Max new tokens", elem_id="max-new-tokens")
    with gr.Accordion("More settings", open=False):
        with gr.Row():
            # Text, not a number box: a browser's numbers are doubles, and a seed may need all 63 bits.
            seed = gr.Textbox(value=str(defaults.seed),
                              label="Seed (temperature > 0; a whole number from 0 to 2⁶³ − 1)",
                              max_lines=1, elem_id="seed")
            verify_rule = gr.Radio(list(VERIFY_RULES), value=defaults.verify_rule, elem_id="verify-rule",
                                   label="Verification rule at temperature > 0")
            show_drafts = gr.Checkbox(value=True, label="Show rejected, unverified and cut drafts inline")
        with gr.Row():
            scheduler = gr.Radio(list(SCHEDULERS), value=defaults.scheduler, elem_id="scheduler",
                                 label="DSpark: how much of the block to verify (none = all)")
            threshold = gr.Slider(0.0, 1.0, value=defaults.confidence_threshold, step=0.05, elem_id="threshold",
                                  label="DSpark static cut: confidence threshold")
            overlap = gr.Radio(list(OVERLAP_CHOICES), value=defaults.overlap, elem_id="overlap",
                               label="Overlap each step's host work with the next step's device work "
                                     "(auto: on for CUDA, off on the CPU)")
    link_notes = gr.HTML("", elem_id="link-notes", visible=False)
    share_link = gr.Textbox(label="Link to this comparison (opening it restores these settings and runs them)",
                            elem_id="share-link", visible=False, interactive=False, buttons=["copy"], max_lines=1)
    page_address = gr.Textbox(visible=False)
    status = gr.HTML(_status("Press Run. Lanes run one after another, so no lane slows another's timings."),
                     elem_id="status")
    gr.HTML(LEGEND_HTML)
    gr.Markdown("*Point 2 of the argument:* a drafted token is accepted with probability min(1, p_target / p_draft) "
                "(at temperature 0: when it is the target's own choice); hover any token for both probabilities, "
                "the ratio and the random draw r that decided it.", elem_classes="note")
    with gr.Row(equal_height=False):
        lane_boxes = [gr.HTML(lane_html(m, [], "", "waiting", 1, None, True, drafter=drafters[m]), elem_id=f"lane-{m}",
                              min_width=300, visible=m in defaults.methods)
                      for m in methods]
    gr.Markdown("**Timeline.** Each lane's measured work on one time axis: orange is drafting, blue is the "
                "target's verify forward, grey is host bookkeeping, and gaps are bubbles where nothing ran. "
                "Look at the AR row: every step starts with K thin orange draft forwards, one after another; "
                "the block drafters draft the whole block in one. *Point 6 of the argument:* the gaps are "
                "bubbles where the device idles; overlap (More settings) runs each step's host work under the "
                "next step's device work to remove them.", elem_classes="note")
    timeline = gr.Plot(elem_id="timeline", show_label=False)
    gr.Markdown("**Below:** tokens against time (the steepest line is the fastest lane), how acceptance holds up "
                "along the block, and for DSpark whether its confidences predicted what the target accepted.",
                elem_classes="note")
    with gr.Row():
        progress_plot = gr.Plot(elem_id="progress", show_label=False)
        acceptance_plot = gr.Plot(elem_id="acceptance", show_label=False)
        survival_plot = gr.Plot(elem_id="survival", show_label=False, visible="dspark" in defaults.methods)
    gr.Markdown("**How each lane did:** how many drafts each step kept (the papers' τ histograms), the measured "
                "speedup beside the formula τ / (1 + cost_draft / cost_target) fed with this run's own numbers "
                "(where they differ, bubbles and host work show), and where each lane's time went. *Point 7:* "
                "DSpark's Markov head orders its block, and ✂ in its lane marks where its scheduler cut the "
                "block before verification.", elem_classes="note")
    with gr.Row():
        histogram_plot = gr.Plot(elem_id="accepted-histogram", show_label=False)
        formula_plot = gr.Plot(elem_id="formula-vs-measured", show_label=False)
        time_split_plot = gr.Plot(elem_id="time-split", show_label=False)
    # The canonical query of the link this page was opened with: set once by the page load, it runs the
    # comparison. (A text box, not gr.State, which would hold a heartbeat connection open for every visitor.)
    link_query = gr.Textbox(visible=False, elem_id="link-query")

    # The Settings fields, in order, and the components that hold them.
    controls = dict(prompt=prompt, methods=lanes, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                    draft_len=draft_len, block_len=block_len, verify_rule=verify_rule, scheduler=scheduler,
                    confidence_threshold=threshold, overlap=overlap)
    assert list(controls) == list(PARSERS)
    charts = [timeline, progress_plot, acceptance_plot, survival_plot, histogram_plot, formula_plot, time_split_plot]
    assert len(charts) == NUM_CHARTS
    run_outputs = [status, *lane_boxes, *charts]
    plots = NUM_CHARTS

    def refused(message: str):
        return _status(f"⚠ {message}", error=True), *[gr.skip()] * (len(methods) + plots)

    def run_comparison(settings: Settings, show: bool, session: str, reuse: bool = False) -> Iterator[tuple]:
        """Run the chosen lanes one after another and yield the page's outputs as they fill. The one place
        lanes run: the button, a share link and the API all come here. reuse: show the recorded run of the
        same configuration when there is one (share links: thirty visitors of one link compute it once)."""
        try:
            lane_runs = [LaneRun(m, settings.config(m)) for m in settings.methods]
            for lane in lane_runs:
                lane.config.validate()
            engine.encode_prompt(settings.prompt)
        except EngineError as exc:
            yield refused(str(exc))
            return
        if _withdrawn(session):
            yield _status("withdrawn: Stop was pressed while this run waited in the queue; nothing ran."), \
                *[gr.skip()] * (len(methods) + plots)
            return
        key = _result_key(engine, settings)
        replay = recorded_outputs(key, session, show) if reuse else None
        if replay is not None:
            yield replay
            return
        stop = _stop_events[session] = threading.Event()
        greedy = settings.temperature == 0
        by_method = {lane.method: lane for lane in lane_runs}

        # Each lane's HTML as last sent, and the (steps, state) it showed. Live updates resend an unchanged lane
        # as the same string (Gradio sends no bytes for it), never gr.skip(): in Gradio 6 every skip adds a
        # component to the session's state for good, which grew the server by ~0.4 MiB a run.
        shown: dict[str, str] = {}
        drawn: dict[str, tuple] = {}

        def lanes_html(live: bool = False):
            """Every lane's HTML. live (while lanes still run): the light view of each lane, re-rendered only
            when it changed, so drawing never redoes finished work on the cores of the lane being measured.
            The full views (hover text, list of steps) come once, at the end."""
            baseline = by_method.get("baseline")
            baseline_summary = (summarize(baseline.steps, settings.max_new_tokens, engine.eos_id)
                                if baseline and baseline.steps else None)
            for m in methods:
                if m not in by_method:
                    if m not in shown:
                        shown[m] = lane_html(m, [], "", NOT_SELECTED, 1, None, True, drafter=drafters[m])
                    continue
                lane, mark = by_method[m], (len(by_method[m].steps), by_method[m].state)
                if live and drawn.get(m) == mark:
                    continue
                drawn[m] = mark
                shown[m] = lane_html(m, lane.steps, settings.prompt, lane.state, settings.max_new_tokens,
                                     engine.eos_id, greedy, baseline_summary, show, drafters[m], live=live)
            return [shown[m] for m in methods]

        try:
            last_draw, started, out_of_time = 0.0, time.monotonic(), False
            for _ in run_lanes(engine, settings.prompt, lane_runs, stop):
                now = time.monotonic()
                if now - started > max_run_s and not stop.is_set():
                    stop.set()  # the running lane ends after its current step
                    out_of_time = True
                running = next((lane for lane in lane_runs if lane.state == "running"), None)
                if running is not None and now - last_draw < REDRAW_EVERY_S:
                    continue
                last_draw = now
                message = _running_message(running, engine, settings.max_new_tokens) if running else "…"
                yield _status(message), *lanes_html(live=True), *[None] * plots  # charts: cleared until the end
            errors = [f"{lane.method}: {lane.state}" for lane in lane_runs if lane.state.startswith("error")]
            done = "stopped" if stop.is_set() else "done"
            text = "; ".join(errors) if errors else f"{done} on {engine.device_name}. Hover any token for its numbers."
            if out_of_time:
                errors.append("time limit")
                text = (f"stopped after {max_run_s:.0f} s, the most one comparison may take on this shared server; "
                        f"fewer new tokens or fewer lanes fit. {text}")
            comparison = Comparison(
                settings=settings_dict(settings), lanes={lane.method: list(lane.steps) for lane in lane_runs},
                drafters={lane.method: drafters[lane.method] for lane in lane_runs}, device=engine.device_name,
                preset=engine.preset, versions=dict(_versions()))
            LAST.remember(session, comparison)
            if all(lane.state == "done" for lane in lane_runs):  # only complete runs are worth replaying
                RESULTS.remember(key, comparison)
            yield _status(text, error=bool(errors)), *lanes_html(), *run_figures(
                {lane.method: lane.steps for lane in lane_runs}, settings.max_new_tokens)
        finally:
            stop.set()  # a closed page or a cancelled event also ends the worker
            _stop_events.pop(session, None)

    def run_figures(steps: dict, max_new_tokens: int) -> tuple:
        drafting = {m: s for m, s in steps.items() if m != "baseline"}
        n, eos = max_new_tokens, engine.eos_id
        return (timeline_figure(steps), progress_figure(steps), acceptance_figure(drafting),
                survival_figure(steps.get("dspark", [])), accepted_length_figure(drafting),
                predicted_vs_measured_figure(steps, n, eos), bubble_share_figure(steps, n, eos))

    def offer_download(request: gr.Request):
        """After a run: the session's comparison as one JSON file, every lane's trace with its settings."""
        comparison = LAST.last(request.session_hash)
        if comparison is None:
            return gr.update(visible=False)
        path = _download_path(request.session_hash)
        path.write_text(comparison.to_json(), encoding="utf-8")
        return gr.update(value=str(path), visible=True)

    def open_saved(data, show_drafts, request: gr.Request):
        """Show a saved comparison exactly as it was recorded, without running any model."""
        try:
            comparison = read_comparison(data if isinstance(data, (bytes, str)) else b"")
        except RecordError as exc:
            return refused(f"cannot open that file: {exc}")
        LAST.remember(request.session_hash, comparison)  # the Step-through tab shows it too
        return show_recorded(comparison, show_drafts if isinstance(show_drafts, bool) else True,
                             "opened from a file")

    def recorded_outputs(key: str, session: str, show: bool) -> tuple | None:
        """The page's outputs for the run this server recorded under `key` (it becomes the session's last
        comparison), or None when there is none."""
        recorded = RESULTS.last(key)
        if recorded is None:
            return None
        LAST.remember(session, recorded)
        return show_recorded(recorded, show, "the same comparison ran before on this server; this is that run")

    def show_recorded(comparison: Comparison, show: bool, how: str) -> tuple:
        """The page's outputs for a recorded comparison: its lanes and charts as they were measured."""
        saved = comparison.settings
        max_new, greedy = saved["max_new_tokens"], saved["temperature"] == 0
        baseline = comparison.lanes.get("baseline")
        baseline_summary = summarize(baseline, max_new, engine.eos_id) if baseline else None
        prompt_text = saved["prompt"]
        boxes = [gr.update(value=lane_html(m, comparison.lanes[m], prompt_text, "recorded", max_new, engine.eos_id,
                                           greedy, baseline_summary, show, comparison.drafters.get(m, "")),
                           visible=True)
                 if m in comparison.lanes else gr.update(visible=False) for m in methods]
        missing = [m for m in comparison.lanes if m not in methods]
        note = f" (lanes this server cannot show: {', '.join(missing)})" if missing else ""
        status = _status(html.escape(f"recorded {comparison.recorded_at} on {comparison.device}, preset "
                                     f"{comparison.preset} ({how}): nothing was rerun{note}."))
        return status, *boxes, *run_figures({m: s for m, s in comparison.lanes.items() if m in methods}, max_new)

    def on_run(prompt, methods, temperature, draft_len, block_len, max_new_tokens, seed, verify_rule, show_drafts,
               scheduler, confidence_threshold, overlap, request: gr.Request):
        """Check every raw value (events here skip Gradio's preprocessing), then run."""
        raw = dict(prompt=prompt, methods=methods, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                   draft_len=draft_len, block_len=block_len, verify_rule=verify_rule, scheduler=scheduler,
                   confidence_threshold=confidence_threshold, overlap=overlap)
        try:
            settings, show = parse_controls(raw, methods_available), _show_drafts(show_drafts)
        except SettingError as exc:
            yield refused(str(exc))
            return
        yield from run_comparison(settings, show, request.session_hash)

    def run_link(query, show_drafts, request: gr.Request):
        if not isinstance(query, str) or not query:
            yield (gr.skip(),) * len(run_outputs)
            return
        settings, _ = parse_query(parse_qsl(query, keep_blank_values=True), defaults, available=methods_available)
        yield from run_comparison(settings, show_drafts if isinstance(show_drafts, bool) else True,
                                  request.session_hash, reuse=True)

    def restore(request: gr.Request):
        """Opening the page: a share link's parameters set every control, then the comparison runs. A link
        whose comparison this server has recorded is shown at once, from here: it never waits in the
        engine's queue behind other visitors' runs (a classroom on one link), nor fills it."""
        items = _query_items(request)
        settings, messages = parse_query(items, defaults, available=methods_available, preset=engine.preset)
        if not messages and not is_link(items):
            return (gr.skip(),) * (len(controls) + 2 + len(run_outputs))
        values = [str(v) if name == "seed" else list(v) if name == "methods" else v
                  for name, v in ((name, getattr(settings, name)) for name in controls)]
        notes = _notes(messages, "This link had problems; the rest of it was used:")
        replay = recorded_outputs(_result_key(engine, settings), request.session_hash, True) if is_link(items) else None
        if replay is not None:
            return *values, notes, gr.skip(), *replay
        return *values, notes, build_query(settings) if is_link(items) else gr.skip(), *[gr.skip()] * len(run_outputs)

    def make_link(address, *values):
        """The link to the current controls, on the page's own address (the browser fills `address`)."""
        try:
            settings = parse_controls(dict(zip(controls, values)), methods_available)
        except SettingError as exc:
            return gr.update(value="", visible=False), _notes([str(exc)], "No link made:")
        base = address if isinstance(address, str) and address.startswith(("http://", "https://")) else ""
        link = f"{base}?{build_query(settings, engine.preset)}"
        long = (_notes([f"it is {len(link):,} characters long; some browsers and servers cut links past about "
                        f"{LONG_LINK_CHARS:,}, so a shorter prompt travels more safely"], "Note on this link:")
                if len(link) > LONG_LINK_CHARS else _notes([], ""))
        return gr.update(value=link, visible=True), long

    def show_lanes(selected):
        chosen = selected if isinstance(selected, (list, tuple)) else []
        return *[gr.update(visible=m in chosen) for m in methods], gr.update(visible="dspark" in chosen)

    def on_stop(request: gr.Request):
        """Stop your own run: the running one ends within a batch of steps (a quarter of a second); one still
        waiting in the queue is withdrawn."""
        session = request.session_hash
        event = _stop_events.get(session)
        if event is not None:
            event.set()
        elif session in _run_requested:
            _mark(_stop_pressed, session)

    def on_requested(request: gr.Request):
        _mark(_run_requested, request.session_hash)

    run_inputs = [prompt, lanes, temperature, draft_len, block_len, max_new_tokens, seed, verify_rule, show_drafts,
                  scheduler, threshold, overlap]
    run_button.click(on_run, inputs=run_inputs, outputs=run_outputs, preprocess=False, concurrency_limit=1,
                     concurrency_id="engine", api_name="run", show_progress="hidden") \
        .then(offer_download, inputs=None, outputs=[download_button], api_visibility="private", show_progress="hidden")
    upload.upload(open_saved, inputs=[upload, show_drafts], outputs=run_outputs, concurrency_limit=None,
                  api_name="open_saved", show_progress="hidden")
    run_button.click(on_requested, inputs=None, outputs=None, queue=False, api_visibility="private",
                     show_progress="hidden")
    stop_button.click(on_stop, inputs=None, outputs=None, queue=False, api_name="stop")
    lanes.change(show_lanes, inputs=[lanes], outputs=[*lane_boxes, survival_plot], preprocess=False, queue=False,
                 api_visibility="private", show_progress="hidden")
    copy_button.click(make_link, inputs=[page_address, *controls.values()], outputs=[share_link, link_notes],
                      js=PAGE_ADDRESS_JS, preprocess=False, concurrency_limit=None, api_visibility="private",
                      show_progress="hidden") \
        .then(None, inputs=[share_link], outputs=None, js=COPY_JS)
    demo.load(restore, inputs=None, outputs=[*controls.values(), link_notes, link_query, *run_outputs],
              concurrency_limit=None, api_visibility="private", show_progress="hidden") \
        .then(offer_download, inputs=None, outputs=[download_button], api_visibility="private", show_progress="hidden")
    link_query.change(run_link, inputs=[link_query, show_drafts], outputs=run_outputs, preprocess=False,
                      js=WHEN_IDLE_JS, concurrency_limit=1, concurrency_id="engine", api_visibility="private",
                      show_progress="hidden") \
        .then(offer_download, inputs=None, outputs=[download_button], api_visibility="private", show_progress="hidden")
