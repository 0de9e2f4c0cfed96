"""The Lesson tab: the argument in eleven points (app/lesson), each with the data that shows it, one click away.

"Show me" opens the tab that shows the point with the lesson's recording (the same numbers in every class),
sets that tab's controls to the recording's settings and says what to look at; "Run it live" measures the
same thing again on this machine. A link opens a point (`?lesson=N`) or a tab (`?tab=why`).

Layout and behaviour apart, like every tab: `layout` builds the components, `LessonHandlers` holds the
handlers as plain methods, `wire` connects them. Its handlers write into the other tabs' components, so the
app wires this tab last, with every other tab's view (`Targets`).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, replace

import gradio as gr

from engine.contract.methods import method_label

from .. import lesson
from ..draw import overlap
from ..draw.projector import adopt_from_link
from ..draw.charts import NUM_CHARTS
from ..draw.kv import kv_panel
from ..lesson import POINTS, TABS, Point
from ..lesson.kv import KV_POINT, kv_item
from ..settings import PARSERS, Settings, parse_controls
from ..comparison import Comparison
from ..draw.render import status_html
from ..run.sessions import SessionStore
from .compare import CompareHandlers, CompareView, control_values
from .step import NUM_STEP_OUTPUTS, StepHandlers, StepTabView
from .why import HELDOUT, NUM_PANELS, WhyHandlers, WhyView, panel_outputs

INTRO = ("### The argument, point by point\nWhy drafting a whole block in one pass can beat drafting token by "
         "token, and what decides whether it does here, in ten steps. Each point says what it claims, and **Show me** opens the measurement that shows it: "
         "recorded on the embedded models, so the numbers are the same in every class; **Run it live** measures "
         "it again on this machine. Links: `?lesson=N` opens point N, `?tab=why` a tab, `?lesson=N&present=1` "
         "point N as a slide: [present the lesson as slides](?lesson=1&present=1) (→ / Page Down: next, ← / "
         "Page Up: back).")
STEP_THROUGH = 2  # the point whose rule is also shown token by token on the Step-through tab
BY_HAND = 3  # the point that carries the p/q widget (app/draw/overlap.py): its ceiling 1 − TV, dragged by hand


@dataclass
class LessonView:
    status: gr.HTML
    show_buttons: list  # one per point, in POINTS order
    live_buttons: list
    step_button: gr.Button  # point STEP_THROUGH, token by token


@dataclass
class Targets:
    """Every component a lesson point may write, across the tabs."""

    tabs: gr.Tabs
    lesson: LessonView
    compare: CompareView
    step: StepTabView
    why: WhyView

    @property
    def notes(self) -> list:
        """The notes a lesson point leaves on the tab it opens."""
        return [self.compare.focus, self.step.focus, self.why.focus]

    @property
    def run_buttons(self) -> list:
        """Every button that runs or shows something new."""
        w = self.why
        return [self.compare.run_button, w.sweep_button, w.check_button, w.parts_button, w.trees_button, w.load_button,
                w.overlay_button]

    @property
    def outputs(self) -> list:
        """In the order `LessonHandlers.outputs` returns their values."""
        c, s, w = self.compare, self.step, self.why
        return [self.tabs, self.lesson.status, *c.controls.values(), c.focus, *c.run_outputs, s.focus, s.status,
                s.slider, *s.step_outputs, w.focus, *w.panels]


def point_html(point: Point, recordings: dict) -> str:
    item = recordings.get(point.recording)
    where = lesson.recorded_words(item) if item is not None else "not recorded yet"
    by_kind = lesson.kinds_markdown(recordings, point.number)  # points 1, 7, 9: τ and speedup by kind of text
    return (f"### {point.number}. {html.escape(point.title)}\n{point.text}\n\n"
            f"**Here:** {html.escape(lesson.takeaway(point, recordings))} *({where}; look at "
            f"{html.escape(point.look_at)})*" + (f"\n\n{by_kind}" if by_kind else ""))


def focus_js(chart: str) -> str:
    """The page's script that scrolls a point's chart into view and outlines it (app/draw/projector.py speclabFocus)."""
    return f"() => window.speclabFocus({json.dumps(chart)})"


CLEAR_JS = "() => { window.speclabClearPins(); window.speclabClearFocus(); }"
# ?lesson=N: the same scroll and outline, once the load has opened the point
# (not on a slide: app/tabs/slides.py shows the point there)
LINK_FOCUS_JS = ("() => { const charts = " + json.dumps({str(p.number): p.chart for p in POINTS}) + "; "
                 "const n = new URLSearchParams(window.location.search).get('lesson'); "
                 "if (n && charts[n] && !document.documentElement.classList.contains('present')) "
                 "window.speclabFocus(charts[n]); }")


def layout(recordings: dict) -> LessonView:
    """Build the tab's components (inside a gr.Blocks); no behaviour."""
    gr.Markdown(INTRO)
    status = gr.HTML("", elem_id="lesson-status", visible=False)
    shows, lives, step_button = [], [], None
    for point in POINTS:
        with gr.Group(elem_id=f"lesson-{point.number}", elem_classes="lesson-point"):
            gr.Markdown(point_html(point, recordings), elem_classes="lesson-text")
            if point.number == BY_HAND:
                overlap.widget(f"lesson-widget-{point.number}")
            if point.number == KV_POINT and (figure := kv_panel(kv_item(recordings))) is not None:
                # what KV injection buys, recorded: drawn once, as a room reads it, whether projector mode is on or off
                gr.Plot(figure, elem_id="lesson-kv-plot", elem_classes="drawn-for-a-room", show_label=False)
            with gr.Row():
                shows.append(gr.Button("Show me", variant="primary", size="sm", elem_id=f"lesson-show-{point.number}"))
                lives.append(gr.Button("Run it live", size="sm", elem_id=f"lesson-live-{point.number}"))
                if point.number == STEP_THROUGH:
                    step_button = gr.Button("Step through a rejection", size="sm", elem_id="lesson-step")
    return LessonView(status, shows, lives, step_button)


def focus_update(point: Point, live: bool = False) -> dict:
    how = f"measured live on this machine: {lesson.live_size(point)}" if live else "the lesson's recording"
    return gr.update(value=f'<div class="focus-note">Lesson point {point.number}, {html.escape(point.title)} '
                           f'({how}). Look at {html.escape(point.look_at)}.</div>', visible=True)


class LessonHandlers:
    """Each handler returns a value for every component in `Targets.outputs` (gr.skip() where it changes
    nothing), so one output list serves every point, the buttons and a link alike."""

    def __init__(self, compare: CompareHandlers, step: StepHandlers, why: WhyHandlers, sessions: SessionStore,
                 recordings: dict):
        self.compare, self.step, self.why = compare, step, why
        self.sessions, self.recordings = sessions, recordings

    def outputs(self, tab: str | None = None, status: str | None = None, compare: tuple | None = None,
                compare_focus=None, step: tuple | None = None, step_focus=None, why_focus=None,
                why: tuple | None = None) -> tuple:
        """A value for each of Targets.outputs: the parts given, gr.skip() for the rest. compare: the controls'
        values then the run's outputs; step: status, slider and the step's outputs; why: its panels."""
        skip = gr.skip()
        n_controls, n_run = len(PARSERS), 1 + len(self.compare.methods) + NUM_CHARTS
        n_step, n_why = NUM_STEP_OUTPUTS, NUM_PANELS
        return (gr.update(selected=tab) if tab else skip,
                gr.update(value=status_html(status, error=True), visible=True) if status else skip,
                *(compare or [skip] * (n_controls + n_run))[:n_controls], compare_focus or skip,
                *(compare or [skip] * (n_controls + n_run))[n_controls:],
                step_focus or skip, *(step or [skip] * (2 + n_step)), why_focus or skip, *(why or [skip] * n_why))

    def show_point(self, point: Point, session: str) -> tuple:
        """The point's recording on its tab, that tab's controls set, and what to look at."""
        item = self.recordings.get(point.recording)
        if item is None:
            return self.outputs(tab="lesson", status=f"point {point.number} is not recorded on this server yet: "
                                                     "press “Run it live”")
        if point.tab == "compare":
            shown = self.compare.replays.show_comparison(item, session, f"lesson point {point.number}")
            return self.outputs(tab="compare", compare=shown, compare_focus=focus_update(point))
        state = self.sessions.get(session)
        state.panels.clear()  # the recordings, not what the visitor measured live before
        return self.outputs(tab="why", why_focus=focus_update(point),
                            why=panel_outputs(self.recordings, state.projector))

    def on_show(self, number: int, request: gr.Request):
        return self.show_point(POINTS[number - 1], request.session_hash)

    def on_step(self, request: gr.Request):
        """Point STEP_THROUGH token by token: the sampled recording at its first rejection."""
        comparison = self.recordings.get("sampled")
        if comparison is None:
            return self.outputs(tab="lesson", status="the sampled comparison is not recorded on this server yet")
        self.sessions.get(request.session_hash).last = comparison
        method, step, _, _ = lesson.first_rejection(comparison) or (None, 0, 0, None)
        point = POINTS[STEP_THROUGH - 1]
        note = gr.update(value=f'<div class="focus-note">Lesson point {point.number}: step {step}, where '
                               f'{html.escape(method_label(method or ""))} had a draft rejected. Look at its card: '
                               'p_target, p_draft, their ratio and the draw r that decided it.</div>', visible=True)
        return self.outputs(tab="step", step_focus=note,
                            step=self.step.show(comparison, request.session_hash, "Lesson recording", start=step))

    def live_settings(self, point: Point) -> Settings:
        """What "Run it live" runs for a Compare point: its recording's every setting (the lanes this server has),
        or, with no recording here, the settings the recordings are made with."""
        item = self.recordings.get(point.recording)
        if isinstance(item, Comparison):
            settings = parse_controls(item.settings)
            return replace(settings, methods=tuple(m for m in settings.methods if m in self.compare.methods))
        temperature = 0.0 if point.recording == "greedy" else lesson.LOSSLESS_TEMPERATURE
        return lesson.comparison_settings(self.compare.methods, temperature)

    def prepare_live(self, number: int, request: gr.Request):
        """Before a live run: open the point's tab with every control set to what will run, and say it runs live
        (the run itself follows, queued: Stop on that tab withdraws it, or stops it once it runs)."""
        self.sessions.get(request.session_hash).press_run()
        point = POINTS[number - 1]
        if point.tab == "compare":
            n_run = 1 + len(self.compare.methods) + NUM_CHARTS
            controls = (*control_values(self.live_settings(point)), *[gr.skip()] * n_run)
            return self.outputs(tab="compare", compare=controls, compare_focus=focus_update(point, live=True))
        return self.outputs(tab="why", why_focus=focus_update(point, live=True))

    def run_live(self, number: int, request: gr.Request):
        """The point's measurement, live: a comparison streams into the Compare tab; a Why panel is measured."""
        point = POINTS[number - 1]
        if point.tab == "compare":
            yield from self.compare.run.run_comparison(self.live_settings(point), True, request.session_hash,
                                                        timing_runs=lesson.LIVE_TIMING_RUNS)
        elif point.recording == "sweeps":
            yield self.why.on_sweep(HELDOUT, request)  # the lesson's held-out prompts, as recorded
        elif point.recording == "lossless":
            yield self.why.on_check(request)
        elif point.recording == "temperatures":
            yield self.why.on_temperatures(request)
        elif point.recording == "trees":
            yield self.why.on_trees(request)
        elif point.recording == "load":
            yield self.why.on_under_load(request)
        elif point.recording == "long":
            yield self.why.on_long(request)
        else:
            yield self.why.on_parts(request)

    @staticmethod
    def clear_notes():
        """A run, a changed setting or another tab: every lesson note hidden (the page's script also drops the pinned
        panel and the outline), so nothing said about the last view stays on the next one."""
        return (gr.update(value="", visible=False),) * 3

    def on_load(self, request: gr.Request):
        """A link's `lesson=N` opens point N as "Show me" does; `tab=NAME` opens a tab; with `present=1` the
        slides show the point instead (app/tabs/slides.py). A bad value: one line on the Lesson tab, and the page
        as it opens by default."""
        params = dict(getattr(request, "query_params", None) or {})
        adopt_from_link(self.sessions, request)
        number, tab, present = params.get("lesson"), params.get("tab"), params.get("present")
        if present == "1":
            return self.outputs()
        if present not in (None, "0"):
            return self.outputs(tab="lesson", status=f"this link asks for present {present[:20]!r}; present=1 "
                                                     "shows the lesson as slides, present=0 the page")
        if number is None and tab is None:
            return self.outputs()
        if number is not None:
            # ASCII digits only, and few: str.isdigit also takes '²' (which int refuses) and thousands of digits
            if number.isascii() and number.isdigit() and len(number) <= 3 and 1 <= int(number) <= len(POINTS):
                return self.show_point(POINTS[int(number) - 1], request.session_hash)
            return self.outputs(tab="lesson", status=f"this link asks for lesson point {number[:20]!r}; there are "
                                                     f"points 1 to {len(POINTS)}")
        if tab in TABS:
            return self.outputs(tab=tab)
        return self.outputs(tab="lesson", status=f"this link asks for a tab {tab[:20]!r}; there are "
                                                 f"{', '.join(TABS)}")


@dataclass(frozen=True)
class PointEvents:
    """One point's handlers, bound to its number. (Gradio reads a handler's own signature to pass it the
    request; a functools.partial would hide it.)"""

    handlers: LessonHandlers
    number: int

    def on_show(self, request: gr.Request):
        return self.handlers.on_show(self.number, request)

    def prepare_live(self, request: gr.Request):
        return self.handlers.prepare_live(self.number, request)

    def run_live(self, request: gr.Request):
        yield from self.handlers.run_live(self.number, request)


def wire(targets: Targets, handlers: LessonHandlers, demo: gr.Blocks) -> None:
    quiet = dict(api_visibility="private", show_progress="hidden")
    everything = targets.outputs
    for point, show, live in zip(POINTS, targets.lesson.show_buttons, targets.lesson.live_buttons):
        events = PointEvents(handlers, point.number)
        show.click(events.on_show, None, everything, concurrency_limit=None, **quiet) \
            .then(None, None, None, js=focus_js(point.chart))
        if point.tab == "compare":
            measured = targets.compare.run_outputs
        elif point.recording == "sweeps":
            measured = [targets.why.sweep_plot, targets.why.sweep_text, targets.why.machine_plot]
        elif point.recording == "lossless":
            measured = [targets.why.check_plot, targets.why.check_text]
        elif point.recording == "temperatures":
            measured = [targets.why.temperature_tau, targets.why.temperature_acceptance, targets.why.temperature_text]
        elif point.recording == "trees":
            measured = [targets.why.trees_plot, targets.why.trees_cost, targets.why.trees_published,
                        targets.why.trees_text]
        elif point.recording == "load":
            measured = [targets.why.load_plot, targets.why.load_text]
        elif point.recording == "long":
            measured = [targets.why.long.plot, targets.why.long.text]
        else:
            measured = [targets.why.parts_plot, targets.why.parts_text]
        live.click(events.prepare_live, None, everything, queue=False, **quiet) \
            .then(events.run_live, None, measured, concurrency_limit=1, concurrency_id="engine", **quiet)
    targets.lesson.step_button.click(handlers.on_step, None, everything, concurrency_limit=None, **quiet)
    clear = dict(fn=handlers.clear_notes, inputs=None, outputs=targets.notes, js=CLEAR_JS, queue=False, **quiet)
    for button in targets.run_buttons:
        button.click(**clear)
    for control in targets.compare.controls.values():
        control.input(**clear)  # a lecturer's change, not a lesson point setting the controls
    targets.tabs.select(**clear)  # the lecturer opening a tab, not a point opening its own
    demo.load(handlers.on_load, None, everything, queue=False, **quiet) \
        .then(None, None, None, js=LINK_FOCUS_JS)  # like the Compare tab's: never queued
