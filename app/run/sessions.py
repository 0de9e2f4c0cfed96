"""The app's one store of server-side state, bounded: what each browser session has (its last comparison,
what it steps through, whether it plays, its running comparison's Stop, its queued Run and Stop presses),
and the complete comparisons the server recorded by configuration, which share links replay. The app makes
one (app/main.py build_app) and hands it to every tab.

Gradio's own per-session state (gr.State) would keep a heartbeat connection open for every visitor and
copy values into every event; one bounded store here keeps memory flat however many visitors come.

The store is bounded by the memory its sessions' comparisons take (MAX_SESSION_BYTES, estimated from their steps and
tokens), by their number (MAX_BROWSER_SESSIONS) and by idle time (IDLE_S): past a bound, sessions idle longer than
IDLE_S go first, then the least recently used; a session with a job queued or running is never dropped (its Stop
and its result must find it), so a class reloading pages cannot cost a visitor their run or their last result.
"""

from __future__ import annotations

import threading
from pathlib import Path
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..comparison import Comparison
from ..recordings import RecordedRuns

MAX_BROWSER_SESSIONS = 4096  # sessions whose state is kept (a few KB each without a comparison)
MAX_SESSION_BYTES = 256 * 2**20  # the comparisons the sessions keep, estimated (about 0.3 MB a default comparison)
IDLE_S = 2 * 3600.0  # a session not heard from this long goes first when a bound is reached
BUSY_S = 3600.0  # a Run pressed this recently and not yet answered counts as a job waiting
SWEEP_EVERY = 64  # new sessions between two sweeps of the bounds (each sweep reads every session's size)
STEP_BYTES, TOKEN_BYTES, PANEL_BYTES = 700, 450, 64 * 1024  # what a step, a token, a Why panel take, about
MAX_RECORDED = 32  # complete comparisons kept by configuration for share links
# Sessions that keep a comparison opened from a file (one read back takes about 6× its file's size in memory):
# past this, the oldest such session forgets its file (its page still shows it; Step through and Why no longer).
MAX_OPENED_FILES = 2


@dataclass
class Session:
    """One browser session's state."""

    last: Comparison | None = None  # its last comparison: run on the Compare tab or opened from a file
    shown: Comparison | None = None  # what its Step-through tab shows
    playing: bool = False  # Step-through's Play is on, as the server last heard it
    stop: threading.Event | None = None  # set to stop its running comparison
    run_pressed_s: float | None = None  # monotonic time of its last Run press not yet started
    stop_pressed_s: float | None = None  # ... and of a Stop pressed while nothing of its own ran
    projector: bool = False  # projector mode is on in its page: charts are drawn for a room (app/draw/charts.py)
    panels: dict = field(default_factory=dict)  # the Why tab's measurements it measured live, by recording key
    seen_s: float = field(default_factory=lambda: now_s())  # when it was last used
    withdraw: object = field(default=None, repr=False, compare=False)  # () -> None: its waiting jobs withdrawn

    def press_run(self) -> None:
        """A Run (or a measurement's button) was pressed: its event now waits in the engine's queue."""
        self.run_pressed_s, self.stop_pressed_s = now_s(), None

    def press_stop(self) -> None:
        """Stop: the session's running job ends within a batch of steps; one still queued is withdrawn."""
        if self.stop is not None:
            self.stop.set()
        elif self.run_pressed_s is not None:
            self.stop_pressed_s = now_s()
            if callable(self.withdraw):
                self.withdraw()  # its jobs waiting in the queue start at once, and each sees this Stop

    def busy(self, now: float) -> bool:
        """Whether a job of its own runs, or one it asked for may still wait in the queue."""
        return self.stop is not None or (self.run_pressed_s is not None and now - self.run_pressed_s < BUSY_S)

    def withdrawn(self) -> bool:
        """Whether Stop was pressed after Run, before the run started; forgets both presses."""
        run, stop = self.run_pressed_s, self.stop_pressed_s
        self.run_pressed_s = self.stop_pressed_s = None
        return run is not None and stop is not None and stop > run


def comparison_bytes(comparison: Comparison | None) -> int:
    """About what a comparison takes in memory: its steps and their tokens."""
    if comparison is None:
        return 0
    steps = [step for lane in comparison.lanes.values() for step in lane.steps]
    return len(steps) * STEP_BYTES + sum(len(s.drafted) + len(s.committed) for s in steps) * TOKEN_BYTES


def session_bytes(state: Session) -> int:
    shown = 0 if state.shown is state.last else comparison_bytes(state.shown)
    return comparison_bytes(state.last) + shown + len(state.panels) * PANEL_BYTES


class SessionStore:
    def __init__(self, limit: int = MAX_BROWSER_SESSIONS, recorded: int = MAX_RECORDED,
                 opened_files: int = MAX_OPENED_FILES, recordings: Path | None = None,
                 max_bytes: int = MAX_SESSION_BYTES, idle_s: float = IDLE_S, clock=None, withdraw=None):
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._opened: OrderedDict[str, Comparison] = OrderedDict()  # sessions holding a file, oldest first
        self._lock = threading.Lock()
        self._limit, self._max_bytes, self._idle_s = limit, max_bytes, idle_s
        self._clock = clock or now_s
        self._new_since_sweep = 0
        self._opened_limit = opened_files
        self.withdraw = withdraw  # (session id) -> None: its waiting jobs withdrawn (app/hosting/fairness.py)
        # complete runs by configuration (app/tabs/compare.py), also on disk in `recordings` (app/recordings.py)
        self.recorded = RecordedRuns(recordings, limit=recorded)
        self.replays = DrawnOnce(limit=2 * recorded)  # what the page draws of each recorded run, drawn once

    def get(self, session: str) -> Session:
        """The session's state, made on first use; past a bound, idle and least recently used sessions without a
        job are dropped (module docstring)."""
        with self._lock:
            now = self._clock()
            state = self._sessions.pop(session, None)
            if state is None:
                state = Session(seen_s=now)
                state.withdraw = lambda: self.withdraw(session) if self.withdraw else None
                self._new_since_sweep += 1
            state.seen_s = now
            self._sessions[session] = state
            if len(self._sessions) > self._limit or self._new_since_sweep >= SWEEP_EVERY:
                self._sweep(now, keep=session)
            return state

    def sweep(self) -> None:
        """Apply the bounds now (a visitor's comparison grew since it was last counted)."""
        with self._lock:
            self._sweep(self._clock())

    def _sweep(self, now: float, keep: str | None = None) -> None:
        """Drop sessions without a job until every bound holds: the idle ones first, then the least recently
        used; never `keep` nor a busy one."""
        self._new_since_sweep = 0
        sizes = {key: session_bytes(state) for key, state in self._sessions.items()}
        total = sum(sizes.values())
        idle = [key for key, state in self._sessions.items() if now - state.seen_s > self._idle_s]
        idle_keys = set(idle)
        order = idle + [key for key in self._sessions if key not in idle_keys]
        for key in order:
            over = len(self._sessions) > self._limit or total > self._max_bytes
            if not over and key not in idle_keys:
                break
            state = self._sessions[key]
            if key == keep or state.busy(now):
                continue
            del self._sessions[key]
            self._opened.pop(key, None)
            total -= sizes[key]

    def bytes(self) -> int:
        """What the sessions' comparisons take, estimated."""
        with self._lock:
            return sum(session_bytes(state) for state in self._sessions.values())

    def opened(self, session: str, comparison: Comparison) -> None:
        """A comparison opened from a file becomes the session's last one (and the one it steps through);
        at most MAX_OPENED_FILES sessions keep one, so a crowd of uploads cannot fill the server's memory."""
        state = self.get(session)
        state.last = state.shown = comparison
        with self._lock:
            self._opened.pop(session, None)
            self._opened[session] = comparison
            while len(self._opened) > self._opened_limit:
                oldest, dropped = self._opened.popitem(last=False)
                held = self._sessions.get(oldest)
                if held is not None:
                    held.last = None if held.last is dropped else held.last
                    held.shown = None if held.shown is dropped else held.shown

    def peek(self, session: str) -> Session | None:
        """The session's state if the store has it (never makes one)."""
        with self._lock:
            return self._sessions.get(session)

    def __len__(self) -> int:
        return len(self._sessions)


class DrawnOnce:
    """What the page draws of a measurement every visitor sees alike (a recorded run, a lesson's recording, a
    slide), by key, kept while it is asked for from the very same measurement object. A class opening one link at
    once waits for the one drawing under way instead of each drawing it again: drawing a comparison takes about
    0.1 s of CPU, and 35 of them at once on two cores kept every visitor waiting for the others'. Bounded: past
    `limit` keys the least recently used goes."""

    def __init__(self, limit: int = 2 * MAX_RECORDED):
        self._items: OrderedDict[str, tuple[object, object]] = OrderedDict()  # key -> (its source, what was drawn)
        self._drawing: dict[str, threading.Lock] = {}  # key -> held while one caller draws it
        self._lock = threading.Lock()
        self._limit = limit
        self.drawn = 0  # drawings made (a test counts them)

    def _kept(self, key: str, source: object):
        kept = self._items.get(key)
        if kept is not None and kept[0] is source:
            self._items.move_to_end(key)
            return kept
        return None

    def get(self, key: str, source: object, draw):
        """`draw()`'s result for `key`, drawn from `source`: kept from an earlier call with the same source, or
        drawn now, once, however many ask for it together."""
        with self._lock:
            if (kept := self._kept(key, source)) is not None:
                return kept[1]
            gate = self._drawing.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if (kept := self._kept(key, source)) is not None:
                    return kept[1]
            value = draw()
            with self._lock:
                self.drawn += 1
                self._items[key] = (source, value)
                self._items.move_to_end(key)
                while len(self._items) > self._limit:
                    self._items.popitem(last=False)
                if self._drawing.get(key) is gate:
                    del self._drawing[key]
            return value


def now_s() -> float:
    return time.monotonic()
