"""Runs the lanes of one comparison, one after another, each in a worker thread.

Lanes run in turn, never at once, so one lane's work never slows another's measured spans. The engine
runs in a worker thread and hands each finished step over a queue; the UI thread renders at its own
pace, so drawing the page does not sit on the engine's clock. Stopping sets an event checked after every
batch of steps, which closes the worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.background import BackgroundSteps
from engine.types import EngineError, GenerationConfig, Step


@dataclass
class LaneRun:
    method: str
    config: GenerationConfig
    steps: list[Step] = field(default_factory=list)
    state: str = "waiting"  # waiting, running, done, stopped, or "error: ..."


COLLECT_S = 0.25  # steps are handed over in batches this far apart (and at once when a lane ends)
SETTLE_S = 0.1  # pause before each lane: a browser on the same cores draws the last update meanwhile


def stream_steps(engine, prompt: str, config: GenerationConfig, stop: threading.Event,
                 every_s: float | None = COLLECT_S) -> Iterator[list[Step]]:
    """Yield batches of new steps, every `every_s` seconds and when the lane ends; raises EngineError from
    the engine. Stop is seen between batches."""
    worker = BackgroundSteps(engine.stream(prompt, config), depth=0, name=f"speclab-lane-{config.method}")  # never hold the engine back
    try:
        for batch in worker.batches(every_s):
            yield batch
            if stop.is_set():
                return
    finally:
        worker.close()


def run_lanes(engine, prompt: str, lanes: list[LaneRun], stop: threading.Event) -> Iterator[None]:
    """Advance the lanes in order, yielding after every batch of steps so the caller can redraw."""
    for lane in lanes:
        if stop.is_set():
            lane.state = "stopped"
            continue
        lane.state = "running"
        yield
        time.sleep(SETTLE_S)  # let the page draw the lane that just ended before this one is timed
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
