"""The fair queue through a launched app (the random models): a Stop pressed while a run waits answers at once, and a
presenter's run starts at once behind three visitors' runs while a visitor's waits its turn."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

pytest.importorskip("gradio")

import httpx  # noqa: E402

from app.run import runner  # noqa: E402
from app.hosting import fairness  # noqa: E402
from app.hosting.presenter import COOKIE, token  # noqa: E402
from compare_support import raw_inputs  # noqa: E402
from conftest import launch_locally, needs_chromium, page_on  # noqa: E402
from scripts.app_client import App, messages  # noqa: E402

KEY = "the-lecturers-own-key"
HOLD_S = 1.5  # how long each visitor's run holds the engine here


def slow_lanes(engine, prompt, lanes, stop, **kwargs):
    """A visitor's run (`visitors` below): the real lanes after HOLD_S of other work that, like a lane, lets a
    presenter's job go first between its parts and ends at Stop. Any other run: the real lanes."""
    for _ in range(int(HOLD_S / 0.25) if prompt.startswith("def visitor_") else 0):
        kwargs.get("turns", runner.EVERY_RUN_FIRST).take(stop)
        time.sleep(0.25)
        yield
        if stop.is_set():
            return
    yield from runner.run_lanes(engine, prompt, lanes, stop, timing_runs=1)


@pytest.fixture(scope="module")
def served(random_engine):
    from app.main import build_app

    # the presenter's own lane, as with the engine in a process of its own (here the visitors' runs leave the
    # engine alone while the presenter's runs: slow_lanes)
    demo = build_app(random_engine, run_lanes=slow_lanes, presenter_key=KEY, presenter_lane=True)
    try:
        yield App(launch_locally(demo)), demo
    finally:
        demo.close()


def joined(app: App, data: list, session: str, cookie: str = "") -> tuple[httpx.Client, str]:
    client = httpx.Client(timeout=60, headers={"cookie": cookie} if cookie else {})
    answer = client.post(f"{app.base}/gradio_api/queue/join", json={
        "data": data, "fn_index": app.fn_index(api_name="run"), "session_hash": session})
    answer.raise_for_status()
    return client, answer.json()["event_id"]


def visitors(app: App, n: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=app.call, args=(app.fn_index(api_name="run"), raw_inputs(
        prompt=f"def visitor_{i}(x):\n", max_new_tokens=4)), kwargs={"session": f"visitor-{i}"}) for i in range(n)]
    for thread in threads:
        thread.start()
        time.sleep(0.1)
    return threads


def wait_for(check, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def engine_queue(demo):
    """The served app's queue of engine jobs, once a first run has reached it (Gradio makes it then)."""
    queues = demo._queue.event_queue_per_concurrency_id
    wait_for(lambda: "engine" in queues)
    return queues["engine"]


def test_stop_on_a_waiting_run_withdraws_it_at_once(served, capfd):
    app, demo = served
    threads = visitors(app, 1)
    engine = engine_queue(demo)
    wait_for(lambda: engine.current_concurrency == 1)
    session = "stops-while-waiting"
    app.call(app.fn_index(api_name="on_requested"), [], session=session)
    client, event_id = joined(app, raw_inputs(prompt="def waits(x):\n", max_new_tokens=4), session)
    started = time.monotonic()
    app.call(app.fn_index(api_name="stop"), [], session=session)
    seen = messages(app, session, event_id, timeout_s=30, client=client)
    assert time.monotonic() - started < 1.0  # the visitor ahead still holds the engine for seconds
    assert "withdrawn" in seen[-1][1]["output"]["data"][0]
    app.call(app.fn_index(api_name="stop"), [], session="visitor-0")  # the visitor ahead: its run ends within a part
    for thread in threads:
        thread.join(30)
    assert "Traceback" not in "".join(capfd.readouterr())


def test_a_waiting_run_is_told_its_place_and_expected_start_from_the_runs_ahead(served, monkeypatch):
    app, demo = served
    threads = visitors(app, 2)
    engine = engine_queue(demo)
    wait_for(lambda: engine.current_concurrency == 1 and len(engine.queue) == 1)
    client, event_id = joined(app, raw_inputs(prompt="def third(x):\n", max_new_tokens=4), "third")
    seen = messages(app, "third", event_id, until=("estimation",), timeout_s=30, client=client)
    at, told = seen[-1]
    assert at < 3.0 and told["rank"] == 1 and told["queue_size"] == 2
    ahead = fairness.job_seconds(runner.COSTS)(engine.queue[0])
    assert told["rank_eta"] >= 2 * ahead  # the run ahead and its own, besides what is left of the running one
    # past the stated wait (here any), the press is also told in words: its place, and when to come back
    where = app.fn_index(api_name="where_it_stands")
    short = app.call(where, raw_inputs(prompt="def third(x):\n", max_new_tokens=4), session="third")["outputs"][0]
    assert short.get("__type__") == "update" and "value" not in short  # a short wait: the queue's figures suffice
    monkeypatch.setattr(fairness, "WAIT_WORDS_S", 0.0)
    words = app.call(where, raw_inputs(prompt="def third(x):\n", max_new_tokens=4), session="third")["outputs"][0]
    assert "number 2 in line" in words and "come back after" in words
    for session in ("third", "visitor-0", "visitor-1"):
        app.call(app.fn_index(api_name="on_requested"), [], session=session)
        app.call(app.fn_index(api_name="stop"), [], session=session)
    for thread in threads:
        thread.join(HOLD_S)


def test_a_presenters_run_starts_at_once_behind_three_visitors_and_a_visitors_waits(served):
    app, demo = served
    threads = visitors(app, 3)
    engine = engine_queue(demo)
    wait_for(lambda: engine.current_concurrency == 1 and len(engine.queue) == 2)
    client, event_id = joined(app, raw_inputs(prompt="def lecture(x):\n", max_new_tokens=4), "lecturer",
                              cookie=f"{COOKIE}={token(KEY)}")
    seen = messages(app, "lecturer", event_id, timeout_s=30, client=client)
    starts = next(at for at, message in seen if message["msg"] == "process_starts")
    assert starts < 2.0 and "done" in seen[-1][1]["output"]["data"][0]
    assert seen[-1][0] < HOLD_S * 2 + 1  # its lanes ran while the visitor's run waited between its parts
    assert len(engine.queue) >= 1  # the visitors' runs still wait
    client, event_id = joined(app, raw_inputs(prompt="def student(x):\n", max_new_tokens=4), "student")
    time.sleep(1.0)
    assert any(e._id == event_id for e in engine.queue)  # without the key: behind the runs ahead of it
    assert not demo._queue.event_queue_per_concurrency_id[fairness.PRESENTER_LANE].queue
    for session in ("student", *(f"visitor-{i}" for i in range(3))):  # Stop: each queued run withdrawn at once
        app.call(app.fn_index(api_name="on_requested"), [], session=session)
        app.call(app.fn_index(api_name="stop"), [], session=session)
    for thread in threads:
        thread.join(HOLD_S)
        assert not thread.is_alive()


@needs_chromium
def test_a_browser_that_entered_the_key_carries_the_presenter_mark_and_a_wrong_key_does_not(served, chromium,
                                                                                            monkeypatch):
    app, _ = served
    monkeypatch.setattr("app.hosting.presenter.WRONG_KEY_PAUSE_S", 0)
    with page_on(chromium, viewport={"width": 1024, "height": 768}) as page:
        page.goto(f"{app.base}/presenter")
        page.fill("input[name=key]", "not-the-lecturers-key")
        page.click("input[type=submit]")
        assert "That is not the presenter key." in page.inner_text("body")
        page.goto(f"{app.base}/?lesson=1&present=1")
        page.wait_for_selector("#slides .slide-claim")
        assert page.query_selector("#presenter-mark") is None
        page.goto(f"{app.base}/presenter")
        page.fill("input[name=key]", KEY)
        page.click("input[type=submit]")
        page.wait_for_selector("#presenter-mark")
        assert "present=1" in page.url and page.inner_text("#presenter-mark") == "presenter"
        assert KEY not in page.url and all(KEY not in c["value"] for c in page.context.cookies())


LIVE_MEASURES = {"lossless": "measure_check_live", "sweeps": "measure_sweeps_live", "parts": "measure_parts_live",
                 "temperatures": "measure_temperatures_live", "trees": "measure_trees_live",
                 "load": "measure_load_live", "long": "measure_long_live"}


def test_a_class_pressing_any_points_run_it_live_together_runs_the_engine_once(served, monkeypatch):
    """Every lesson point's "Run it live" pressed by a class at once, through the queue: the engine measures it once
    (a comparison's live pass, a Why measurement: each counted), and every visitor gets that measurement."""
    from dataclasses import replace

    from app import lesson
    from app.tabs.lesson import LessonHandlers
    from scripts.app_load import at_once, chain

    app, demo = served
    handlers = next(owner for dep in demo.fns.values()
                    if isinstance(owner := getattr(dep.fn, "__self__", None), LessonHandlers))
    runs = Counter()
    real_pass = runner.lane_events
    from app.run.sessions import Session

    class_size, presses, real_press = 4, threading.Semaphore(0), Session.press_run

    def counted_press(session):
        real_press(session)
        presses.release()

    def whole_class_pressed() -> None:  # a class presses within seconds; a measurement takes longer than that
        for _ in range(class_size):
            assert presses.acquire(timeout=30), "the class's presses did not all arrive"

    monkeypatch.setattr(Session, "press_run", counted_press)

    def counted_pass(engine, prompt, configs, *args, **kwargs):
        runs["compare"] += 1
        whole_class_pressed()
        yield from real_pass(engine, prompt, configs, *args, **kwargs)

    monkeypatch.setattr(runner, "lane_events", counted_pass)
    monkeypatch.setattr(handlers.compare.run, "run_lanes", runner.run_lanes)  # the real lanes, not slow_lanes
    settings = handlers.live_settings
    monkeypatch.setattr(handlers, "live_settings", lambda point: replace(settings(point), max_new_tokens=4))
    for recording, name in LIVE_MEASURES.items():  # the Why measurements: their recordings, after a pause
        def measure(engine, *args, stop=None, recording=recording,
                    recorded=lesson.measurement(lesson.recorded()[recording]["data"], "cpu (test)")):
            runs[recording] += 1
            whole_class_pressed()  # the class's other presses wait behind it in the queue
            return recorded
        measure.__name__ = name  # what the Why tab shares a measurement by
        monkeypatch.setattr(lesson, name, measure)

    from app.main import live_lanes

    estimate = live_lanes(handlers)  # a point's live comparison is estimated from the settings it runs
    first, check = (demo.fns[app.elem_events(f"lesson-live-{n}")[-1]] for n in (1, 2))
    runs_as = handlers.live_settings(lesson.POINTS[0])
    assert estimate(first, []) == ([(4, runs_as.requests_at_once)] * len(runs_as.methods), lesson.LIVE_TIMING_RUNS)
    assert estimate(check, []) is None  # a Why measurement: its mean duration so far
    pressed, replays, drawn = {}, handlers.compare.run.sessions.replays, Counter()
    real_get = replays.get

    def counted_get(key, source, draw):  # each drawing counted by what it draws: other tests' jobs may still draw
        return real_get(key, source, lambda: drawn.update([key]) or draw())

    monkeypatch.setattr(replays, "get", counted_get)
    for point in lesson.POINTS:
        kind = "compare" if point.tab == "compare" else point.recording
        if point.recording in pressed:  # points 6 and 7 run point 1's comparison: the same settings, the same share
            assert handlers.live_settings(point) == handlers.live_settings(pressed[point.recording])
            continue
        pressed[point.recording] = point
        events, before, drawings = app.elem_events(f"lesson-live-{point.number}"), runs[kind], Counter(drawn)
        results = at_once([lambda i=i: chain(app, events, f"class-{point.number}-{i}") for i in range(class_size)])
        assert all(r["ok"] for r in results), [r["error"] for r in results]
        if kind == "compare":
            assert all("done" in str(r["outputs"][0]) for r in results), point.number
            assert all(r["outputs"][1:] == results[-1]["outputs"][1:] for r in results)  # the same lanes and charts
        new = drawn - drawings
        assert new and max(new.values()) == 1, (point.number, new)  # the class drew its measurement once, not each
        assert runs[kind] - before == 1, (point.number, runs)  # one measurement for the whole class
    assert set(runs) == {"compare", *LIVE_MEASURES} and runs["compare"] == 2, runs
