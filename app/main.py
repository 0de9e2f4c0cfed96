"""Builds the SpecLab Blocks. The entry point (`python -m app`) loads the engine and launches it."""

from __future__ import annotations

import html
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from engine.contract.interface import EngineLike
from engine.contract.presets import PRESETS

from .run import page_sessions, runner
from .comparison import MAX_FILE_BYTES
from .draw import overlap, projector
from .hosting import classroom as classes, disk, fairness, presenter as presenting, toggles
from .hosting.addresses import FullQueueWords, LongAddressGuard, VisitorLimit
from .run.sessions import SessionStore
from .servers import lanes as server_lanes
from . import lesson as lesson_data
from .tabs import about, compare, lesson, slides, step, why
from .draw.theme import CSS

INTRO = ("**SpecLab** runs real speculative decoding: a cheap drafter proposes tokens, the big model checks "
         "them all in one forward pass, and the output is distributed exactly as the big model's own: at "
         "temperature 0 the very same text, above it the same odds (each lane draws its own sample). "
         "Every number below is measured in this run, on this machine. New to it? The **Lesson** tab walks "
         "through the argument in eleven points, each one click from the data that shows it.")


# Runs waiting at once; past this a visitor is told the app is busy, the expected wait and to try again. A class
# of 35 pressing one lesson point's "Run it live" together must all get in (they share one measurement), with
# room left for other visitors' runs: one address holds at most fairness.PLACES_PER_ADDRESS of them.
QUEUE_SIZE = 128
# Browser sessions whose state Gradio keeps (each holds a copy of the page's config, ~0.6 MiB here); past
# this the least recently used is dropped. Gradio's default, 10 000, let memory grow with every new visitor.
SESSION_CAPACITY = 256
# How often Gradio's queue looks for a job to start while it has none, and for progress to send: its own 1 and 10 ms
# keep an idle server busy polling (docs/hosting.md, the queue of engine jobs, has what it cost). A click then waits
# at most 20 ms more to start, well under its round trip.
QUEUE_POLL_S, PROGRESS_POLL_S = 0.02, 0.1
# Gradio's cache (uploads, and the copies of the files it serves: downloads, plots) is swept every
# CACHE_SWEEP_S of files older than CACHE_AGE_S; an upload over MAX_FILE_BYTES is refused as it arrives.
CACHE_SWEEP_S, CACHE_AGE_S = 600, 3600


def build_app(engine: EngineLike, notice: str = "", queue_size: int = QUEUE_SIZE, run_lanes=runner.run_lanes,
              max_run_s: float = compare.MAX_RUN_S, servers=(), server_timeouts=None,
              recordings: Path | None = None, pin_key: str | None = None, presenter_key: str | None = None,
              job_budget_s: float = fairness.JOB_BUDGET_S, presenter_lane: bool | None = None) -> gr.Blocks:
    """notice: one line shown above the lanes (e.g. why the asked-for preset was replaced); run_lanes: what
    advances the lanes (app/hosting/gpu.py's lane_runner on a ZeroGPU Space); servers: the operator's ServerSpecs,
    each a lane beside the local ones (app/servers/lanes.py); recordings: the folder that keeps recorded runs
    across restarts (app/recordings.py; None: memory only); pin_key: a link opened with `pin=` this key pins
    its recorded run, never evicted (None: no pins); presenter_key: the operator's secret whose browsers' runs go
    ahead of the queue (app/hosting/presenter.py; None: no presenter); job_budget_s: the most engine time a visitor's
    comparison may be estimated to take (app/hosting/fairness.py); presenter_lane: whether a presenter's jobs
    start beside a visitor's (default: when the engine runs in a process of its own, which takes one job at a time
    from any thread), else at the head of the line. The app's server-side state is one bounded
    SessionStore, shared by its tabs."""
    door, job_s = None, None  # the queue's door and each waiting job's engine time, made once the page exists (below)

    def withdraw(session: str) -> None:  # Stop on a job still waiting withdraws it at once
        if door is not None:
            door.withdraw(session)

    def where(session: str) -> tuple[int, float]:  # a browser's place in the queue and its expected wait
        return fairness.place_of(demo._queue, session, job_s)

    sessions = SessionStore(recordings=recordings, withdraw=withdraw)
    presenter = presenting.Presenter(presenter_key)
    own_lane = hasattr(engine, "pid") if presenter_lane is None else presenter_lane  # engine/process.py's proxy

    def presenter_first(stop) -> bool:  # a visitor's comparison lets a presenter's job go between its lanes
        return door is not None and door.presenter_running() and not any(
            (state := sessions.peek(s)) is not None and state.stop is stop for s in list(door.presenters))

    turns = runner.Turns(presenter_first if presenter.key is not None and own_lane else None)
    server_handlers = (server_lanes.ServerLaneHandlers(list(servers), server_timeouts or server_lanes.Timeouts())
                       if servers else None)
    preset = PRESETS.get(engine.preset)
    models = preset.description if preset else engine.preset
    recordings = lesson_data.recorded()
    # analytics off: Gradio would otherwise ask PyPI for its latest version in a thread at every build and report each
    # launch to its servers; the app calls no one (and on a closed network each try costs a TLS setup for nothing)
    with gr.Blocks(title="SpecLab — see speculative decoding work", delete_cache=(CACHE_SWEEP_S, CACHE_AGE_S),
                   analytics_enabled=False) as demo:
        slide_view = slides.layout()  # in place of the page when presenting (?present=1)
        with gr.Column(elem_id="page"):
            gr.Markdown(f"# SpecLab\n{INTRO}")
            gr.HTML(f'<div class="note" id="device">Running on <b>{html.escape(engine.device_name)}</b> · models: '
                    f'<b>{html.escape(engine.preset)}</b> — {html.escape(models)}</div>')
            projector_toggle = projector.layout()
            if notice:
                gr.HTML(f'<div class="status-error">{html.escape(notice)}</div>', elem_id="notice")
            with gr.Tabs() as tabs:
                with gr.Tab("Compare", id="compare"):
                    compare_view, compare_handlers = compare.render(engine, demo, sessions, run_lanes=run_lanes,
                                                                    max_run_s=max_run_s, servers=server_handlers,
                                                                    pin_key=pin_key, turns=turns, where=where)
                with gr.Tab("Lesson", id="lesson"):
                    lesson_view = lesson.layout(recordings)
                with gr.Tab("Step through", id="step"):
                    step_view, step_handlers = step.render(sessions)
                with gr.Tab("Why", id="why"):
                    why_view, why_handlers = why.render(engine, sessions, recordings, max_run_s=max_run_s)
                with gr.Tab("About", id="about"):
                    about.render(engine)
                    if server_handlers is not None:
                        server_lanes.about_section(server_handlers)
        # The lesson writes into the other tabs, so it is wired once they all exist; the slides run its handlers.
        lesson_handlers = lesson.LessonHandlers(compare_handlers, step_handlers, why_handlers, sessions, recordings)
        lesson.wire(lesson.Targets(tabs, lesson_view, compare_view, step_view, why_view), lesson_handlers, demo)
        slides.wire(slide_view, slides.SlideHandlers(recordings, sessions, lesson_handlers), demo)
        drawings = toggles.ByMode()  # a comparison's charts drawn once per mode (app/hosting/toggles.py)

        def redraw_all(session, at, token):
            state = sessions.get(session)
            return (*drawings.get((state.last,), state.projector, (), lambda: compare_handlers.run.redraw_charts(
                session)), *why_handlers.redraw_panels(session, recordings),
                *drawings.get((state.shown,), state.projector, (repr(at)[:40], repr(token)[:200]),
                              lambda: step_handlers.redraw_charts(session, at, token)),
                why_handlers.prediction(session))

        charts = [*compare_view.charts, *why_view.panels, step_view.timeline, step_view.draft_plot,
                  step_view.target_plot, why_view.prediction]
        redraw = toggles.LimitedRedraw(sessions, redraw_all, outputs=len(charts))  # limited per session, address
        projector.wire(projector_toggle, demo, redraw, charts, [step_view.slider, step_view.token])
        demo.speclab_toggles, demo.speclab_drawings = redraw, drawings
    demo.queue(max_size=queue_size)
    demo._queue.sleep_when_free, demo._queue.progress_update_sleep_when_free = QUEUE_POLL_S, PROGRESS_POLL_S
    classroom = classes.Classroom()  # a class code the presenter opens: each member counted apart
    door = fairness.Door(demo, job_budget_s, presenter.holds, fairness.comparison_estimate(runner.COSTS), own_lane,
                         classroom, at_once_limits=[redraw.door_check])  # a toggle past its limit, refused at the door
    job_s = fairness.job_seconds(runner.COSTS, live_lanes(lesson_handlers))  # each waiting job's engine time
    fairness.install_estimates(demo._queue, job_s)  # each waiting job's place and start
    demo.speclab_door, demo.speclab_presenter, demo.speclab_job_s = door, presenter, job_s
    demo.speclab_classroom = classroom
    return demo


def live_lanes(handlers: lesson.LessonHandlers):
    """(block function, its inputs) -> the lanes (new tokens, requests at once) and timing runs a lesson point's live
    comparison runs, from the Lesson's or a slide's Run it live; None for any other job (app/hosting/fairness.py)."""

    def lanes(fn, data: list):
        owner, name = getattr(fn.fn, "__self__", None), getattr(fn.fn, "__name__", "")
        if isinstance(owner, lesson.PointEvents) and name == "run_live":
            number = owner.number
        elif isinstance(owner, slides.SlideHandlers) and name == "run_live" and data:
            number = slides.slide_number(data[0])
        else:
            return None
        point = lesson_data.POINTS[number - 1] if number else None
        if point is None or point.tab != "compare":
            return None
        settings = handlers.live_settings(point)
        return [(settings.max_new_tokens, settings.requests_at_once)] * len(settings.methods), \
            lesson_data.LIVE_TIMING_RUNS

    return lanes


def launch(demo: gr.Blocks, **kwargs):
    """Serve the app (Gradio's launch, same keywords): the page's style and script; an over-long address, a
    visitor past the limit on requests that bypass the queue, and a full queue answered by the app
    (app/hosting/addresses.py); bad events, the queue's shares, the budget and the presenter's lane
    (app/hosting/fairness.py, app/hosting/presenter.py); the disk's budget for uploads and downloads
    (app/hosting/disk.py); the page served from memory and lean per-visitor sessions
    (app/run/page_sessions.py); uploads of at most MAX_FILE_BYTES."""
    kwargs.setdefault("state_session_capacity", SESSION_CAPACITY)
    kwargs.setdefault("max_file_size", MAX_FILE_BYTES)  # a saved comparison's limit, enforced where the bytes arrive
    app_kwargs = dict(kwargs.pop("app_kwargs", None) or {})
    budget = disk.DiskBudget([demo.GRADIO_CACHE, disk.DOWNLOADS],  # uploads and downloads, in all and per address
                             in_use=lambda: disk.queued_paths(demo))  # never a file a page's event names
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", ()),  # outermost first: the cheapest answers first
                                Middleware(LongAddressGuard),
                                Middleware(VisitorLimit, key=classes.scope_identity(demo.speclab_classroom)),
                                Middleware(disk.UploadBudget, budget=budget),
                                Middleware(presenting.PresenterPage, presenter=demo.speclab_presenter,
                                           extra=lambda: classes.presenter_form(demo.speclab_classroom)),
                                Middleware(classes.ClassPage, classroom=demo.speclab_classroom,
                                           presenter=demo.speclab_presenter),
                                Middleware(FullQueueWords, blocks=demo, job_s=demo.speclab_job_s),
                                Middleware(fairness.QueueDoor, door=demo.speclab_door),
                                Middleware(page_sessions.PageCache, blocks=demo)]
    block = not kwargs.pop("prevent_thread_lock", False)
    head = projector.HEAD + why.HEAD + slides.HEAD + overlap.HEAD + presenting.HEAD + classes.HEAD
    launched = demo.launch(css=CSS, head=head, theme=gr.themes.Default(), footer_links=["api"],
                           app_kwargs=app_kwargs, prevent_thread_lock=True, **kwargs)
    page_sessions.install(demo)  # from the next new visitor on
    budget.sweep()  # what the folders hold already
    budget.every(serving=lambda: demo.is_running)
    if block:
        demo.block_thread()
    return launched
