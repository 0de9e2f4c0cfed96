"""One stream of events for a comparison's run, as plain values: the live pass (LaneEvent), the timing repeats
(RepeatEvent), the result of an identical run shared (SharedEvent) and the end, with what each lane ran (Ended).

The page's runner (runner.py), the ZeroGPU path (app/hosting/gpu.py, where the events cross a process boundary)
and the server lanes (ServerLaneEvent, app/servers/client.py) all produce or consume these: they are transports;
runner.py (`LaneRun.apply`, `apply_server`) is the only code that turns them into a lane's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.contract.types import Step


@dataclass(frozen=True)
class LaneEvent:
    """One thing that happened to lane `index` in the live pass: a new state ("" for none) and new steps."""

    index: int
    state: str = ""  # "running", "done", "stopped", "error: <one line>", or "" (steps only)
    steps: tuple[Step, ...] = ()
    # On "done": the share of the lane's live pass on the clock (from its first step asked for to its last handed
    # over) that its run took in the engine (its trace's wall time). Near 1 when the page takes and draws the steps
    # as fast as they come; far below it when the server, busy with other requests, is slow to (None: not said).
    engine_share: float | None = None


@dataclass(frozen=True)
class RepeatEvent:
    """A timing repeat of lane `index`: it began (`began`), or it ended, counted as a timing run with its `rates`
    (None: not a run of the same work, so not counted); `fastest`: after the last repeat, the lane's steps each at
    its fastest timing (empty: unchanged)."""

    index: int
    began: bool = False
    rates: tuple | None = None
    fastest: tuple[Step, ...] = ()


@dataclass(frozen=True)
class SharedEvent:
    """Lane `index` takes the lanes of an identical run that ended after this one was asked for."""

    index: int
    state: str
    steps: tuple[Step, ...]
    timing_runs: int
    rates: tuple
    engine_share: float | None


@dataclass(frozen=True)
class LaneRan:
    """What one lane ran: its method, how it ended, and its drafts per step after its drafter's cap, as the
    engine's checked request for it says (None: a lane that drafts none)."""

    method: str
    state: str
    drafts_per_step: int | None


@dataclass(frozen=True)
class Ended:
    """The run ended: every lane, with what it ran; `stopped`: Stop or the time limit ended it."""

    lanes: tuple[LaneRan, ...]
    stopped: bool = False

    def capped(self, asked: dict[str, int]) -> list[tuple[str, int, int]]:
        """(method, drafts per step it ran, drafts per step asked) for each lane that ran fewer than asked."""
        return [(lane.method, lane.drafts_per_step, asked[lane.method]) for lane in self.lanes
                if lane.drafts_per_step is not None and lane.method in asked
                and lane.drafts_per_step < asked[lane.method]]


@dataclass(frozen=True)
class ServerLaneEvent:
    """What a server lane (app/servers/client.py) became: its changed fields as (name, value) pairs, in the order
    its answer said them ("state" among them when it moved on: running, done, stopped, error)."""

    index: int
    changes: tuple[tuple[str, object], ...]


RunEvent = LaneEvent | RepeatEvent | SharedEvent | Ended
