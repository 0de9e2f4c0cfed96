"""Every engine job stops: a comparison, the K sweep, the distribution check and the parts, from the Why tab or
a lesson point's "Run it live": Stop ends a running one within a quarter of a second, withdraws one still
waiting in the queue, and the time limit ends any of them."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from engine.contract.types import GenerationConfig, Stopped  # noqa: E402

def refused(run, start: str) -> None:
    """`run` ends with the app's one line, starting with `start`."""
    with pytest.raises(gr.Error) as err:
        run()
    assert err.value.message.startswith(start) and "\n" not in err.value.message, err.value.message


SHORT_PROMPTS = ["def f(x):", "import os", "class A:"]  # the tiny model's context holds 96 tokens


@pytest.fixture
def long_measurements(monkeypatch):
    """Measurements that take seconds on the tiny random models, so there is time to press Stop: the live sizes
    (what the Why tab's buttons and Run it live measure) made larger."""
    monkeypatch.setattr(lesson, "LIVE_SWEEP_KS", (1, 2, 3, 4, 6, 8))
    monkeypatch.setattr(lesson, "LIVE_SWEEP_TOKENS", 40)
    monkeypatch.setattr(lesson, "LIVE_SWEEP_PROMPTS", len(SHORT_PROMPTS))
    monkeypatch.setattr(lesson, "LIVE_SWEEP_ROUNDS", 2)
    monkeypatch.setattr(lesson, "LIVE_PARTS_PROMPTS", len(SHORT_PROMPTS))
    monkeypatch.setattr(lesson, "LIVE_PARTS_ROUNDS", 2)
    monkeypatch.setattr(lesson, "LIVE_LOSSLESS_SAMPLES", 200)
    monkeypatch.setattr(lesson, "load_prompts", lambda: SHORT_PROMPTS)


@pytest.fixture(scope="module")
def why_handlers(random_engine):
    """The Why tab's handlers, rendered once for the file: each test is visitors of its own, and what a test changes
    of them (the engine's generate) it puts back."""
    from app.run.sessions import SessionStore
    from app.tabs import why

    with gr.Blocks():
        _, handlers = why.render(random_engine, SessionStore(), recordings={})
    return handlers


def test_a_set_stop_ends_a_generation_and_every_measurement(random_engine):
    from engine.measure.lossless import distribution_check
    from engine.measure.sweep import k_sweep, variant_sweep

    stop = threading.Event()
    stop.set()
    config = GenerationConfig(method="eagle3", max_new_tokens=20)
    with pytest.raises(Stopped):
        random_engine.generate("def f(x):", config, stop)
    assert len(random_engine.generate("def f(x):", config, threading.Event()).output_ids) == 20  # unset: runs
    for measure in (lambda: k_sweep(random_engine, SHORT_PROMPTS, 8, stop=stop),
                    lambda: variant_sweep(random_engine, "dspark", SHORT_PROMPTS, 8, stop=stop),
                    lambda: distribution_check(random_engine, "def f(x):", samples=20, stop=stop)):
        with pytest.raises(Stopped):
            measure()


def _stopped_within(handlers, run, press) -> float:
    """Seconds from a Stop pressed while `run` measures to `run` ending with the app's one line."""
    pressed = []

    def stop_later():
        time.sleep(0.3)
        pressed.append(time.monotonic())
        press()

    threading.Thread(target=stop_later, daemon=True).start()
    refused(run, "stopped: the panel shows what it showed before")
    return time.monotonic() - pressed[0]


@pytest.mark.parametrize("job", ["sweep", "check", "parts"])
def test_stop_ends_a_running_measurement_within_a_quarter_second(why_handlers, long_measurements, job):
    visitor = SimpleNamespace(session_hash=f"stopper-{job}")
    run = {"sweep": lambda: why_handlers.on_sweep("heldout", visitor), "check": lambda: why_handlers.on_check(visitor),
           "parts": lambda: why_handlers.on_parts(visitor)}[job]
    assert _stopped_within(why_handlers, run, lambda: why_handlers.on_stop(visitor)) < 0.25
    assert why_handlers.sessions.get(visitor.session_hash).stop is None  # nothing left to stop


def test_stop_withdraws_a_measurement_still_waiting_in_the_queue(why_handlers, monkeypatch):
    visitor = SimpleNamespace(session_hash="queued")
    monkeypatch.setattr(why_handlers.engine, "generate", lambda *a, **k: pytest.fail("a withdrawn job ran"))
    why_handlers.on_requested(visitor)  # the button's press, outside the queue
    why_handlers.on_stop(visitor)  # Stop while it waits
    refused(lambda: why_handlers.on_check(visitor), "withdrawn: Stop was pressed while this measurement waited")


def test_a_measurement_past_the_time_limit_is_stopped_with_a_clear_line(random_engine, long_measurements):
    from app.run.sessions import SessionStore
    from app.tabs import why

    with gr.Blocks():
        _, handlers = why.render(random_engine, SessionStore(), recordings={}, max_run_s=0.3)
    started = time.monotonic()
    refused(lambda: handlers.on_sweep("heldout", SimpleNamespace(session_hash="slow")),
            "stopped after 0.3 s, the most one measurement may take")
    assert time.monotonic() - started < 0.3 + 0.25


@pytest.fixture(scope="module")
def built(random_engine):
    """The app with its defaults, built once (compare_support.default_app): its lesson, Compare and slide handlers
    (each test a visitor of its own)."""
    from compare_support import default_app
    from app.tabs.compare import RunController
    from app.tabs.lesson import LessonHandlers
    from app.tabs.slides import SlideHandlers

    demo = default_app(random_engine)
    owners = [getattr(dep.fn, "__self__", None) for dep in demo.fns.values()]
    return SimpleNamespace(**{name: next(o for o in owners if isinstance(o, kind)) for name, kind in (
        ("lesson", LessonHandlers), ("compare", RunController), ("slides", SlideHandlers))})


def test_stop_withdraws_a_lessons_run_it_live_still_waiting_in_the_queue(random_engine, built, monkeypatch):
    handlers, compare = built.lesson, built.compare
    monkeypatch.setattr(random_engine, "generate", lambda *a, **k: pytest.fail("a withdrawn job ran"))
    monkeypatch.setattr(random_engine, "stream", lambda *a, **k: pytest.fail("a withdrawn job ran"))
    for point in lesson.POINTS:
        visitor = SimpleNamespace(session_hash=f"class-{point.number}")
        handlers.prepare_live(point.number, visitor)  # the button's press, outside the queue
        compare.on_stop(visitor)  # Stop (the tab the point opened has one)
        if point.tab == "compare":
            (status, *_), = list(handlers.run_live(point.number, visitor))
            assert "withdrawn" in status
        else:
            refused(lambda: list(handlers.run_live(point.number, visitor)), "withdrawn")


def test_visitors_who_pressed_while_a_measurement_ran_get_its_result_and_nothing_runs_again(why_handlers, monkeypatch):
    monkeypatch.setattr(lesson, "load_prompts", lambda: SHORT_PROMPTS)  # prompts the tiny models fit
    monkeypatch.setattr(lesson, "LIVE_PARTS_TOKENS", 4)  # what is shared matters here, not how long it ran
    first, waiting, later = (SimpleNamespace(session_hash=name) for name in ("first", "waiting", "later"))
    why_handlers.on_requested(first)
    why_handlers.on_requested(waiting)  # pressed while the first one waits or runs: the same measurement
    measured = why_handlers.on_parts(first)
    calls = []
    real = why_handlers.engine.generate
    why_handlers.engine.generate = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        shared = why_handlers.on_parts(waiting)  # its turn in the queue: the first run has ended since it pressed
        assert not calls and shared[1] == measured[1]
        why_handlers.on_requested(later)  # pressed after it ended: measured afresh
        why_handlers.on_parts(later)
        assert calls
    finally:
        why_handlers.engine.generate = real


def _said(outputs) -> str:
    """The one line under a slide (its status)."""
    from app.tabs.slides import plain_words

    return plain_words(outputs[-1])


def test_the_slides_stop_withdraws_its_run_it_live_still_waiting_in_the_queue(random_engine, built, monkeypatch):
    slides = built.slides
    monkeypatch.setattr(random_engine, "generate", lambda *a, **k: pytest.fail("a withdrawn job ran"))
    monkeypatch.setattr(random_engine, "stream", lambda *a, **k: pytest.fail("a withdrawn job ran"))
    for point in lesson.POINTS:
        visitor = SimpleNamespace(session_hash=f"slide-{point.number}")
        slides.on_press(point.number, visitor)  # the slide's button, outside the queue
        slides.on_stop(visitor)  # the slide's Stop while it waits
        *_, last = slides.run_live(point.number, visitor)
        said = _said(last)
        assert said.startswith("⚠ withdrawn") and said.endswith("the slide shows the recording"), said
        assert "\n" not in said
        assert last[1] is slides.slide(point.number)[1]  # the recording's chart stays


@pytest.mark.parametrize("number", [n for n in (1, 5) if n <= len(lesson.POINTS)])
def test_the_slides_stop_ends_its_running_measurement_and_the_slide_says_so(built, long_measurements, number):
    slides = built.slides
    visitor = SimpleNamespace(session_hash=f"running-{number}")
    state = slides.sessions.get(visitor.session_hash)
    outputs = []

    def run():
        slides.on_press(number, visitor)
        outputs.extend(slides.run_live(number, visitor))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while state.stop is None and worker.is_alive():  # until the measurement runs
        time.sleep(0.01)
    slides.on_stop(visitor)
    worker.join(timeout=120)
    said = _said(outputs[-1])
    assert said.startswith("⚠ stopped") and said.endswith("the slide shows the recording") and "\n" not in said, said
    assert outputs[-1][1] is slides.slide(number)[1]  # the recording's chart, not a stopped run's
