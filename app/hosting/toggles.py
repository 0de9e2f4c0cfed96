"""Projector toggles, bounded: a visitor flipping projector mode in a loop costs the server little and for a while.

Each toggle has the server draw the session's charts again in the new mode (app/draw/projector.py ChartRedraw). A
comparison opened from a 10 MB file took about a second of CPU and tens of MB a drawing, and a loop of toggles from
one address held the web process's memory up by a GB and slowed everyone's runs. So:

- **drawn once per mode**: what a toggle draws of a comparison (the Compare tab's charts, the Step-through tab's
  step) is kept by the very objects it was drawn from and the mode (`ByMode`), so toggling back and forth, or a class
  on one recorded link toggling, draws each mode once (Gradio reads a kept figure without changing it);
- **one drawing at a time**: toggles that do need a drawing take turns (DRAWING_AT_ONCE), so a flood queues instead
  of holding many drawings in memory at once, and what a drawing freed goes back to the system after it;
- **limited**: a session may toggle SESSION_BURST times at once, then SESSION_RATE a second; an address ADDRESS_BURST
  and ADDRESS_RATE (app/hosting/addresses.py TokenBuckets). Past either, the toggle is answered in one line at the
  door, before Gradio reads it (`door_check`), and the server draws nothing: the page's own styles follow the mode
  at once, the charts keep their last drawing until a toggle within the limit. (Called directly, past a limit the
  handler records the mode and draws nothing.)
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from ..draw.projector import ChartRedraw
from . import memory
from .addresses import TokenBuckets, client_address

SESSION_BURST, SESSION_RATE = 6, 0.5  # a presenter switching the room's mode a few times, then once every 2 s
ADDRESS_BURST, ADDRESS_RATE = 60, 2.0  # a class behind one address, each switching a time or two
DRAWING_AT_ONCE = 1
TOO_MANY = ("SpecLab: projector mode was switched too often from here; the charts follow again in {s} s (the page's "
            "own layout already has).")
KEPT = 32  # drawings kept (each one comparison's charts in one mode)


class ByMode:
    """Drawings kept by what they were drawn from (held weakly: a comparison the sessions dropped is not kept alive
    here) and the mode, each drawn once however many ask for it together; at most `limit` kept."""

    def __init__(self, limit: int = KEPT, at_once: int = DRAWING_AT_ONCE):
        self._items: OrderedDict[tuple, tuple[tuple, tuple]] = OrderedDict()  # key -> (weak sources, drawn)
        self._lock = threading.Lock()
        self._drawing = threading.BoundedSemaphore(at_once)
        self._limit = limit
        self.drawn = 0  # drawings made (the tests count them)

    def _kept(self, key: tuple, sources: tuple):
        kept = self._items.get(key)
        if kept is not None and all(ref() is source for ref, source in zip(kept[0], sources)):
            self._items.move_to_end(key)
            return kept[1]
        return None

    def get(self, sources: tuple, mode: bool, extra: tuple, draw: Callable[[], tuple]) -> tuple:
        """`draw()`'s outputs for these sources in this mode (`extra`: what else they depend on, e.g. a step)."""
        if any(source is None for source in sources):
            return tuple(draw())  # nothing to draw from: cheap, and nothing to key it by
        key = (tuple(id(source) for source in sources), bool(mode), extra)
        with self._lock:
            if (kept := self._kept(key, sources)) is not None:
                return kept
        with self._drawing:
            with self._lock:
                if (kept := self._kept(key, sources)) is not None:
                    return kept
            drawn = tuple(draw())
            try:
                refs = tuple(weakref.ref(source) for source in sources)
            except TypeError:
                return drawn
            with self._lock:
                self.drawn += 1
                self._items[key] = (refs, drawn)
                while len(self._items) > self._limit:
                    self._items.popitem(last=False)
        memory.release()  # what the drawing freed, back to the system
        return drawn


@dataclass(frozen=True)
class LimitedRedraw(ChartRedraw):
    """ChartRedraw within the limits above; `outputs`: how many charts it draws (skipped past a limit)."""

    outputs: int = 0
    sessions_limit: TokenBuckets = field(default_factory=lambda: TokenBuckets(SESSION_BURST, SESSION_RATE))
    addresses_limit: TokenBuckets = field(default_factory=lambda: TokenBuckets(ADDRESS_BURST, ADDRESS_RATE))
    refused: list = field(default_factory=lambda: [0])  # toggles past a limit so far (the reliability script)

    def door_check(self, fn, scope: dict, request: dict):
        """For the queue's door (app/hosting/fairness.py Door.at_once_limits): a toggle whose session or address has
        no toggle left is answered in one line before Gradio reads it, so a flood costs the server next to nothing
        (its mode changes in the page, not on the server, until a toggle within the limit)."""
        if getattr(fn.fn, "__self__", None) is not self:
            return None
        session = request.get("session_hash")
        wait = max(self.sessions_limit.peek(session if isinstance(session, str) else ""),
                   self.addresses_limit.peek(client_address(scope)))
        if not wait:
            return None
        self.refused[0] += 1
        return 429, TOO_MANY.format(s=math.ceil(wait)), max(1, math.ceil(wait))

    def on_toggle(self, on, step, token, request: gr.Request):
        session = request.session_hash
        client = getattr(request, "client", None)
        address = getattr(client, "host", "") or ""
        if self.sessions_limit.take(session) or self.addresses_limit.take(address):
            self.sessions.get(session).projector = on is True
            self.refused[0] += 1
            return (gr.skip(),) * self.outputs
        return super().on_toggle(on, step, token, request)
