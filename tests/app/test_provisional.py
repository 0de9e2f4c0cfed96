"""Honest live numbers: a speedup shown while the lanes are still being timed says it is provisional, on itself and
dimmed; once the timing runs end each speedup carries its spread over them, "2.10× (1.90–2.30)"; a saved or
recorded comparison replays with its spread when its file has the runs' figures, and without one when not."""

from __future__ import annotations

import re
import threading

import pytest

from app.comparison import Comparison, LaneResult, read_comparison
from app.draw.render import chips_html
from app.run.runner import LaneRun, run_lanes

from lesson_data import SETTINGS, baseline, lane

SPREAD = re.compile(r"speedup <b>(\d+\.\d\d)× \((\d+\.\d\d)–(\d+\.\d\d)\)</b>")


def _timed(rates_ar, rates_base) -> Comparison:
    base = LaneResult.ended("baseline", baseline(), timing_runs=len(rates_base), run_rates=rates_base)
    ar = LaneResult.ended("eagle3", lane([(4, 3)] * 10, 2.0, 10.0), timing_runs=len(rates_ar), run_rates=rates_ar)
    return Comparison({**SETTINGS, "methods": ["baseline", "eagle3"]}, {"baseline": base, "eagle3": ar})


def test_a_speedups_spread_is_each_timing_rounds_own_speedup():
    timed = _timed([(30.0, 20.0), (33.0, 22.0), (27.0, 19.0)], [(10.0, 10.0), (10.0, 10.0), (10.0, 10.0)])
    assert timed.speedup_spread("eagle3") == pytest.approx((2.7, 3.3))  # compute time: the lane's rounds over the baseline's
    assert timed.speedup_spread("eagle3", "wall") == pytest.approx((1.9, 2.2))
    chips = chips_html(timed, "eagle3", [])
    low, high = SPREAD.search(chips).group(2, 3)
    assert (low, high) == ("2.70", "3.30") and "provisional" not in chips
    once = _timed([(30.0, 20.0)], [(10.0, 10.0)])
    assert once.speedup_spread("eagle3") is None and not SPREAD.search(chips_html(once, "eagle3", []))


def test_a_saved_comparison_replays_with_its_spread_and_an_old_file_without():
    timed = _timed([(30.0, 20.0), (33.0, 22.0), (31.0, 21.0)], [(10.0, 10.0), (11.0, 10.0), (10.0, 10.0)])
    back = read_comparison(timed.to_json())
    assert back.speedup_spread("eagle3") == pytest.approx(timed.speedup_spread("eagle3"))
    assert SPREAD.search(chips_html(back, "eagle3", []))
    from app import lesson

    greedy = lesson.recorded()["greedy"]  # recorded before the runs' figures were kept: no spread, no invention
    assert all(not lane.run_rates for lane in greedy.lanes.values())
    assert not SPREAD.search(chips_html(greedy, "eagle3", []))


def test_the_runner_keeps_each_timing_runs_own_figures(random_engine):
    from engine.contract.types import GenerationConfig

    lanes = [LaneRun(m, GenerationConfig(method=m, max_new_tokens=8)) for m in ("baseline", "eagle3")]
    for _ in run_lanes(random_engine, "def f(x):", lanes, threading.Event(), timing_runs=3):
        pass
    for run in lanes:
        assert len(run.rates) == run.timing_runs == 3 and all(wall > 0 for _, wall in run.rates)


def test_a_page_slow_to_draw_does_not_cost_the_lanes_their_repeats(random_engine, monkeypatch):
    """The repeats fit the engine's own time, not the live pass's clock: a busy server drawing slowly between batches
    of steps (here a 0.3 s pause at each) stretches the live pass past the budget, yet each lane is still timed thrice."""
    import time

    from app.run import runner
    from engine.contract.types import GenerationConfig

    lanes = [LaneRun(m, GenerationConfig(method=m, max_new_tokens=8)) for m in ("baseline", "eagle3")]
    monkeypatch.setattr(runner, "REPEAT_WITHIN_S", 1.0)
    started, live_s = time.monotonic(), None
    for _ in run_lanes(random_engine, "def f(x):", lanes, threading.Event(), timing_runs=3):
        if live_s is None and not all(lane.state == "done" for lane in lanes):
            time.sleep(0.3)
        elif live_s is None:
            live_s = time.monotonic() - started
    assert live_s > runner.REPEAT_WITHIN_S  # the clock alone would have allowed one run
    assert runner.engine_seconds(lanes) * 3 < runner.REPEAT_WITHIN_S
    assert [lane.timing_runs for lane in lanes] == [3, 3]
    # what the page's lag cost each lane's live pass is measured: its engine run a small share of it
    assert all(lane.engine_share is not None and lane.engine_share < 0.5 for lane in lanes)


def test_a_page_that_keeps_up_measures_most_of_each_live_pass_as_the_engines(random_engine):
    from engine.contract.types import GenerationConfig

    lanes = [LaneRun(m, GenerationConfig(method=m, max_new_tokens=24)) for m in ("baseline", "eagle3")]
    for _ in run_lanes(random_engine, "def f(x):", lanes, threading.Event(), timing_runs=1):
        pass
    assert all(lane.engine_share is not None and lane.engine_share > 0.5 for lane in lanes)


def test_speedups_say_provisional_until_the_timing_runs_end(random_engine):
    from compare_support import default_app

    demo = default_app(random_engine)  # built once per test process; this test's visitor is its own
    run = next(d for d in demo.fns.values() if d.name == "on_run")
    handlers = run.fn.__self__
    from app.settings import default_settings
    from dataclasses import replace

    settings = replace(default_settings(handlers.views.methods), methods=("baseline", "eagle3", "dflash"), max_new_tokens=8)
    outputs = list(handlers.run_comparison(settings, True, "provisional-visitor"))
    lanes_of = lambda out: " ".join(str(x) for x in out[1:1 + len(handlers.views.methods)])  # noqa: E731
    during = [lanes_of(out) for out in outputs[:-1] if "speedup <b>" in lanes_of(out)]
    assert during and all('class="chip provisional"' in html and ">provisional</span>" in html for html in during)
    final = lanes_of(outputs[-1])
    assert "provisional" not in final
    assert len(SPREAD.findall(final)) == 2  # AR's and DFlash's, each with its spread over three timing runs
    last = handlers.sessions.get("provisional-visitor").last
    assert all(len(l.run_rates) == 3 for l in last.lanes.values())
