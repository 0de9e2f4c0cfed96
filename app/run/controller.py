"""A run on the page, without the page: it runs a plan's lanes (runner.py, or a transport's drop-in such as the
ZeroGPU path's), keeps to the time limit, and folds the events into frozen Comparisons: one a moment while the
lanes run (`Moment`), and the finished one with what each lane ran (`Finished`). The Compare tab only draws them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from engine.contract.interface import EngineLike

from ..comparison import Comparison, LaneResult, settings_dict
from .events import Ended
from .plan import RunPlan
from .runner import EVERY_RUN_FIRST, LaneRun, Turns


@dataclass(frozen=True)
class Moment:
    """The run so far: the comparison (ended lanes with their summaries, the running one without), the lane
    running its live pass (None: none), and the lane being timed again with the run it is on (None: none)."""

    comparison: Comparison
    running: str | None
    repeating: tuple[str, int] | None


@dataclass(frozen=True)
class Finished:
    """The run's end: the comparison (each step at its fastest timing), what each lane ran, and whether Stop or
    the time limit ended it (`out_of_time`: the limit did)."""

    comparison: Comparison
    ended: Ended
    out_of_time: bool

    @property
    def complete(self) -> bool:
        """Every lane done and every timing run it began finished: a run that may be replayed."""
        return not self.ended.stopped and all(lane.state == "done" for lane in self.ended.lanes)

    @property
    def errors(self) -> list[str]:
        return [f"{lane.method}: {lane.state}" for lane in self.ended.lanes if lane.state.startswith("error")]


class LiveRun:
    """One plan run once: `moments` yields a Moment after every event (the caller draws as often as it likes),
    then `finished` is the result. Reads the lanes the runner writes; writes none."""

    def __init__(self, engine: EngineLike, plan: RunPlan, drafters: Mapping[str, str], versions: dict,
                 run_lanes: Callable[..., Iterator], turns: Turns = EVERY_RUN_FIRST, max_run_s: float = 180.0):
        self.engine, self.plan, self.drafters, self.versions = engine, plan, drafters, versions
        self.run_lanes, self.turns, self.max_run_s = run_lanes, turns, max_run_s
        self.lanes: list[LaneRun] = plan.lane_runs()
        self._ended_lanes: dict[str, LaneResult] = {}
        self.finished: Finished | None = None

    def moments(self, stop: threading.Event, timing_runs: int | None = None,
                asked_s: float | None = None) -> Iterator[Moment]:
        started, out_of_time, ended = time.monotonic(), False, None
        runs = {"asked_s": asked_s, "turns": self.turns}
        if timing_runs is not None:
            runs["timing_runs"] = timing_runs
        for event in self.run_lanes(self.engine, self.plan.settings.prompt, self.lanes, stop, **runs):
            if isinstance(event, Ended):
                ended = event
                continue
            if time.monotonic() - started > self.max_run_s and not stop.is_set():
                stop.set()  # the running lane ends after its current step
                out_of_time = True
            yield self.moment()
        if ended is None:  # a drop-in runner that does not say: what the lanes hold
            ended = Ended(tuple(lane.ran() for lane in self.lanes), stopped=stop.is_set())
        self.finished = Finished(self.comparison(final=True), ended, out_of_time)

    def moment(self) -> Moment:
        running = next((lane.method for lane in self.lanes if lane.state == "running"), None)
        repeat = next(((lane.method, lane.timing_runs + 1) for lane in self.lanes if lane.repeating), None)
        return Moment(self.comparison(), running, repeat)

    def comparison(self, final: bool = False) -> Comparison:
        """The lanes as a frozen Comparison: an ended lane summarized once (final: again, each step now at its
        fastest timing), a waiting or running one as its steps so far."""
        kept = {} if final else self._ended_lanes
        lanes = {}
        for run in self.lanes:
            if run.state not in ("waiting", "running") and run.method not in kept:
                kept[run.method] = LaneResult.ended(run.method, run.steps, self.drafters[run.method], run.state,
                                                    max(1, run.timing_runs), run.rates, run.engine_share)
            lanes[run.method] = kept.get(run.method) or LaneResult(run.method, tuple(run.steps),
                                                                   self.drafters[run.method], run.state)
        return Comparison(settings_dict(self.plan.settings), lanes, self.engine.device_name, self.engine.preset,
                          dict(self.versions))
