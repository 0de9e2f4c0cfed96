"""Projector toggles, bounded: a comparison's charts are drawn once per mode and reused, and a session or an address
toggling in a loop is limited (the mode still changes; the server draws nothing more)."""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.comparison import read_comparison  # noqa: E402
from app.hosting import toggles  # noqa: E402
from app.hosting.toggles import ByMode  # noqa: E402


@pytest.fixture(scope="module")
def built(random_engine):
    from app.main import build_app

    demo = build_app(random_engine)
    for limit in (demo.speclab_toggles.sessions_limit, demo.speclab_toggles.addresses_limit):
        limit.clock = lambda: 0.0  # no refill while the test toggles: the counts are the bursts'
    return demo


def visitor(session: str, address: str = "203.0.113.5"):
    return SimpleNamespace(session_hash=session, client=SimpleNamespace(host=address))


def skipped(outputs) -> bool:
    return all(isinstance(o, dict) and o.get("__type__") == "update" and len(o) == 1 for o in outputs)


def test_a_comparisons_charts_are_drawn_once_per_mode_however_often_and_by_whom_toggled(built):
    handler, drawings = built.speclab_toggles, built.speclab_drawings
    recorded = lesson.recorded()["greedy"]
    before = drawings.drawn
    for i in range(4):  # 4 sessions of one recorded link, on two addresses, each toggling on and off
        session = f"class-{i}"
        handler.sessions.get(session).last = handler.sessions.get(session).shown = recorded
        for on in (True, False):
            outputs = handler.on_toggle(on, 1, None, visitor(session, f"198.51.100.{i % 2}"))
            assert not skipped(outputs) and handler.sessions.get(session).projector is on
    assert drawings.drawn - before == 4  # the Compare tab's charts and the step's, once in each mode


def test_a_session_toggling_in_a_loop_is_limited_and_its_mode_still_follows(built):
    handler = built.speclab_toggles
    handler.sessions.get("looping").last = lesson.recorded()["sampled"]
    answers = [handler.on_toggle(i % 2 == 0, 1, None, visitor("looping", "192.0.2.1")) for i in range(20)]
    assert [skipped(a) for a in answers] == [False] * toggles.SESSION_BURST + [True] * (20 - toggles.SESSION_BURST)
    assert handler.sessions.get("looping").projector is False  # the 20th toggle's mode
    assert len(answers[-1]) == len(answers[0])


def test_an_address_toggling_from_many_sessions_is_limited(built):
    handler = built.speclab_toggles
    handler.addresses_limit.burst = 5  # ADDRESS_BURST, made small for the test (a fresh address's bucket starts full)
    answers = [handler.on_toggle(True, 1, None, visitor(f"flood-{i}", "192.0.2.99")) for i in range(12)]
    assert sum(not skipped(a) for a in answers) == 5 and all(skipped(a) for a in answers[5:])
    assert not skipped(handler.on_toggle(True, 1, None, visitor("elsewhere", "192.0.2.100")))


def test_a_kept_drawing_does_not_keep_its_comparison_alive():
    drawings = ByMode()
    comparison = read_comparison((Path(__file__).resolve().parents[2] / "assets" / "lessons" / "greedy.json")
                                 .read_bytes())
    calls = []
    assert drawings.get((comparison,), True, (), lambda: calls.append(1) or ("drawn",)) == ("drawn",)
    assert drawings.get((comparison,), True, (), lambda: calls.append(1) or ("again",)) == ("drawn",)
    assert drawings.get((comparison,), False, (), lambda: calls.append(1) or ("plain",)) == ("plain",)
    assert len(calls) == 2
    del comparison
    gc.collect()
    assert all(ref() is None for refs, _ in drawings._items.values() for ref in refs)


def test_a_toggle_past_its_limit_is_refused_in_one_line_before_gradio_reads_it(built):
    import json

    from app.hosting.fairness import QueueDoor
    from test_fairness import one_line, serve_body
    from test_visitors import Inner, request

    handler = built.speclab_toggles
    index = next(i for i, fn in built.fns.items() if getattr(fn.fn, "__self__", None) is handler)
    inner = Inner(b'{"data": []}')

    def send(session: str) -> tuple[int, bytes]:
        body = json.dumps({"data": [True, 0, None], "fn_index": index, "session_hash": session}).encode()
        return serve_body(QueueDoor(inner, built.speclab_door), request("/gradio_api/run/predict", method="POST",
                                                                        client="192.0.2.50"), body)

    for _ in range(toggles.SESSION_BURST):
        handler.sessions_limit.take("at-the-door")  # the session's toggles, spent
    status, body = send("at-the-door")
    assert status == 429 and "switched too often" in one_line(body) and inner.calls == 0
    assert send("another-session")[0] == 200 and inner.calls == 1
