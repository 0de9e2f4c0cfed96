"""The Why tab: the formula, with curves from it and points measured on this machine.

speedup ≈ τ / (1 + cost_draft / cost_target); a serial drafter pays K forwards, so its cost grows with K while
acceptance saturates, so it has a best K; a one-pass drafter pays one forward whatever K. Sliders move the
prediction; the K sweep measures every serial lane on this machine beside the formula fed with its own
measured acceptance and cost; a view sets this machine's costs beside published datacenter-GPU figures, each
with its source. More measurements: the distribution check (lossless above temperature 0, counted), the
scheduled drafter beside its variants, every lane at five temperatures, and the tree lanes at each node budget
beside their chains and DDTree's published figures. Each panel opens with the lesson's recording (app/lesson)
and can be measured again live; its table, charts and caption are app/tabs/why_panels.py.
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from dataclasses import dataclass

import gradio as gr

from engine.contract.interface import EngineLike
from engine.contract.methods import METHOD_REGISTRY, method_label
from engine.contract.types import EngineError, Stopped

from .. import lesson
from ..draw import projector
from ..draw.charts import styled, theory_figure, verify_cost
from ..settings import SettingError, drafts_per_step_control, float_parser
from ..run.sessions import SessionStore, now_s
from ..theory import PUBLISHED, one_pass_curve, serial_curve, speedup
from . import device_recordings, why_long
from .compare import MAX_RUN_S
from .why_panels import (CHECK_CAPTION, HELDOUT, LOAD_CAPTION, MACHINE_CAPTION, PARTS_CAPTION, SWEEP_CAPTION,
                         TEMPERATURE_CAPTION, TREES_CAPTION, check_outputs, load_outputs, panel_outputs, parts_outputs,
                         sweep_outputs, sweep_prompt_choices, temperature_outputs, trees_outputs)
from .why_panels import (DrawnPanels, check_table, load_table, parts_table, sweeps_table, temperature_table,  # noqa: F401
                         trees_table)  # the panels' tables, where the tests read them

def _labels(one_pass: bool) -> str:
    """The registered drafting methods' labels, serial or one-pass, for the text."""
    return ", ".join(m.label for m in METHOD_REGISTRY.values() if m.drafts and m.one_pass == one_pass and not m.tree)


INTRO = f"""### Why parallel drafting wins, and why by how much depends on the machine
Every verify step commits **τ** tokens on average: the accepted drafts plus the one the target writes itself.
Drafting costs time too, so the speedup over the target alone is about

**speedup ≈ τ / (1 + cost_draft / cost_target)**

A serial drafter ({_labels(one_pass=False)}) pays one forward per drafted token, so its cost grows with K, while τ grows
ever more slowly (each position must survive all the ones before it): past some K, drafting more loses.
A one-pass drafter ({_labels(one_pass=True)}) pays one forward for the whole block, so a longer block costs nothing
more. The curves below are **predictions** from that formula (dashed); move the sliders to see how
acceptance and cost move the best K."""


MAX_SLIDER_SESSIONS = 256  # sessions whose slider values the prediction's redraw remembers


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
        k = int(comparison.settings.get(drafts_per_step_control(method), 1))
        points[f"{entry.label} (τ {lane.summary.tau:.2f})"] = (k, ratio)
    return points


# When the overlaid run's crosses are not to be trusted (overlay_warnings): a measured speedup this many times
# the formula's, fed with the lane's own τ and costs; one this many times below the formula divided by what a
# verify cost; a lane whose mean verify forward took this many times its median one (bursts of other work), or
# whose median one took twice its fastest (other work for most of the lane).
ABOVE_FORMULA = 1.2
BELOW_PREDICTION = 1.5
VERIFY_SPREAD = 1.5
MEDIAN_OVER_FASTEST = 2.0


def _verify_times(steps) -> list[float]:
    """Each decode step's verify forward time, in seconds, sorted."""
    return sorted(sum(span.end_s - span.start_s for span in s.spans if span.work == "verify")
                  for s in steps if s.kind == "decode")


def _spread_warning(comparison, method: str) -> str | None:
    """A lane whose verify forwards, the same work every step, took very different times: others were running."""
    times = _verify_times(comparison.lanes[method].steps)
    if len(times) < 4:
        return None
    median, mean = times[len(times) // 2], sum(times) / len(times)
    if mean <= VERIFY_SPREAD * median and median <= MEDIAN_OVER_FASTEST * times[0]:
        return None
    return (f"{method_label(method)}'s verify forwards, much the same work at every step, took from "
            f"{times[0] * 1e3:.1f} to {times[-1] * 1e3:.1f} ms (the middle one {median * 1e3:.1f} ms, the average "
            f"{mean * 1e3:.1f} ms): other work on the machine slowed them.")


def _lane_warning(comparison, method: str) -> str | None:
    """One lane's measured speedup against what its own τ and times allow, in words (None when it fits)."""
    lane, measured, cost = comparison.lanes[method], comparison.speedup(method), verify_cost(comparison, method)
    s = lane.summary
    if measured is None or cost is None or s is None:
        return None
    formula = speedup(s.tau, s.draft_s / s.verify_s)
    name = method_label(method)
    if measured > ABOVE_FORMULA * formula:
        return (f"{name} measured {measured:.2f}×, more than {ABOVE_FORMULA:g} times the {formula:.2f}× the formula "
                "gives from its own τ and costs. The formula is what a lane would reach if each verify cost no more "
                "than one baseline forward, so the baseline itself must have run slow.")
    if measured * BELOW_PREDICTION < formula / cost:
        return (f"{name} measured {measured:.2f}×, less than 1/{BELOW_PREDICTION:g} of the {formula / cost:.2f}× its "
                "own draft and verify times predict: its run lost time to something else.")
    return None


def overlay_warnings(comparison) -> list[str]:
    """Why the overlaid run's crosses may not show this machine's real speedups, in plain words: a lane far from
    what its own numbers predict, or a lane (the baseline included) whose verify forwards spread widely in time
    (other work on the machine)."""
    drafting = [m for m in comparison.lanes if m in METHOD_REGISTRY and METHOD_REGISTRY[m].drafts]
    warnings = [_lane_warning(comparison, m) for m in drafting] + [_spread_warning(comparison, m)
                                                                    for m in comparison.lanes if m in METHOD_REGISTRY]
    return [w for w in warnings if w]


NO_RUN = "Run a comparison with the Baseline lane on the Compare tab first."
NUM_PANELS = 18  # WhyView.panels
# The prediction's sliders: what each means and its range, shared by the layout and the handlers' checks.
SLIDERS = (("per-position acceptance p (prediction)", "acceptance p", 0.3, 0.98, 0.75),
           ("serial drafter: one draft forward's cost / a verify forward's", "serial draft cost", 0.02, 1.0, 0.15),
           ("one-pass drafter: the whole block's cost / a verify forward's", "block draft cost", 0.05, 1.5, 0.4))
SLIDER_PARSERS = tuple(float_parser(name, low, high) for _, name, low, high, _ in SLIDERS)
DEFAULT_SLIDERS = tuple(value for *_, value in SLIDERS)


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
    check_button: gr.Button
    check_plot: gr.Plot
    check_text: gr.Markdown
    parts_button: gr.Button
    parts_plot: gr.Plot
    parts_text: gr.Markdown
    temperature_button: gr.Button
    temperature_tau: gr.Plot
    temperature_acceptance: gr.Plot
    temperature_text: gr.Markdown
    trees_button: gr.Button
    trees_plot: gr.Plot
    trees_cost: gr.Plot
    trees_published: gr.Plot
    trees_text: gr.Markdown
    load_button: gr.Button
    load_plot: gr.Plot
    load_text: gr.Markdown
    long: why_long.LongPanel  # long outputs: acceptance by output position
    focus: gr.HTML  # a lesson point's "look at" note
    stop_buttons: list  # one beside each measurement's button; each stops the session's measurement

    @property
    def sliders(self) -> list:
        return [self.acceptance, self.serial_cost, self.block_cost]

    @property
    def panels(self) -> list:
        """The measured panels, in panel_outputs' order: the sweep, the distribution check, the parts, the
        temperatures, the trees, under load, long outputs."""
        return [self.sweep_plot, self.sweep_text, self.machine_plot, self.check_plot, self.check_text,
                self.parts_plot, self.parts_text, self.temperature_tau, self.temperature_acceptance,
                self.temperature_text, self.trees_plot, self.trees_cost, self.trees_published, self.trees_text,
                self.load_plot, self.load_text, self.long.plot, self.long.text]


def _stop_button(elem: str) -> gr.Button:
    return gr.Button("Stop", variant="stop", size="sm", elem_id=f"why-stop-{elem}", scale=0, min_width=80)


def _measured_panel(caption: str, button: str, elem: str, figure) -> tuple:
    """A measured panel's caption, its button and Stop, and its chart: (button, stop, chart). Its table and other
    charts follow, folded in projector mode (projector.folded of the chart)."""
    gr.Markdown(caption, elem_classes="note")
    with gr.Row():
        run = gr.Button(button, elem_id=elem, size="sm")
        stop = _stop_button(elem)
    return run, stop, gr.Plot(figure, elem_id=f"why-{elem}-plot", show_label=False)


def _table(text: str, elem: str) -> gr.Markdown:
    return gr.Markdown(text, elem_id=f"why-{elem}-table")


# Each measured panel's chart, under which its table and other charts fold in projector mode (projector.folded).
FOLDED_CHARTS = ("why-sweep", "why-check-plot", "why-trees-plot", "why-parts-plot", "why-temperatures-plot",
                 "why-load-plot", "why-long-plot")
HEAD = projector.fold_style(FOLDED_CHARTS)  # in the page's head (app/main.py)


def layout(recordings: dict) -> WhyView:
    """Build the tab's components (inside a gr.Blocks), the measured panels showing `recordings` (the
    lesson's); no behaviour."""
    (sweep_figure, sweep_words, machine_figure, check_figure, check_words, parts_figure_, parts_words,
     temperature_tau, temperature_acceptance, temperature_words, trees_figure, trees_cost, trees_published,
     trees_words, load_figure_, load_words, _, _) = panel_outputs(recordings)
    focus = gr.HTML("", elem_id="why-focus", visible=False)
    gr.Markdown(INTRO)
    with gr.Row():
        acceptance, serial_cost, block_cost = (gr.Slider(low, high, value=value, step=0.01, label=label)
                                               for label, _, low, high, value in SLIDERS)
    with gr.Row():
        overlay_button = gr.Button("Overlay my last Compare run", elem_id="overlay-last-run", size="sm", scale=0)
        overlay_note = gr.Markdown(elem_id="overlay-note")
    prediction = gr.Plot(_settings_prediction(*(value for *_, value in SLIDERS)), elem_id="why-prediction",
                         show_label=False)
    gr.Markdown(SWEEP_CAPTION, elem_classes="note")
    with gr.Row():
        prompt = gr.Dropdown(sweep_prompt_choices(), value=HELDOUT, label="Prompts for the sweep", scale=4)
        sweep_button = gr.Button("Run the K sweep", variant="primary", elem_id="sweep", scale=1)
        sweep_stop = _stop_button("sweep")
    sweep_plot = gr.Plot(sweep_figure, elem_id="why-sweep", show_label=False)
    with projector.folded("why-sweep"):
        sweep_text = _table(sweep_words, "sweep")
        gr.Markdown(MACHINE_CAPTION, elem_classes="note")
        machine_plot = gr.Plot(machine_figure, elem_id="why-machine", show_label=False)
        gr.Markdown("Sources: " + "; ".join(f"{p.method}, {p.setting}: {p.speedup}× / τ {p.tau} ({p.source})"
                                           for p in PUBLISHED) + ".", elem_classes="note")
    check_button, check_stop, check_plot = _measured_panel(
        CHECK_CAPTION, "Run the distribution check", "check", check_figure)
    with projector.folded("why-check-plot"):
        check_text = _table(check_words, "check")
    trees_button, trees_stop, trees_plot = _measured_panel(
        TREES_CAPTION, "Measure the budgets", "trees", trees_figure)
    with projector.folded("why-trees-plot"):
        trees_text = _table(trees_words, "trees")
        trees_cost = gr.Plot(trees_cost, elem_id="why-trees-cost", show_label=False)
        trees_published = gr.Plot(trees_published, elem_id="why-trees-published", show_label=False)
        device_recordings.layout("trees")  # a GPU's recording beside these figures (a CPU's until one exists)
    parts_button, parts_stop, parts_plot = _measured_panel(
        PARTS_CAPTION, "Measure the parts", "parts", parts_figure_)
    with projector.folded("why-parts-plot"):
        parts_text = _table(parts_words, "parts")
    temperature_button, temperature_stop, temperature_acceptance = _measured_panel(
        TEMPERATURE_CAPTION, "Measure it live (a small version)", "temperatures", temperature_acceptance)
    with projector.folded("why-temperatures-plot"):
        temperature_text = _table(temperature_words, "temperatures")
        temperature_tau = gr.Plot(temperature_tau, elem_id="why-temperatures-tau", show_label=False)
    load_button, load_stop, load_plot = _measured_panel(
        LOAD_CAPTION, "Measure it under load (a small version)", "load", load_figure_)
    with projector.folded("why-load-plot"):
        load_text = _table(load_words, "load")
        device_recordings.layout("load")
    long = why_long.layout(recordings.get("long"), _stop_button, projector.folded)
    return WhyView(acceptance, serial_cost, block_cost, overlay_button, overlay_note, prediction, prompt,
                   sweep_button, sweep_plot, sweep_text, machine_plot, check_button, check_plot, check_text,
                   parts_button, parts_plot, parts_text, temperature_button, temperature_tau, temperature_acceptance,
                   temperature_text, trees_button, trees_plot, trees_cost, trees_published, trees_text,
                   load_button, load_plot, load_text, long, focus,
                   [sweep_stop, check_stop, parts_stop, temperature_stop, trees_stop, load_stop, long.stop])


# --- the behaviour ---------------------------------------------------------------------------------------

class SharedMeasurements:
    """The live measurements that ended lately, with when each ended: a visitor who pressed for the same
    measurement before one ended (a class pressing one lesson point's Run it live at once, each waiting its turn
    in the queue) gets that run's result instead of measuring it again. Bounded; a press after it ended measures
    afresh."""

    def __init__(self, capacity: int = 16):
        self.capacity = capacity
        self.ended: OrderedDict = OrderedDict()  # key -> (monotonic end time, result)
        self.lock = threading.Lock()

    def ended_since(self, key, asked_s: float | None):
        """The result of `key`'s measurement if one ended after `asked_s` (None: not asked from the page)."""
        with self.lock:
            entry = self.ended.get(key)
        return entry[1] if entry is not None and asked_s is not None and entry[0] >= asked_s else None

    def remember(self, key, result) -> None:
        with self.lock:
            self.ended[key] = (now_s(), result)
            self.ended.move_to_end(key)
            while len(self.ended) > self.capacity:
                self.ended.popitem(last=False)


class WhyHandlers:
    """The tab's handlers: plain methods over explicit values; the session's last comparison comes from
    `sessions` (app/run/sessions.py)."""

    def __init__(self, engine: EngineLike, sessions: SessionStore, max_run_s: float = MAX_RUN_S):
        self.engine = engine
        self.sessions = sessions
        self.max_run_s = max_run_s  # a measurement's wall-time limit, as a comparison's
        self.shared = SharedMeasurements()
        self.sliders: OrderedDict = OrderedDict()  # session -> the sliders it last drew the prediction at (bounded)

    def _last(self, session: str):
        return self.sessions.get(session).last

    @staticmethod
    def _sliders(p, c, b) -> tuple[float, float, float]:
        """The sliders' values, each checked with the page's own parsers (an API call can send anything: text,
        NaN, a list); a bad one is one line on the page."""
        try:
            return tuple(parse(value) for parse, value in zip(SLIDER_PARSERS, (p, c, b)))
        except SettingError as exc:
            raise gr.Error(str(exc), print_exception=False) from None

    def predict(self, p, c, b, request: gr.Request):
        """The prediction at the sliders' values, with the session's last run's lanes as crosses."""
        p, c, b = self._sliders(p, c, b)
        self.sliders[request.session_hash] = (p, c, b)
        self.sliders.move_to_end(request.session_hash)
        while len(self.sliders) > MAX_SLIDER_SESSIONS:
            self.sliders.popitem(last=False)
        return self.prediction(request.session_hash)

    def prediction(self, session: str):
        """The prediction at the session's sliders (their defaults until it moved one), with its last run's lanes as
        crosses, laid out for the session's mode: projector mode's toggle draws it again."""
        p, c, b = self.sliders.get(session, DEFAULT_SLIDERS)
        comparison = self._last(session)
        return styled(_settings_prediction(p, c, b, run_points(comparison) if comparison else None),
                      self.sessions.get(session).projector)

    def overlay(self, p, c, b, request: gr.Request):
        self._sliders(p, c, b)
        comparison = self._last(request.session_hash)
        if comparison is None or comparison.baseline is None:
            return gr.skip(), NO_RUN
        note = (f"Crosses: your last run's lanes at their draft lengths, measured on {html.escape(comparison.device)} "
                "(speedup = tokens/s over the baseline's).")
        warnings = overlay_warnings(comparison)
        if warnings:
            note += ("\n\n**⚠ These crosses may not show this machine's real speedups.** "
                     + " ".join(html.escape(w) for w in warnings) + " Run the comparison again when nothing else is "
                     "running, before reading the crosses.")
        return self.predict(p, c, b, request), note

    def _measured(self, measure, session: str, *args):
        """A measurement as a comparison runs: withdrawn when Stop was pressed while it waited in the queue,
        stopped within a step by Stop (any of the tab's, or the Compare tab's) and after max_run_s."""
        state = self.sessions.get(session)
        asked_s = state.run_pressed_s
        if state.withdrawn():
            raise gr.Error("withdrawn: Stop was pressed while this measurement waited in the queue; nothing ran",
                           print_exception=False)
        key = (measure.__name__, repr(args))
        shared = self.shared.ended_since(key, asked_s)
        if shared is not None:  # the same measurement ended while this one waited: one run, fanned out
            return shared
        stop = state.stop = threading.Event()
        timer = threading.Timer(self.max_run_s, stop.set)
        timer.daemon = True
        timer.start()
        try:
            # the lesson's recipe, run where the models are (app/lesson); marked as measured live
            measured = lesson.live_measurement(measure(self.engine, *args, stop=stop))
            self.shared.remember(key, measured)
            return measured
        except Stopped:
            out_of_time = not timer.is_alive()
            raise gr.Error(f"stopped after {self.max_run_s:g} s, the most one measurement may take on this shared "
                           "server; the panel shows what it showed before" if out_of_time else
                           "stopped: the panel shows what it showed before", print_exception=False) from None
        except (EngineError, ValueError) as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        finally:
            timer.cancel()
            state.stop = None

    def _shown(self, request, key: str, measured: dict) -> tuple[dict, bool]:
        """A live measurement, kept as the session's shown panel (projector mode redraws it), and whether the
        session's page is in projector mode."""
        if request is None:
            return measured, False
        state = self.sessions.get(request.session_hash)
        state.panels[key] = measured
        return measured, state.projector

    def _drawn(self, draw, request, key: str, measured: dict) -> tuple:
        """`draw(measured, projector)` for the session's page, drawn once for every visitor shown the very same
        measurement (a class sharing one Run it live: app/run/sessions.py DrawnOnce)."""
        measured, projector = self._shown(request, key, measured)
        return self.sessions.replays.get(f"why|{key}|{projector}", measured, lambda: draw(measured, projector))

    def redraw_panels(self, session: str, recordings: dict) -> tuple:
        """The measured panels as the session last saw them (its live measurements, else the recordings), drawn
        again for projector mode on or off."""
        state = self.sessions.get(session)
        return panel_outputs({**recordings, **state.panels}, state.projector)

    def on_requested(self, request: gr.Request):
        self.sessions.get(request.session_hash).press_run()

    def on_stop(self, request: gr.Request):
        self.sessions.get(request.session_hash).press_stop()

    def on_sweep(self, choice, request: gr.Request):
        """The K sweep, live, on the lesson's held-out prompts or one prompt (the engine checks it)."""
        if choice == HELDOUT:
            prompts = lesson.live_sweep_prompts()
        elif isinstance(choice, str) and choice.strip():
            prompts = [choice]
        else:
            raise gr.Error(f"the sweep's prompts must be {HELDOUT!r} or a prompt, got {str(choice)[:40]!r}",
                           print_exception=False)
        return self._drawn(sweep_outputs, request, "sweeps",
                           self._measured(lesson.measure_sweeps_live, request.session_hash, prompts))

    def on_check(self, request: gr.Request):
        return self._drawn(check_outputs, request, "lossless",
                           self._measured(lesson.measure_check_live, request.session_hash))

    def on_parts(self, request: gr.Request):
        return self._drawn(parts_outputs, request, "parts",
                           self._measured(lesson.measure_parts_live, request.session_hash))

    def on_temperatures(self, request: gr.Request):
        return self._drawn(temperature_outputs, request, "temperatures",
                           self._measured(lesson.measure_temperatures_live, request.session_hash))

    def on_trees(self, request: gr.Request):
        return self._drawn(trees_outputs, request, "trees",
                           self._measured(lesson.measure_trees_live, request.session_hash))

    def on_under_load(self, request: gr.Request):
        return self._drawn(load_outputs, request, "load",
                           self._measured(lesson.measure_load_live, request.session_hash))

    def on_long(self, request: gr.Request):
        return self._drawn(why_long.long_outputs, request, "long",
                           self._measured(lesson.measure_long_live, request.session_hash))


def wire(view: WhyView, handlers: WhyHandlers) -> None:
    """Connect the components to the handlers; every measurement waits in the engine's queue like a
    comparison."""
    page_only = dict(show_progress="hidden", queue=False, preprocess=False, api_visibility="private")
    for slider in view.sliders:
        slider.change(handlers.predict, view.sliders, view.prediction, **page_only)
    view.overlay_button.click(handlers.overlay, view.sliders, [view.prediction, view.overlay_note], **page_only)
    engine_queue = dict(concurrency_limit=1, concurrency_id="engine")
    at_once = dict(queue=False, api_visibility="private", show_progress="hidden")
    for button in (view.sweep_button, view.check_button, view.parts_button, view.temperature_button,
                   view.trees_button, view.load_button, view.long.button):  # Stop may withdraw
        button.click(handlers.on_requested, None, None, **at_once)
    for stop in view.stop_buttons:
        stop.click(handlers.on_stop, None, None, **at_once)
    view.sweep_button.click(handlers.on_sweep, [view.prompt], [view.sweep_plot, view.sweep_text, view.machine_plot],
                            api_name="k_sweep", preprocess=False, **engine_queue)
    view.check_button.click(handlers.on_check, None, [view.check_plot, view.check_text], api_name="lossless_check",
                            **engine_queue)
    view.parts_button.click(handlers.on_parts, None, [view.parts_plot, view.parts_text], api_name="parts",
                            **engine_queue)
    view.temperature_button.click(handlers.on_temperatures, None,
                                  [view.temperature_tau, view.temperature_acceptance, view.temperature_text],
                                  api_name="temperatures", **engine_queue)
    view.trees_button.click(handlers.on_trees, None,
                            [view.trees_plot, view.trees_cost, view.trees_published, view.trees_text],
                            api_name="trees", **engine_queue)
    view.load_button.click(handlers.on_under_load, None, [view.load_plot, view.load_text], api_name="under_load",
                           **engine_queue)
    view.long.button.click(handlers.on_long, None, [view.long.plot, view.long.text], api_name="long_outputs",
                           **engine_queue)


def render(engine: EngineLike, sessions: SessionStore, recordings: dict | None = None,
           max_run_s: float = MAX_RUN_S) -> tuple[WhyView, WhyHandlers]:
    """The tab: its layout (its panels showing `recordings`, default the lesson's) and its handlers, wired;
    max_run_s: a measurement's wall-time limit."""
    view, handlers = (layout(lesson.recorded() if recordings is None else recordings),
                      WhyHandlers(engine, sessions, max_run_s))
    wire(view, handlers)
    return view, handlers
