"""Under load, one speedup: with more than one request at once the Compare tab leads each lane with the batch's
throughput over the baseline's batch at the same load (the Lesson's point 10 measure), repeats its timing runs within
the budget as a single request's comparison does, and says how many ran. The rendered page (status line and every
lane's chips, as RunController yields them) never contradicts itself, at 1, 2 and 8 requests at once: a bracket only
over three runs or more and never one that repeats its headline, a "one run" / "2 runs" tag otherwise, and a status
whose count of runs is the count the chips show."""

from __future__ import annotations

import html
import re
import threading
from dataclasses import replace
from statistics import median

import pytest

from app.run import runner
from app.comparison import Comparison, LaneResult, read_comparison
from app.draw.render import chips_html
from app.run.sessions import SessionStore
from app.settings import default_settings
from app.tabs.compare import CompareHandlers, clock_note
from engine.contract.methods import BASELINE, method_label
from engine.contract.types import GenerationConfig

from lesson_data import SETTINGS, baseline, lane

METHODS = ("baseline", "dflash", "dspark")
SPEEDUP = re.compile(r'<span class="chip(?: provisional)?" title="([^"]*)">(speedup|wall) <b>([^<]*)</b>'
                     r'(?: <span class="tag">([^<]*)</span>)?')
BRACKET = re.compile(r"(\d+\.\d\d)× \((\d+\.\d\d)–(\d+\.\d\d)\)")
BATCH = re.compile(r'batch tokens/s <b>(\d+)</b>')


def page(engine, requests: int, timing_runs: int, session: str, prompt: str = "def add(a, b):\n",
         methods=METHODS) -> tuple[str, dict[str, str], Comparison]:
    """One comparison run through the Compare tab's controller: its last status line (text), each lane's HTML, and
    the comparison the page drew."""
    handlers = CompareHandlers.over(engine, SessionStore())
    settings = replace(default_settings(list(engine.methods())), prompt=prompt, methods=methods, max_new_tokens=6,
                       requests_at_once=requests)
    outputs = list(handlers.run.run_comparison(settings, True, session, timing_runs=timing_runs))
    status, *boxes = outputs[-1][:1 + len(handlers.methods)]
    lanes = {m: box["value"] if isinstance(box, dict) else box for m, box in zip(handlers.methods, boxes)}
    text = html.unescape(re.sub(r"<[^>]+>", "", status))
    return text, {m: lanes[m] for m in methods}, handlers.run.sessions.get(session).last


PAGES: dict[tuple, tuple[str, dict[str, str], Comparison]] = {}


def shared_page(engine, requests: int, timing_runs: int) -> tuple[str, dict[str, str], Comparison]:
    """`page` of the default prompt at this load and count of timing runs, run once for the file: the tests that
    ask for the same one (the agreement check and the headline check) only read it."""
    key = (id(engine), requests, timing_runs)
    if key not in PAGES:
        PAGES[key] = page(engine, requests, timing_runs, f"shared-{requests}-{timing_runs}")
    return PAGES[key]


def status_runs(status: str) -> dict[str, int] | int | None:
    """How many timing runs the status says stand behind the speedups: one number for every lane, a number per lane
    name, or None when it says none."""
    if "Each lane ran once" in status:
        return 1
    if found := re.search(r"Each lane ran (\d+) times", status):
        return int(found.group(1))
    if found := re.search(r"Timing runs behind each speedup: ([^(]*)\(", status):
        return {name.strip(): 1 if runs == "one run" else int(runs.split()[0])
                for name, runs in re.findall(r"([^,]+?) (one run|\d+ runs)", found.group(1))}
    return None


def contradictions(status: str, lanes: dict[str, str]) -> list[str]:
    """Everything on the page that says more or less than was measured, in words (empty when none)."""
    found, said = [], status_runs(status)
    if said is None:
        found.append(f"the status says no count of runs: {status!r}")
    for method, box in lanes.items():
        chips = SPEEDUP.findall(box)
        if method == BASELINE:
            continue
        name = method_label(method)
        runs = said.get(name) if isinstance(said, dict) else said
        if len([c for c in chips if c[1] == "speedup"]) != 1:
            found.append(f"{name}: {len(chips)} speedup chips")
        for hover, label, value, tag in chips:
            bracket = BRACKET.fullmatch(value)
            if bracket and bracket.group(2) == bracket.group(3):
                found.append(f"{name} {label}: a bracket that repeats its headline, {value}")
            if bracket and (runs is None or runs < 3):
                found.append(f"{name} {label}: a bracket {value} beside a status of {runs} run(s)")
            if not bracket and tag not in ("", "provisional") and tag != ("one run" if runs == 1 else f"{runs} runs"):
                found.append(f"{name} {label}: tagged {tag!r}, the status says {runs} run(s)")
            if not bracket and not tag and runs is not None and runs < 3:
                found.append(f"{name} {label}: {value} says no count of runs beside a status of {runs}")
    return found


@pytest.fixture(autouse=True)
def roomy_budget(monkeypatch):
    """Every repeat asked for fits (a busy test machine must not change how many runs a test sees), and no pause."""
    monkeypatch.setattr(runner, "REPEAT_WITHIN_S", 1e6)
    monkeypatch.setattr(runner, "SETTLE_S", 0.0)


@pytest.mark.parametrize("requests", [1, 2, 8])
@pytest.mark.parametrize("timing_runs", [1, 2, 3])
def test_the_status_and_the_chips_agree_on_the_runs_at_every_load(random_engine, requests, timing_runs):
    status, lanes, comparison = shared_page(random_engine, requests, timing_runs)
    assert contradictions(status, lanes) == []
    assert status_runs(status) == timing_runs  # every lane was timed as often as asked: the repeats were not lost
    if timing_runs < 3:
        assert not any(BRACKET.search(box) for box in lanes.values())
    for method in METHODS[1:]:
        tag = re.search(r'speedup <b>[^<]*</b>(?: <span class="tag">([^<]*)</span>)?', lanes[method]).group(1)
        assert tag == {1: "one run", 2: "2 runs"}.get(timing_runs, tag)
    if requests > 1:  # one speedup a lane, the batch's, never the request's own beside it
        assert comparison.clock == "batch" and "Speedups under load" in status and f"{requests} requests" in status
        assert all(">wall <b>" not in box for box in lanes.values())


@pytest.mark.parametrize("requests", [2, 8])
def test_under_load_the_headline_is_the_batchs_throughput_over_the_baselines_at_the_same_load(random_engine,
                                                                                               requests):
    status, lanes, comparison = shared_page(random_engine, requests, 1)
    base = comparison.lanes[BASELINE].summary.batch_tokens_per_s
    for method in METHODS[1:]:
        mine = comparison.lanes[method].summary
        shown = float(re.search(r"speedup <b>(\d+\.\d\d)×", lanes[method]).group(1))
        assert shown == pytest.approx(mine.batch_tokens_per_s / base, abs=0.006)
        labels = re.findall(r'<span class="chip[^"]*" title="[^"]*">([^<]*?) <b>', lanes[method])
        assert labels.index("speedup") == labels.index("batch tokens/s") + 1  # beside the figure it divides
        # one request's own tokens/s is another measure: said as such in the hover, never as a second chip
        latency = comparison.speedup(method, "wall")
        assert f"gives {latency:.2f}×" in html.unescape(SPEEDUP.search(lanes[method]).group(1))
        assert "a different measure" in html.unescape(SPEEDUP.search(lanes[method]).group(1)).lower()
    _, boxes, with_rounds = shared_page(random_engine, requests, 3)
    for method in METHODS[1:]:  # over three runs: the median of each round's batch over the baseline's same round
        rounds = [mine[2] / theirs[2] for mine, theirs in zip(with_rounds.lanes[method].run_rates,
                                                               with_rounds.lanes[BASELINE].run_rates)]
        assert len(rounds) == 3 and with_rounds.speedup(method) == pytest.approx(median(rounds))
    for method in METHODS:  # and the batch tokens/s beside it is the median of the same runs' batch rates
        rates = [r[2] for r in with_rounds.lanes[method].run_rates]
        assert BATCH.search(boxes[method]).group(1) == f"{median(rates):.0f}"


def test_a_repeat_that_drafts_otherwise_but_writes_the_same_tokens_is_a_timing_run(random_engine, monkeypatch):
    """DSpark's throughput scheduler among other requests decides from timings it measures as it runs: a repeat may
    draft otherwise and write the same tokens. It is a timing run (its throughput counts), so the page never says
    one lane "ran once" while the others show brackets."""
    real_stream, calls, drafts = random_engine.stream, {}, []

    def drafting_otherwise(request):
        config = request.config
        calls[config.method] = calls.get(config.method, 0) + 1
        for step in real_stream(request):
            if config.method == "dspark" and calls["dspark"] > 1 and step.drafted:
                step = replace(step, drafted=tuple(replace(t, draft_prob=t.draft_prob / 2) for t in step.drafted))
            if config.method == "dspark" and calls["dspark"] == 1:
                drafts.append(step.drafted)
            yield step

    monkeypatch.setattr(random_engine, "stream", drafting_otherwise)
    status, lanes, comparison = page(random_engine, 2, 3, "otherwise", prompt="def scale(x):\n")
    assert calls["dspark"] == 3 and comparison.lanes["dspark"].timing_runs == 3
    assert contradictions(status, lanes) == [] and status_runs(status) == 3
    # its kept steps are its live pass's own (a step's fastest timing is only taken over runs that drafted alike)
    assert [s.drafted for s in comparison.lanes["dspark"].steps] == drafts


def test_a_lane_with_fewer_runs_is_named_with_its_count_never_each_lane_ran_once(random_engine, monkeypatch):
    real_stream, calls = random_engine.stream, {}

    def other_tokens_on_repeat(request):
        config = request.config
        calls[config.method] = calls.get(config.method, 0) + 1
        if config.method == "dspark" and calls["dspark"] > 1:  # other tokens: not a run of the same work
            request = random_engine.requests("class Stack:", [config])[0]
        yield from real_stream(request)

    monkeypatch.setattr(random_engine, "stream", other_tokens_on_repeat)
    status, lanes, comparison = page(random_engine, 2, 3, "fewer", prompt="def fewer(x):\n")
    assert calls == {"baseline": 3, "dflash": 3, "dspark": 2}  # not repeated again after a run of other work
    assert "ran once" not in status and status_runs(status) == {"DFlash": 3, "DSpark": 1}
    assert contradictions(status, lanes) == []
    assert BRACKET.search(lanes["dflash"]) or "3 runs" in lanes["dflash"]
    assert '<span class="tag">one run</span>' in lanes["dspark"] and not BRACKET.search(lanes["dspark"])


def test_under_load_the_repeats_fit_the_same_budget_and_the_status_says_why_there_was_one(random_engine,
                                                                                           monkeypatch):
    """The budget a single request's comparison has: at 8 requests a pass costs more, so fewer repeats fit."""
    seen = {}

    def fits(run_s, timing_runs, within_s=None):
        seen["run_s"] = run_s
        return 1

    monkeypatch.setattr(runner, "runs_that_fit", fits)
    monkeypatch.setattr(runner, "REPEAT_WITHIN_S", 1e-3)
    status, lanes, comparison = page(random_engine, 8, 3, "budget", prompt="def budget(x):\n")
    assert seen["run_s"] == pytest.approx(runner.engine_seconds(
        [runner.LaneRun(m, GenerationConfig(method=m), list(comparison.lanes[m].steps)) for m in METHODS]))
    assert "Each lane ran once: one pass of the lanes took" in status and "fit in 0 s" in status
    assert contradictions(status, lanes) == []


def _timed(requests: int, ar_rates, base_rates) -> Comparison:
    base = LaneResult.ended("baseline", baseline(), timing_runs=len(base_rates), run_rates=base_rates)
    ar = LaneResult.ended("eagle3", lane([(4, 3)] * 10, 2.0, 10.0), timing_runs=len(ar_rates), run_rates=ar_rates)
    return Comparison({**SETTINGS, "methods": ["baseline", "eagle3"], "requests_at_once": requests},
                      {"baseline": base, "eagle3": ar})


def test_a_bracket_never_repeats_its_headline_nor_spans_two_runs():
    steady = _timed(1, [(21.51, 20.0), (21.52, 20.0), (21.53, 20.0)], [(10.0, 10.0)] * 3)
    chips = chips_html(steady, "eagle3", [])
    assert "2.15×" in chips and not BRACKET.search(chips) and '<span class="tag">3 runs</span>' in chips
    two = _timed(1, [(21.0, 20.0), (25.0, 24.0)], [(10.0, 10.0)] * 2)
    chips = chips_html(two, "eagle3", [])
    assert "2.30×" in chips and not BRACKET.search(chips) and '<span class="tag">2 runs</span>' in chips
    assert "ran 2 times" in clock_note(two) and "ran once" not in clock_note(two)
    three = _timed(1, [(21.0, 20.0), (25.0, 24.0), (23.0, 22.0)], [(10.0, 10.0)] * 3)
    assert BRACKET.search(chips_html(three, "eagle3", [])).groups() == ("2.30", "2.10", "2.50")


def test_a_saved_run_under_load_keeps_its_batch_rates_and_an_older_file_reads_as_before():
    timed = _timed(8, [(5.0, 4.0, 30.0), (5.0, 4.0, 33.0), (5.0, 4.0, 36.0)],
                   [(5.0, 5.0, 20.0), (5.0, 5.0, 20.0), (5.0, 5.0, 20.0)])
    # the lanes' own steps carry no batch's tokens here: the headline reads the runs' batch rates all the same
    assert timed.round_speedups("eagle3", "batch") == pytest.approx([1.5, 1.65, 1.8])
    back = read_comparison(timed.to_json())
    assert back.lanes["eagle3"].run_rates == timed.lanes["eagle3"].run_rates
    assert back.round_speedups("eagle3", "batch") == pytest.approx([1.5, 1.65, 1.8])
    older = _timed(8, [(5.0, 4.0)] * 3, [(5.0, 5.0)] * 3)  # saved before the batch's rates were kept
    assert read_comparison(older.to_json()).round_speedups("eagle3", "wall") == pytest.approx([0.8] * 3)
    assert older.clock == "wall" and "Speedups: wall time" in clock_note(older)


def test_the_runner_keeps_each_runs_batch_throughput(random_engine):
    lanes = [runner.LaneRun(m, GenerationConfig(method=m, max_new_tokens=6, requests_at_once=2)) for m in METHODS[:2]]
    for _ in runner.run_lanes(random_engine, "def keep(x):\n", lanes, threading.Event(), timing_runs=2):
        pass
    for run in lanes:
        assert len(run.rates) == 2 and all(len(r) == 3 and r[2] > r[1] > 0 for r in run.rates)
    alone = [runner.LaneRun("baseline", GenerationConfig(method="baseline", max_new_tokens=6))]
    for _ in runner.run_lanes(random_engine, "def keep(x):\n", alone, threading.Event(), timing_runs=1):
        pass
    assert len(alone[0].rates[0]) == 2  # one request: the two rates a file has always held
