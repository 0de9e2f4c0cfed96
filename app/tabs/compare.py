"""The Compare tab: one prompt, every lane side by side, live, the shared timeline and small charts."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import gradio as gr

from engine.methods import METHOD_REGISTRY
from engine.presets import OVERLAP_CHOICES, SCHEDULERS, VERIFY_RULES
from engine.summary import summarize
from engine.types import MAX_DRAFT_LEN, MAX_TEMPERATURE, EngineError, GenerationConfig

from ..charts import acceptance_figure, progress_figure, survival_figure, timeline_figure
from ..examples import example_prompts
from ..render import LEGEND_HTML, lane_html
from ..runner import LaneRun, run_lanes

DEFAULTS = GenerationConfig()
MAX_NEW_TOKENS_UI = 512  # the slider's end; the engine allows more from the CLI
SERIAL_DRAFT_LEN = max(m.default_draft_len for m in METHOD_REGISTRY.values() if not m.one_pass)
BLOCK_DRAFT_LEN = max(m.default_draft_len for m in METHOD_REGISTRY.values() if m.one_pass)
REDRAW_EVERY_S = 0.15  # lanes redraw at most this often while a lane runs
# The charts redraw when a lane finishes (drawing them costs the browser more than the lanes do, and on a
# shared machine that would slow the lane being measured).

_stop_events: dict[str, threading.Event] = {}  # one per browser session, so Stop only stops your own run


def _status(text: str, error: bool = False) -> str:
    cls = "status-error" if error else "note"
    return f'<div class="{cls}">{text}</div>'


def _as_int(value, name: str) -> int:
    if value is None or float(value) != int(float(value)):
        raise EngineError(f"{name} must be a whole number, got {value}")
    return int(float(value))


def render(engine, methods: list[str]) -> None:
    examples = example_prompts()
    drafters = {m: engine.drafter_label(m) for m in methods}  # which drafter each lane runs, in its header
    with gr.Row(equal_height=True):
        prompt = gr.Textbox(label="Prompt", value=examples[0], lines=5, max_lines=12, elem_id="prompt", scale=4)
        with gr.Column(scale=1, min_width=160):
            run_button = gr.Button("Run", variant="primary", elem_id="run")
            stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
    gr.Examples(examples=[[e] for e in examples], inputs=[prompt], label="Examples (the tiny models know Python)",
                examples_per_page=6)
    with gr.Row():
        temperature = gr.Slider(0.0, MAX_TEMPERATURE, value=DEFAULTS.temperature, step=0.05,
                                label="Temperature (0 = greedy)")
        draft_len = gr.Slider(1, MAX_DRAFT_LEN, value=SERIAL_DRAFT_LEN, step=1,
                              label="AR: draft length K (serial forwards per step)")
        block_len = gr.Slider(1, MAX_DRAFT_LEN, value=BLOCK_DRAFT_LEN, step=1,
                              label="DFlash / DSpark: tokens drafted per block (at most what it was trained on)")
        max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS_UI, value=DEFAULTS.max_new_tokens, step=1, label="Max new tokens")
    with gr.Accordion("More settings", open=False):
        with gr.Row():
            seed = gr.Number(value=DEFAULTS.seed, precision=0, label="Seed (temperature > 0)", minimum=0)
            verify_rule = gr.Radio(list(VERIFY_RULES), value=DEFAULTS.verify_rule,
                                   label="Verification rule at temperature > 0")
            show_drafts = gr.Checkbox(value=True, label="Show rejected, unverified and cut drafts inline")
        with gr.Row():
            scheduler = gr.Radio(list(SCHEDULERS), value=DEFAULTS.scheduler,
                                 label="DSpark: how much of the block to verify (none = all)")
            threshold = gr.Slider(0.0, 1.0, value=DEFAULTS.confidence_threshold, step=0.05,
                                  label="DSpark static cut: confidence threshold")
            overlap = gr.Radio(list(OVERLAP_CHOICES), value="auto",
                               label="Overlap each step's host work with the next step's device work "
                                     "(auto: on for CUDA, off on the CPU)")
    status = gr.HTML(_status("Press Run. Lanes run one after another, so no lane slows another's timings."),
                     elem_id="status")
    gr.HTML(LEGEND_HTML)
    with gr.Row(equal_height=False):
        lane_boxes = [gr.HTML(lane_html(m, [], "", "waiting", 1, None, True, drafter=drafters[m]), elem_id=f"lane-{m}",
                              min_width=300)
                      for m in methods]
    gr.Markdown("**Timeline.** Each lane's measured work on one time axis: orange is drafting, blue is the "
                "target's verify forward, grey is host bookkeeping, and gaps are bubbles where nothing ran. "
                "Look at the AR row: every step starts with K thin orange draft forwards, one after another; "
                "the block drafters draft the whole block in one.", elem_classes="note")
    timeline = gr.Plot(elem_id="timeline", show_label=False)
    gr.Markdown("**Below:** tokens against time (the steepest line is the fastest lane), how acceptance holds up "
                "along the block, and for DSpark whether its confidences predicted what the target accepted.",
                elem_classes="note")
    with gr.Row():
        progress_plot = gr.Plot(elem_id="progress", show_label=False)
        acceptance_plot = gr.Plot(elem_id="acceptance", show_label=False)
        survival_plot = gr.Plot(elem_id="survival", show_label=False, visible="dspark" in methods)

    def on_run(prompt_text, temperature_value, draft_len_value, block_len_value, max_new_value, seed_value, rule,
               show, scheduler_value, threshold_value, overlap_value, request: gr.Request):
        plots = 4  # timeline, progress, acceptance, survival
        try:
            base = GenerationConfig(max_new_tokens=_as_int(max_new_value, "max new tokens"),
                                    temperature=float(temperature_value), seed=_as_int(seed_value, "seed"),
                                    draft_len=_as_int(draft_len_value, "draft length K"), verify_rule=rule,
                                    scheduler=scheduler_value, confidence_threshold=float(threshold_value),
                                    overlap=OVERLAP_CHOICES[overlap_value])
            block = _as_int(block_len_value, "block draft length")
            lanes = [LaneRun(m, replace(base, method=m,
                                        draft_len=block if METHOD_REGISTRY[m].one_pass else base.draft_len))
                     for m in methods]
            for lane in lanes:
                lane.config.validate()
            engine.encode_prompt(prompt_text)
        except (EngineError, ValueError, TypeError) as exc:
            yield _status(f"⚠ {exc}", error=True), *[gr.skip()] * (len(methods) + plots)
            return
        stop = _stop_events[request.session_hash] = threading.Event()
        greedy = base.temperature == 0

        def lanes_html():
            baseline = next((lane for lane in lanes if lane.method == "baseline" and lane.steps), None)
            baseline_summary = summarize(baseline.steps, base.max_new_tokens, engine.eos_id) if baseline else None
            return [lane_html(lane.method, lane.steps, prompt_text, lane.state, base.max_new_tokens, engine.eos_id,
                              greedy, baseline_summary, show, drafters[lane.method]) for lane in lanes]

        def figures():
            by_method = {lane.method: lane.steps for lane in lanes}
            drafting = {m: s for m, s in by_method.items() if m != "baseline"}
            return (timeline_figure(by_method), progress_figure(by_method), acceptance_figure(drafting),
                    survival_figure(by_method.get("dspark", [])))

        try:
            last_draw, finished = 0.0, 0
            for _ in run_lanes(engine, prompt_text, lanes, stop):
                now = time.monotonic()
                running = next((lane for lane in lanes if lane.state == "running"), None)
                done_now = sum(lane.state not in ("waiting", "running") for lane in lanes)
                if running is not None and now - last_draw < REDRAW_EVERY_S and done_now == finished:
                    continue
                last_draw = now
                charts = [gr.skip()] * plots
                if done_now != finished:
                    charts, finished = figures(), done_now
                message = f"running {running.method} on {engine.device_name}…" if running else "…"
                yield _status(message), *lanes_html(), *charts
            errors = [f"{lane.method}: {lane.state}" for lane in lanes if lane.state.startswith("error")]
            done = "stopped" if stop.is_set() else "done"
            text = "; ".join(errors) if errors else f"{done} on {engine.device_name}. Hover any token for its numbers."
            yield _status(text, error=bool(errors)), *lanes_html(), *figures()
        finally:
            stop.set()  # a closed page or a cancelled event also ends the worker
            _stop_events.pop(request.session_hash, None)

    def on_stop(request: gr.Request):
        event = _stop_events.get(request.session_hash)
        if event is not None:
            event.set()

    run_button.click(on_run, inputs=[prompt, temperature, draft_len, block_len, max_new_tokens, seed, verify_rule,
                                     show_drafts,
                                     scheduler, threshold, overlap],
                     outputs=[status, *lane_boxes, timeline, progress_plot, acceptance_plot, survival_plot],
                     concurrency_limit=1, concurrency_id="engine", api_name="run", show_progress="hidden")
    stop_button.click(on_stop, inputs=None, outputs=None, queue=False, api_name="stop")
