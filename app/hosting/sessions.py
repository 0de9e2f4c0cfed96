"""The app's one store of server-side state, bounded: what each browser session has (its last comparison,
what it steps through, whether it plays, its running comparison's Stop, its queued Run and Stop presses),
and the complete comparisons the server recorded by configuration, which share links replay. The app makes
one (app/main.py build_app) and hands it to every tab.

Gradio's own per-session state (gr.State) would keep a heartbeat connection open for every visitor and
copy values into every event; one bounded store here keeps memory flat however many visitors come.
"""

from __future__ import annotations

import threading
from pathlib import Path
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..comparison import Comparison, LastComparisons
from ..recordings import RecordedRuns

MAX_BROWSER_SESSIONS = 64  # sessions whose state is kept, least recently used evicted
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

    def press_run(self) -> None:
        """A Run (or a measurement's button) was pressed: its event now waits in the engine's queue."""
        self.run_pressed_s, self.stop_pressed_s = now_s(), None

    def press_stop(self) -> None:
        """Stop: the session's running job ends within a batch of steps; one still queued is withdrawn."""
        if self.stop is not None:
            self.stop.set()
        elif self.run_pressed_s is not None:
            self.stop_pressed_s = now_s()

    def withdrawn(self) -> bool:
        """Whether Stop was pressed after Run, before the run started; forgets both presses."""
        run, stop = self.run_pressed_s, self.stop_pressed_s
        self.run_pressed_s = self.stop_pressed_s = None
        return run is not None and stop is not None and stop > run


class SessionStore:
    def __init__(self, limit: int = MAX_BROWSER_SESSIONS, recorded: int = MAX_RECORDED,
                 opened_files: int = MAX_OPENED_FILES, recordings: Path | None = None):
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._opened: OrderedDict[str, Comparison] = OrderedDict()  # sessions holding a file, oldest first
        self._lock = threading.Lock()
        self._limit = limit
        self._opened_limit = opened_files
        # complete runs by configuration (app/tabs/compare.py), also on disk in `recordings` (app/recordings.py)
        self.recorded = RecordedRuns(recordings, limit=recorded)
        self.replays = LastComparisons(limit=recorded)  # each recorded run's page outputs, drawn once

    def get(self, session: str) -> Session:
        """The session's state, made on first use; the least recently used beyond the limit is dropped."""
        with self._lock:
            state = self._sessions.pop(session, None) or Session()
            self._sessions[session] = state
            while len(self._sessions) > self._limit:
                self._sessions.popitem(last=False)
            return state

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


def now_s() -> float:
    return time.monotonic()
