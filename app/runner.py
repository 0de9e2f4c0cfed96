"""Runs the lanes of one comparison, one after another, each in a worker thread.

Lanes run in turn, never at once, so one lane's work never slows another's measured spans. The engine
runs in a worker thread and hands each finished step over a queue; the UI thread renders at its own
pace, so drawing the page does not sit on the engine's clock. Stopping sets an event the worker checks
after every step.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.types import EngineError, GenerationConfig, Step

_DONE = object()


@dataclass
class LaneRun:
    method: str
    config: GenerationConfig
    steps: list[Step] = field(default_factory=list)
    state: str = "waiting"  # waiting, running, done, stopped, or "error: ..."


def stream_steps(engine, prompt: str, config: GenerationConfig, stop: threading.Event) -> Iterator[list[Step]]:
    """Yield batches of new steps as the worker produces them; raises EngineError from the engine."""
    handoff: queue.Queue = queue.Queue()

    def work() -> None:
        try:
            for step in engine.stream(prompt, config):
                handoff.put(step)
                if stop.is_set():
                    break
        except BaseException as exc:  # handed to the UI thread, which reports it
            handoff.put(exc)
        finally:
            handoff.put(_DONE)

    threading.Thread(target=work, name=f"lane-{config.method}", daemon=True).start()
    while True:
        batch = [handoff.get()]
        while not handoff.empty():
            batch.append(handoff.get_nowait())
        steps = [item for item in batch if isinstance(item, Step)]
        if steps:
            yield steps
        for item in batch:
            if isinstance(item, BaseException):
                raise item
            if item is _DONE:
                return


def run_lanes(engine, prompt: str, lanes: list[LaneRun], stop: threading.Event) -> Iterator[None]:
    """Advance the lanes in order, yielding after every batch of steps so the caller can redraw."""
    for lane in lanes:
        if stop.is_set():
            lane.state = "stopped"
            continue
        lane.state = "running"
        yield
        try:
            for steps in stream_steps(engine, prompt, lane.config, stop):
                lane.steps.extend(steps)
                yield
        except EngineError as exc:
            lane.state = f"error: {exc}"
            yield
            continue
        lane.state = "stopped" if stop.is_set() else "done"
        yield
