"""Runs the lanes of one comparison, one after another, each in a worker thread.

Lanes run in turn, never at once, so one lane's work never slows another's measured spans. The engine
runs in a worker thread and hands each finished step over a queue; the UI thread renders at its own
pace, so drawing the page does not sit on the engine's clock. Stopping sets an event checked after every
batch of steps, which closes the worker.

One state machine: `run_events` runs the lanes and says what happened as plain values (app/run/events.py: the
live pass, the timing repeats, a shared result, the end with what ran), and `LaneRun.apply` is the only code that
changes a lane. The page's runner below and the ZeroGPU path (app/hosting/gpu.py, where the events cross a process
boundary) both consume the same events. Who goes first between two lanes is a turn policy (`Turns`) handed in.
Each lane runs the engine's checked request for it (engine/contract/types.py Request, made by the plan): no run
checks its prompt or config again, and the run's end reports the drafts per step the request says it ran.

Timing runs: after the pass shown live, every lane runs again (`timing_runs` in all), the lanes taking
turns (baseline, AR, DFlash, …, then again), and each lane keeps each step's fastest timing. The runs write the
same tokens (the same settings and seed); only their times differ, and a moment in which something else held
the core slows one step of one run, not the lane's figure: speedups then hold still from one comparison to the
next on a shared machine (docs/benchmarks.md measures how much). Each run's own rates are kept too (`run_rates`):
the page's speedup is the median of the rounds' own speedups. A lane whose drafts follow timings measured as it
runs (DSpark's throughput scheduler among other requests) may draft differently from run to run while writing the
same tokens: such a repeat counts as a timing run (its rates), but its steps are not mixed into the kept ones. A
repeat that writes other tokens (or fails) is not a timing run of the same work: that lane is not repeated again,
so its runs stay paired, round by round, with the baseline's. The repeats are as many as fit in
REPEAT_WITHIN_S of the engine's own time (`engine_seconds`, read from the lanes' traces, not from the live pass's
clock, which a busy server's drawing stretches): a comparison whose lanes take longer is not repeated, as a long run
averages such moments out itself. The rule is the same at one request and at many at once (a batch's lane simply
costs more, so fewer repeats fit).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from engine.background import BackgroundSteps
from engine.contract.interface import EngineLike
from engine.contract.summary import fastest_steps, summarize
from engine.contract.types import EngineError, GenerationConfig, Request, Step

from .events import Ended, LaneEvent, LaneRan, RepeatEvent, RunEvent, ServerLaneEvent, SharedEvent


@dataclass
class LaneRun:
    method: str
    config: GenerationConfig
    steps: list[Step] = field(default_factory=list)
    state: str = "waiting"  # waiting, running, done, stopped, or "error: ..."
    timing_runs: int = 0  # complete runs measured (the live pass and the repeats); steps: each step's fastest
    repeating: bool = False  # a repeat of this lane is running now
    rates: list = field(default_factory=list)  # each complete run's (tokens per compute second, per wall second)
    engine_share: float | None = None  # of its live pass on the clock, the share its engine run took (LaneEvent)
    # what it runs: the engine's checked request (app/run/plan.py; None for a lane made by hand, whose request
    # run_lanes asks the engine for)
    request: Request | None = None

    def apply(self, event: RunEvent) -> None:
        """What one event does to this lane (the only code that changes one). The live pass: its steps grow, its
        state moves on, and a lane done counts its live pass as its first timing run. A repeat: it began, or it
        ended counted (its rates) or not; then its steps each at their fastest. A shared run: its lane, taken whole."""
        if isinstance(event, LaneEvent):
            self.steps.extend(event.steps)
            if event.state:
                self.state = event.state
            if event.engine_share is not None:
                self.engine_share = event.engine_share
            if event.state == "done":
                self.timing_runs, self.rates = 1, [run_rates(self.steps)]
        elif isinstance(event, RepeatEvent):
            self.repeating = event.began
            if event.rates is not None:
                self.rates.append(event.rates)
                self.timing_runs += 1
            if event.fastest:
                self.steps[:] = event.fastest
        elif isinstance(event, SharedEvent):
            self.steps[:] = event.steps
            self.state, self.timing_runs, self.rates = event.state, event.timing_runs, list(event.rates)
            self.engine_share = event.engine_share

    def ran(self, request: Request | None = None) -> LaneRan:
        """How it ended and what it ran: its drafts per step as its request (or `request`) says, after the cap."""
        request = request or self.request
        return LaneRan(self.method, self.state, request.drafts_per_step if request is not None else None)


def lane_requests(engine: EngineLike, prompt: str, lanes: Sequence[LaneRun]) -> list[Request]:
    """The lanes' checked requests: the plan's, made by the engine before the run; for lanes made without one (a
    script's), the engine's for their configs over `prompt`, encoded once. The engine checks nothing again."""
    if all(lane.request is not None for lane in lanes):
        return [lane.request for lane in lanes]
    return engine.requests(prompt, [lane.config for lane in lanes])


def run_ended(lanes: Sequence[LaneRun], requests: Sequence[Request], stopped: bool) -> Ended:
    """The run's end: each lane's state and what its request ran."""
    return Ended(tuple(lane.ran(request) for lane, request in zip(lanes, requests)), stopped=stopped)


def apply_server(lane, event: ServerLaneEvent):
    """A server lane (app/servers/client.py ServerLaneResult) after one of its events: a new value, never the old
    one changed, so a page reading the lane from another thread never sees it half-updated."""
    return replace(lane, **dict(event.changes))


def apply_all(lanes: Sequence[LaneRun], event: RunEvent) -> None:
    """Fold one event of the stream into the lanes it names (an Ended changes none)."""
    if not isinstance(event, Ended):
        lanes[event.index].apply(event)


def run_rates(steps: list[Step]) -> tuple:
    """One complete run's tokens per second of the decoding thread's compute time (None without it) and of wall
    time, and for a request among others the whole batch's tokens per second of wall time: what its speedup would
    have been had it been the only run."""
    s = summarize(steps)
    if s.batch_tokens_per_s is not None:
        return s.tokens_per_cpu_s, s.tokens_per_s, s.batch_tokens_per_s
    return s.tokens_per_cpu_s, s.tokens_per_s


TIMING_RUNS = 3  # complete runs of each lane, the fastest kept (1 = the live pass only)
REPEAT_WITHIN_S = 12.0  # a comparison's runs (the live pass and its repeats) fit in this many engine seconds: the
# live pass's drawing comes on top, and the whole stays within the 15 s a visitor may wait behind another's job


def runs_that_fit(run_s: float, timing_runs: int, within_s: float | None = None) -> int:
    """How many complete runs of a comparison whose lanes take `run_s` seconds to run once fit in `within_s` (at
    least 1; None: REPEAT_WITHIN_S as it is when asked)."""
    within_s = REPEAT_WITHIN_S if within_s is None else within_s
    return max(1, min(timing_runs, math.floor(within_s / run_s) if run_s > 0 else timing_runs))


def engine_seconds(lanes: Sequence[LaneRun]) -> float:
    """The engine's own wall time for one run of every lane: what a repeat costs, as the lanes' traces measured it
    in the live pass. Not the live pass's time on the clock: that also holds the page's drawing between batches of
    steps, which a busy server stretches (a crowd toggling projector mode, docs/hosting.md) while the engine's work,
    and so each repeat's, stays as it was: repeats cut by that clock left such a comparison one noisy run."""
    return sum(summarize(lane.steps).wall_s for lane in lanes if lane.steps)


class RunCosts:
    """A comparison's engine time before it runs. Each lane costs its new tokens times the time of one token
    (`token_s` for one request, `request_token_s` more for each further request decoded at once) and, with more than
    one request at once, `batch_s` for each further request (the batch's prompts and the held-out companions that keep
    it full); the figures are scaled by what the engine's live passes have measured since the server started (`scale`:
    a moving mean of measured over estimated time, one for single requests and one for batches). The starting
    figures were measured on 2 CPU cores with the embedded models (docs/hosting.md#bounds)."""

    def __init__(self, token_s: float = 0.010, request_token_s: float = 0.0002, batch_s: float = 0.22,
                 weight: float = 0.3):
        self.token_s, self.request_token_s, self.batch_s, self.weight = token_s, request_token_s, batch_s, weight
        self.scale = {False: 1.0, True: 1.0}  # batched or not -> measured over estimated
        self._lock = threading.Lock()

    def _lane_s(self, tokens: int, requests: int) -> float:
        more = max(0, requests - 1)
        return more * self.batch_s + tokens * (self.token_s + self.request_token_s * more)

    def per_token_s(self, requests_at_once: int) -> float:
        """One lane's time for one more new token at `requests_at_once` requests, as measured so far."""
        more = max(0, requests_at_once - 1)
        return (self.token_s + self.request_token_s * more) * self.scale[more > 0]

    def fixed_s(self, requests_at_once: int) -> float:
        """One lane's time besides its tokens at `requests_at_once` requests (0 for one request)."""
        more = max(0, requests_at_once - 1)
        return more * self.batch_s * self.scale[more > 0]

    def live_s(self, lanes: Sequence[tuple[int, int]]) -> float:
        """The live pass of lanes given as (new tokens, requests at once)."""
        return sum(self.fixed_s(requests) + tokens * self.per_token_s(requests) for tokens, requests in lanes)

    def total_s(self, lanes: Sequence[tuple[int, int]], timing_runs: int = TIMING_RUNS) -> float:
        """The whole comparison: the live pass and the repeats that fit."""
        live = self.live_s(lanes)
        return live * runs_that_fit(live, timing_runs)

    def observe(self, lanes: Sequence[tuple[int, int]], measured_s: float) -> None:
        """A live pass of `lanes` took `measured_s` (complete lanes only)."""
        estimated = sum(self._lane_s(tokens, requests) for tokens, requests in lanes)
        if estimated <= 0 or not measured_s > 0 or not lanes:
            return
        batched = max(requests for _, requests in lanes) > 1
        with self._lock:
            self.scale[batched] += self.weight * (measured_s / estimated - self.scale[batched])


COSTS = RunCosts()
MAX_YIELD_S = 180.0  # the longest a run waits for others' jobs between two of its lanes


class Turns:
    """A run's turn policy: asked before each lane and each repeat with the run's stop event, `yield_to` says True
    while another job should have the engine first (app/main.py hands in one that lets a presenter's job go
    between a visitor's lanes, app/hosting/fairness.py); the run waits, Stop still ends it."""

    def __init__(self, yield_to: Callable[[threading.Event], bool] | None = None, max_wait_s: float = MAX_YIELD_S):
        self.yield_to, self.max_wait_s = yield_to, max_wait_s

    def take(self, stop: threading.Event) -> float:
        """Wait while another job should have the engine first; the seconds waited."""
        started = time.monotonic()
        while (self.yield_to is not None and self.yield_to(stop) and not stop.is_set()
               and time.monotonic() - started < self.max_wait_s):
            time.sleep(0.05)
        return time.monotonic() - started


EVERY_RUN_FIRST = Turns()  # no other job goes first


COLLECT_S = 0.25  # steps are handed over in batches this far apart (and at once when a lane ends)
SETTLE_S = 0.1  # pause before each lane: a browser on the same cores draws the last update meanwhile


def stream_steps(engine: EngineLike, request: Request, stop: threading.Event,
                 every_s: float | None = COLLECT_S) -> Iterator[list[Step]]:
    """Yield batches of new steps of one checked request, every `every_s` seconds and when the lane ends; raises
    EngineError from the engine. Stop is seen between batches."""
    worker = BackgroundSteps(engine.stream(request), depth=0,  # never hold the engine back
                             name=f"speclab-lane-{request.config.method}")
    try:
        for batch in worker.batches(every_s):
            yield batch
            if stop.is_set():
                return
    finally:
        worker.close()


MAX_SHARED = 16  # finished runs kept for sharing
_shared: dict[tuple, tuple[tuple[SharedEvent, ...], float]] = {}  # run key -> (its lanes as events, when it ended)
_shared_lock = threading.Lock()


def _share_key(engine, requests: Sequence[Request], timing_runs: int) -> tuple:
    return id(engine), tuple(requests), timing_runs


def _take_shared(key: tuple, asked_s: float | None) -> tuple[SharedEvent, ...] | None:
    """The lanes of an identical run that ended after `asked_s` (None: asked now, so none)."""
    with _shared_lock:
        found = _shared.get(key)
    if found is None or asked_s is None or found[1] < asked_s:
        return None
    return found[0]


def _keep_shared(key: tuple, lanes: Sequence["_Record"]) -> None:
    kept = tuple(SharedEvent(i, lane.state, tuple(lane.steps), lane.timing_runs, tuple(lane.rates), lane.share)
                 for i, lane in enumerate(lanes))
    with _shared_lock:
        _shared.pop(key, None)
        _shared[key] = (kept, time.monotonic())
        while len(_shared) > MAX_SHARED:
            _shared.pop(next(iter(_shared)))


@dataclass
class _Record:
    """What the producer of the events remembers of a lane to decide what comes next (never the page's lane)."""

    state: str = "waiting"
    steps: list[Step] = field(default_factory=list)
    timing_runs: int = 0
    rates: list = field(default_factory=list)
    share: float | None = None


def run_events(engine: EngineLike, requests: Sequence[Request], stop: threading.Event,
               timing_runs: int = TIMING_RUNS, asked_s: float | None = None, turns: Turns = EVERY_RUN_FIRST
               ) -> Iterator[RunEvent]:
    """The whole run of the lanes' checked requests as events: the live pass, then the timing runs (module
    docstring); no Ended (run_lanes says what ran, from the requests). asked_s: when the visitor pressed Run
    (time.monotonic; None: now). An identical run that ended after that press gives its lanes instead: a class
    pressing one Run together, each press waiting its turn in the engine's queue, costs one run; a press after a
    run ended measures afresh."""
    key = _share_key(engine, requests, timing_runs)
    shared = None if stop.is_set() else _take_shared(key, asked_s)
    if shared is not None:
        yield from shared
        return
    records = [_Record() for _ in requests]
    started, waited = time.monotonic(), [0.0]
    for event in lane_events(engine, requests, stop, waited=waited, turns=turns):
        record = records[event.index]
        record.steps.extend(event.steps)
        record.state = event.state or record.state
        if event.state == "done":
            record.timing_runs, record.rates, record.share = 1, [run_rates(record.steps)], event.engine_share
        yield event
    live_s = time.monotonic() - started - waited[0]
    if all(r.state == "done" for r in records) and not stop.is_set():
        COSTS.observe([(r.config.max_new_tokens, r.config.requests_at_once) for r in requests], live_s)
    runs = runs_that_fit(sum(summarize(r.steps).wall_s for r in records if r.steps), timing_runs)
    if runs > 1:
        yield from _repeats(engine, requests, records, stop, runs, turns)
    if all(r.state == "done" for r in records) and not stop.is_set():
        _keep_shared(key, records)


def run_lanes(engine: EngineLike, prompt: str, lanes: list[LaneRun], stop: threading.Event,
              timing_runs: int = TIMING_RUNS, asked_s: float | None = None, turns: Turns = EVERY_RUN_FIRST
              ) -> Iterator[RunEvent]:
    """Advance the lanes by run_events over their checked requests (lane_requests), each event applied before it
    is yielded, so the caller can redraw; last, Ended with what each lane ran."""
    requests = lane_requests(engine, prompt, lanes)
    for event in run_events(engine, requests, stop, timing_runs, asked_s, turns):
        apply_all(lanes, event)
        yield event
    yield run_ended(lanes, requests, stop.is_set())


def _repeats(engine, requests: Sequence[Request], records: list[_Record], stop: threading.Event, timing_runs: int,
             turns: Turns) -> Iterator[RepeatEvent]:
    """Run every finished lane again, in turns; each lane then keeps, step by step, its fastest timing of the
    same tokens (engine/contract/summary.py fastest_steps), over the runs that drafted alike (module docstring)."""
    runs = {i: [list(r.steps)] for i, r in enumerate(records)}
    ended = set()  # lanes whose last repeat was not a run of the same work: not repeated again
    for _ in range(timing_runs - 1):
        for i, (request, record) in enumerate(zip(requests, records)):
            if stop.is_set() or record.state != "done" or i in ended:
                continue
            turns.take(stop)
            yield RepeatEvent(i, began=True)
            try:
                steps = [step for batch in stream_steps(engine, request, stop) for step in batch]
            except EngineError:  # it ran once already; a repeat that fails only loses its timing
                steps = []
            rates = None
            if _complete(steps) and _same_tokens(steps, record.steps):
                if _same_run(steps, record.steps):
                    runs[i].append(steps)
                rates = run_rates(steps)
                record.rates.append(rates)
                record.timing_runs += 1
            else:
                ended.add(i)
            yield RepeatEvent(i, rates=rates)
    for i, record in enumerate(records):
        if record.state == "done" and len(runs[i]) > 1:
            record.steps[:] = fastest_steps(runs[i])
            yield RepeatEvent(i, fastest=tuple(record.steps))


def _complete(steps: list[Step]) -> bool:
    return bool(steps) and steps[-1].finish_reason is not None


def _same_tokens(a: list[Step], b: list[Step]) -> bool:
    """Whether two runs wrote the same tokens, whatever they drafted on the way."""
    return [t.id for s in a for t in s.committed] == [t.id for s in b for t in s.committed]


def _same_run(a: list[Step], b: list[Step]) -> bool:
    """Whether two runs wrote the same tokens with the same drafts and verdicts (only their times differ)."""
    return len(a) == len(b) and all(x.committed == y.committed and x.drafted == y.drafted for x, y in zip(a, b))


def lane_events(engine: EngineLike, requests: Sequence[Request], stop: threading.Event,
                settle_s: float | None = None, waited: list[float] | None = None,
                turns: Turns = EVERY_RUN_FIRST) -> Iterator[LaneEvent]:
    """The live pass: every lane's checked request in turn, as events. A lane starts ("running"), its steps arrive
    in batches, it ends ("done", "error: ...", or "stopped" once `stop` is set; a lane not yet started is then
    "stopped" too).
    settle_s: the pause before each lane (None: SETTLE_S as it is when the pass runs)."""
    settle_s = SETTLE_S if settle_s is None else settle_s
    for index, request in enumerate(requests):
        if stop.is_set():
            yield LaneEvent(index, "stopped")
            continue
        yield LaneEvent(index, "running")
        paused = turns.take(stop)
        if waited is not None:
            waited[0] += paused
        time.sleep(settle_s)  # let the page draw the lane that just ended before this one is timed
        started, lane_steps = time.monotonic(), []
        try:
            for steps in stream_steps(engine, request, stop):
                lane_steps.extend(steps)
                yield LaneEvent(index, steps=tuple(steps))
        except EngineError as exc:
            yield LaneEvent(index, f"error: {exc}")
            continue
        if stop.is_set():
            yield LaneEvent(index, "stopped")
            continue
        on_clock = time.monotonic() - started
        yield LaneEvent(index, "done", engine_share=min(1.0, summarize(lane_steps).wall_s / on_clock)
                        if on_clock > 0 else None)
