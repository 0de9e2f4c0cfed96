"""No stale state: a lesson note, a pinned panel and an outlined chart clear when the lecturer runs, changes a
setting or opens another tab; "Run it live" first sets every setting of its recording in the controls; Copy link
says it copied and puts the link in the address bar. The handlers here; in chromium, on the page a lesson link
opens, in tests/app/test_lesson.py (one page load for both files' checks)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.settings import PARSERS  # noqa: E402


@pytest.fixture(scope="module")
def built(random_engine):
    """The app with its defaults, built once per test process (compare_support.default_app): each test calls its
    handlers as a visitor of its own."""
    from compare_support import default_app

    demo = default_app(random_engine)
    load = next(d for d in demo.fns.values() if d.name == "on_load")
    return demo, load.fn.__self__, load.outputs


def test_run_it_live_first_sets_every_setting_of_its_recording(built):
    _, handlers, components = built
    ids = [getattr(c, "elem_id", None) for c in components]
    for number in (1, 3):
        point = lesson.POINTS[number - 1]
        recording = lesson.recorded()[point.recording]
        outputs = handlers.prepare_live(number, SimpleNamespace(session_hash="live-settings"))
        values = dict(zip(PARSERS, outputs[2:2 + len(PARSERS)]))
        for name in PARSERS:
            expected = recording.settings[name]
            if name == "methods":  # the recording's lanes this server has
                expected = [m for m in expected if m in handlers.compare.methods]
            expected = str(expected) if name == "seed" else expected
            assert values[name] == expected, (number, name)
        assert outputs[ids.index("compare-focus")]["visible"]


def test_a_run_a_setting_or_a_tab_clears_the_lesson_notes(built):
    demo, handlers, _ = built
    clears = [d for d in demo.fns.values() if d.name == "clear_notes"]
    assert clears and all(d.js and "speclabClearPins" in d.js and "speclabClearFocus" in d.js for d in clears)
    triggers = {(getattr(demo.blocks[block], "elem_id", None) or type(demo.blocks[block]).__name__, event)
                for d in clears for block, event in d.targets}
    assert ("run", "click") in triggers and ("Tabs", "select") in triggers
    assert {("temperature", "input"), ("prompt", "input"), ("lanes", "input")} <= triggers
    assert all(event != "change" for _, event in triggers)  # a point setting the controls keeps its own note
    assert all(update == {"__type__": "update", "value": "", "visible": False} for update in handlers.clear_notes())


def test_run_it_live_of_the_k_sweep_measures_the_held_out_prompts_and_says_live(built, monkeypatch):
    _, handlers, _ = built
    asked = []

    def measure(engine, prompts, *args, **kwargs):
        asked.append(prompts)
        return lesson.measurement(lesson.recorded()["sweeps"]["data"], "cpu (test)")

    monkeypatch.setattr(lesson, "measure_sweeps_live", measure)
    sweep_point = next(p.number for p in lesson.POINTS if p.recording == "sweeps")
    (plot, words, machine), = list(handlers.run_live(sweep_point, SimpleNamespace(session_hash="live-sweep")))
    assert asked == [lesson.live_sweep_prompts()] and words.startswith("Measured live ")
    assert handlers.sessions.get("live-sweep").panels["sweeps"]["live"]  # kept: projector mode redraws it
