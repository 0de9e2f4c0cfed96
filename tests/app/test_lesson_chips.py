"""Every speedup chip's headline lies inside its own bracket: the headline is the median of the same timing runs the
bracket spans, on live comparisons (the tiny random models, timed like the Compare tab's), on comparisons whose runs
disagree widely (each run's figures drawn at random), and on every recorded comparison the lesson ships."""

from __future__ import annotations

import random
import re
import threading

import pytest

from app import lesson
from app.comparison import Comparison, LaneResult, read_comparison
from app.draw.render import chips_html
from app.run.runner import LaneRun, run_lanes
from engine.contract.types import GenerationConfig

from lesson_data import SETTINGS, baseline, lane

CHIP = re.compile(r'(speedup|wall) <b>(\d+\.\d\d)× \((\d+\.\d\d)–(\d+\.\d\d)\)</b>')
PROMPTS = ["def f(x):", "import os", "class A:", "x = 1", "for i in range(3):"]


def outside_bracket(comparison: Comparison) -> list[str]:
    """Every chip of the comparison whose headline lies outside its bracket, as "lane chip: 2.72× (2.82–2.93)"."""
    found = []
    for method, result in comparison.lanes.items():
        if result.summary is None:
            continue
        for name, head, low, high in CHIP.findall(chips_html(comparison, method, list(result.steps))):
            if not float(low) <= float(head) <= float(high):
                found.append(f"{method} {name}: {head}× ({low}–{high})")
    return found


def brackets(comparison: Comparison) -> int:
    return sum(len(CHIP.findall(chips_html(comparison, m, list(r.steps)))) for m, r in comparison.lanes.items()
               if r.summary is not None)


@pytest.fixture(scope="module")
def live_comparisons(random_engine):
    """Twenty comparisons timed as the Compare tab times them (three runs a lane, the lanes taking turns)."""
    made = []
    for i in range(20):
        methods = ("baseline", "dflash")
        lanes = [LaneRun(m, GenerationConfig(method=m, max_new_tokens=4, seed=i)) for m in methods]
        for _ in run_lanes(random_engine, PROMPTS[i % len(PROMPTS)], lanes, threading.Event(), timing_runs=3):
            pass
        made.append(Comparison({**SETTINGS, "methods": list(methods)},
                               {run.method: LaneResult.ended(run.method, run.steps, timing_runs=run.timing_runs,
                                                             run_rates=run.rates) for run in lanes}))
    return made


def test_no_live_headline_lies_outside_its_bracket(live_comparisons):
    assert sum(brackets(c) for c in live_comparisons) >= 20  # speedup and wall chips with their runs' spread
    assert [problem for c in live_comparisons for problem in outside_bracket(c)] == []


def test_a_headline_is_the_median_of_the_runs_the_bracket_spans_however_far_they_scatter():
    rng = random.Random(7)
    for _ in range(50):
        runs = rng.randint(2, 5)
        base_rates = [(rng.uniform(5, 20), rng.uniform(5, 20)) for _ in range(runs)]
        ar_rates = [(rng.uniform(5, 60), rng.uniform(5, 60)) for _ in range(runs)]
        base = LaneResult.ended("baseline", baseline(), timing_runs=runs, run_rates=base_rates)
        ar = LaneResult.ended("eagle3", lane([(4, 3)] * 10, 2.0, 10.0), timing_runs=runs, run_rates=ar_rates)
        timed = Comparison({**SETTINGS, "methods": ["baseline", "eagle3"]}, {"baseline": base, "eagle3": ar})
        ratios = sorted(a[0] / b[0] for a, b in zip(ar_rates, base_rates))
        assert timed.speedup("eagle3") == pytest.approx(ratios[runs // 2] if runs % 2 else
                                                        (ratios[runs // 2 - 1] + ratios[runs // 2]) / 2)
        assert outside_bracket(timed) == [] and outside_bracket(read_comparison(timed.to_json())) == []


def test_no_recorded_headline_lies_outside_its_bracket():
    recorded = [item for item in lesson.recorded().values() if isinstance(item, Comparison)]
    assert recorded
    assert [problem for c in recorded for problem in outside_bracket(c)] == []


def test_a_busy_servers_run_reads_by_wall_time_and_says_it_ran_once():
    base = LaneResult.ended("baseline", baseline())
    ar = LaneResult.ended("eagle3", lane([(4, 3)] * 10, 2.0, 10.0))
    quiet = Comparison({**SETTINGS, "methods": ["baseline", "eagle3"]}, {"baseline": base, "eagle3": ar})
    busy = Comparison({**quiet.settings, "requests_at_once": 8}, quiet.lanes)
    assert busy.clock == "wall" and busy.speedup("eagle3") == busy.speedup("eagle3", "wall")
    chips = chips_html(busy, "eagle3", list(ar.steps))
    assert "wall time" in chips and ">wall <b>" not in chips  # one speedup, the one a batch is read by
    assert '<span class="tag">one run</span>' in chips and not CHIP.search(chips)
    assert "one run" not in chips_html(busy, "baseline", list(base.steps))
    from app.tabs.compare import clock_note

    assert "wall time" in clock_note(busy) and "ran once" in clock_note(busy)
    # one request: the status says how many runs too, as its chips' tags do
    assert "ran once" in clock_note(quiet) and '<span class="tag">one run</span>' in chips_html(quiet, "eagle3", [])
