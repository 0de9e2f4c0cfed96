"""Steady speedups on a shared machine: spans carry the decoding thread's CPU time, every lane is run again
(the lanes taking turns) and keeps its fastest run, and the page's speedups divide the compute time."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace

import pytest

from app.comparison import Comparison, LaneResult, read_comparison
from app.run.runner import LaneRun, run_lanes
from engine.contract.summary import fastest_steps, step_cost_s, summarize
from engine.contract.types import GenerationConfig

PROMPT = "def add(a, b):"


def _lanes(methods=("baseline", "eagle3", "dflash")) -> list[LaneRun]:
    return [LaneRun(m, GenerationConfig(method=m, max_new_tokens=12)) for m in methods]


def test_spans_on_the_cpu_carry_the_threads_compute_time(random_engine):
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=12))
    spans = [span for step in (result.prefill, *result.steps) for span in step.spans]
    assert spans and all(span.cpu_s is not None and span.cpu_s >= 0 for span in spans)
    # CPU time of one thread never runs ahead of the wall clock by more than the clocks' resolution
    assert all(span.cpu_s <= (span.end_s - span.start_s) + 2e-3 for span in spans)
    s = result.summary
    assert s.cpu_s == pytest.approx(sum(span.cpu_s for span in spans))
    assert s.tokens_per_cpu_s == pytest.approx(s.num_new_tokens / s.cpu_s)


def test_every_lane_is_run_again_in_turns_and_keeps_its_fastest_run(random_engine, monkeypatch):
    traces, order = {}, []
    real_stream = random_engine.stream

    def recording_stream(request):
        config = request.config
        order.append(config.method)
        steps = []
        for step in real_stream(request):
            steps.append(step)
            yield step
        traces.setdefault(config.method, []).append(steps)

    monkeypatch.setattr(random_engine, "stream", recording_stream)
    lanes = _lanes()
    for _ in run_lanes(random_engine, PROMPT, lanes, threading.Event(), timing_runs=3):
        pass
    assert order == ["baseline", "eagle3", "dflash"] * 3  # the live pass, then two rounds, the lanes taking turns
    for lane in lanes:
        runs = traces[lane.method]
        assert lane.state == "done" and lane.timing_runs == 3 and len(runs) == 3
        assert all([s.committed for s in run] == [s.committed for s in runs[0]] for run in runs)
        assert lane.steps == fastest_steps(runs)


def test_each_step_keeps_its_fastest_timing_laid_end_to_end(random_engine):
    runs = [list(random_engine.stream(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=12))) for _ in range(3)]
    # one step of each run made slow on both clocks (the third's second, the second's third, the first's fourth):
    # none of them may be chosen, so no whole run is as fast as the steps kept
    def slowed(run, index):
        """Step `index` one second longer on both clocks (its last span), every later step one second later."""
        def moved(span, i, last):
            if i == index and last:
                return replace(span, end_s=span.end_s + 1.0, cpu_s=span.cpu_s + 1.0)
            return replace(span, start_s=span.start_s + 1.0, end_s=span.end_s + 1.0) if i > index else span
        return [replace(step, spans=tuple(moved(span, i, j == len(step.spans) - 1) for j, span in enumerate(step.spans)))
                for i, step in enumerate(run)]
    runs[2], runs[1], runs[0] = slowed(runs[2], 1), slowed(runs[1], 2), slowed(runs[0], 3)
    best = fastest_steps(runs)
    assert [s.committed for s in best] == [s.committed for s in runs[0]]
    ends = 0.0
    for i, step in enumerate(best):
        cpu = sum(span.cpu_s for span in step.spans)
        assert cpu == pytest.approx(min(sum(span.cpu_s for span in run[i].spans) for run in runs))
        assert step.spans[0].start_s >= ends - 1e-9  # the steps follow one another
        assert all(a.end_s <= b.start_s + 1e-9 for a, b in zip(step.spans, step.spans[1:]))
        ends = step.spans[-1].end_s
    assert summarize(best).cpu_s < min(summarize(run).cpu_s for run in runs)  # no whole run was this fast
    # without CPU times (a GPU's trace) the wall time from one step's end to the next decides
    walled = [[replace(step, spans=tuple(replace(span, cpu_s=None) for span in step.spans)) for step in run]
              for run in runs]
    assert step_cost_s(walled[1][2], walled[1][1].spans[-1].end_s) > 1.0
    assert summarize(fastest_steps(walled)).wall_s < min(summarize(run).wall_s for run in walled)


def test_a_repeat_that_wrote_other_tokens_is_not_counted(random_engine, monkeypatch):
    real_stream, calls = random_engine.stream, []

    def other_tokens_on_repeat(request):
        calls.append(request.config.method)
        if len(calls) > 1:  # the repeat runs another prompt: other tokens, which must not stand in for the lane's
            request = random_engine.requests("class Stack:", [request.config])[0]
        yield from real_stream(request)

    monkeypatch.setattr(random_engine, "stream", other_tokens_on_repeat)
    lane = LaneRun("eagle3", GenerationConfig(method="eagle3", max_new_tokens=12))
    first = None
    for _ in run_lanes(random_engine, PROMPT, [lane], threading.Event(), timing_runs=3):
        if lane.state == "done" and first is None:
            first = list(lane.steps)
    # not repeated again either: a later run could no longer be paired, round by round, with the baseline's
    assert len(calls) == 2 and lane.timing_runs == 1 and lane.steps == first and len(lane.rates) == 1


def test_stop_during_the_timing_runs_keeps_the_live_pass(random_engine):
    lanes, stop = _lanes(("baseline", "eagle3")), threading.Event()
    for _ in run_lanes(random_engine, PROMPT, lanes, stop, timing_runs=3):
        if all(lane.state == "done" for lane in lanes):
            stop.set()
    assert all(lane.state == "done" and lane.timing_runs == 1 and lane.steps for lane in lanes)


def test_speedups_divide_the_compute_time_with_the_wall_time_beside(random_engine):
    steps = {m: list(random_engine.stream(PROMPT, GenerationConfig(method=m, max_new_tokens=12)))
             for m in ("baseline", "dflash")}
    comparison = Comparison.of_steps({"temperature": 0.0}, steps)
    base, lane = summarize(steps["baseline"]), summarize(steps["dflash"])
    assert comparison.clock == "compute"
    assert comparison.speedup("dflash") == pytest.approx(lane.tokens_per_cpu_s / base.tokens_per_cpu_s)
    assert comparison.speedup("dflash", "wall") == pytest.approx(lane.tokens_per_s / base.tokens_per_s)
    # a trace without CPU times (a GPU's, or a file saved before they were kept) divides the wall time
    no_cpu = {m: [replace(step, spans=tuple(replace(span, cpu_s=None) for span in step.spans)) for step in trace]
              for m, trace in steps.items()}
    walled = Comparison.of_steps({"temperature": 0.0}, no_cpu)
    assert walled.clock == "wall" and walled.speedup("dflash") == pytest.approx(lane.tokens_per_s / base.tokens_per_s)
    # the lane shows both, the wall-time speedup right after the compute-time one, each named on hover
    from app.draw.render import chips_html

    labels = re.findall(r'<span class="chip" title="([^"]*)">([^<]*) <b>', chips_html(comparison, "dflash",
                                                                                     steps["dflash"]))
    names = [name for _, name in labels]
    assert names[names.index("speedup") + 1] == "wall"
    assert "compute time" in labels[names.index("speedup")][0] and "wall" in labels[names.index("wall")][0]


def test_a_saved_comparison_keeps_its_compute_times_and_timing_runs(random_engine):
    from app.settings import default_settings
    from app.comparison import settings_dict

    methods = ("baseline", "eagle3")
    settings = settings_dict(replace(default_settings(), prompt=PROMPT, max_new_tokens=12, methods=methods))
    lanes = {m: LaneResult.ended(m, random_engine.stream(PROMPT, GenerationConfig(method=m, max_new_tokens=12)),
                                 timing_runs=3) for m in methods}
    timed = Comparison(settings, lanes, "cpu", "random")
    again = read_comparison(timed.to_json())
    assert again.timing_runs == 3 and again.clock == timed.clock
    for m in timed.lanes:
        assert again.speedup(m) == pytest.approx(timed.speedup(m))
    doc = json.loads(timed.to_json())
    doc["timing_runs"] = {m: "many" for m in doc["lanes"]}  # nonsense reads as one run, never a crash
    assert read_comparison(json.dumps(doc)).timing_runs == 1
    first = doc["lanes"][next(iter(doc["lanes"]))][0]
    first["spans"][0]["cpu_s"] = -1.0
    with pytest.raises(Exception, match="cpu_s"):
        read_comparison(json.dumps(doc))
    assert isinstance(LaneResult.ended("baseline", []).timing_runs, int)

