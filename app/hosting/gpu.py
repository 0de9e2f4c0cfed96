"""The Compare tab's lanes on a Hugging Face ZeroGPU Space: one `spaces.GPU` call per lane.

app/hosting/zerogpu.py's ZeroGPUEngine runs each lane in a GPU call of its own (a shorter request gets a visitor a
GPU sooner and fits their quota better than one for every lane), and stops the worker within a step once the
run's stop event is set. `gpu_events` is a transport, not a runner: it says what the GPU calls did as the run's
own events (app/run/events.py), in the calling thread (the visitor's request, whose ZeroGPU quota the call is
counted against, is known there only); `lane_runner` is the drop-in for app/run/runner.py's `run_lanes` that
applies them through the same `LaneRun.apply`. Each lane runs once: a GPU's timing is steady, and a repeat would
cost the visitor's quota again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import gradio as gr

from engine.contract.types import EngineError, Request

from ..run.events import LaneEvent, RunEvent
from ..run.runner import COLLECT_S, LaneRun, apply_all, lane_requests, run_ended
from .zerogpu import ZeroGPUEngine, no_gpu

__all__ = ["gpu_decorator", "gpu_events", "lane_runner", "no_gpu", "warm_up_once", "zero_gpu"]


def zero_gpu() -> bool:
    """Whether this process runs on a ZeroGPU Space (the variable the `spaces` package reads)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def gpu_decorator() -> Callable:
    """`spaces.GPU` when the package is installed (a no-op itself off ZeroGPU), else `no_gpu`."""
    try:
        import spaces
    except ImportError:
        return no_gpu
    return spaces.GPU


def warm_up_once(engine) -> None:
    """Run the engine's warm-up once per process (a CPU, or a dedicated GPU: where the app's process has the
    device). The process that warmed it is marked on the engine itself."""
    if getattr(engine, "warmed_in_process", None) != os.getpid():
        engine.warm_up()
        engine.warmed_in_process = os.getpid()


def _refusal(exc: gr.Error) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def gpu_events(engine: ZeroGPUEngine, requests: list[Request], stop: threading.Event) -> Iterator[LaneEvent]:
    """The live pass of checked `requests` (made in the app's process, KnownFacts.requests) in GPU calls of
    `engine`, as events: each lane "running", its steps in batches
    COLLECT_S apart, then "done", "stopped" or "error: ..."; a ZeroGPU refusal (quota, no GPU free, a worker that
    died) ends the lane it met as an error, said once, and every lane after it "stopped"."""
    index, refused = 0, False
    try:
        for index, request in enumerate(requests):
            if stop.is_set():
                yield LaneEvent(index, "stopped")
                continue
            yield LaneEvent(index, "running")
            pending, shown = [], time.monotonic()
            try:
                for step in engine.stream_until(request, stop):
                    pending.append(step)
                    if time.monotonic() - shown >= COLLECT_S:
                        yield LaneEvent(index, steps=tuple(pending))
                        pending, shown = [], time.monotonic()
            except EngineError as exc:
                yield LaneEvent(index, f"error: {exc}", tuple(pending))
                continue
            yield LaneEvent(index, "stopped" if stop.is_set() else "done", tuple(pending))
        return
    except gr.Error as exc:  # ZeroGPU's own refusals
        refused = True
        yield LaneEvent(index, f"error: {_refusal(exc)}")
    for rest in range(index + 1 if refused else len(requests), len(requests)):
        yield LaneEvent(rest, "stopped")


def lane_runner(engine: ZeroGPUEngine) -> Callable[..., Iterator[RunEvent]]:
    """A `run_lanes(engine, prompt, lanes, stop)` whose lanes' checked requests run in GPU calls of `engine`."""

    def run_lanes(engine_: object, prompt: str, lanes: list[LaneRun], stop: threading.Event,
                  timing_runs: int | None = None, asked_s: float | None = None, turns=None) -> Iterator[RunEvent]:
        """As app/run/runner.py's run_lanes: the events applied, each yielded after (each lane runs once here, and
        every press runs: `timing_runs`, `asked_s` and `turns` are not used)."""
        if engine_ is not engine:
            raise ValueError("this lane runner was built for another engine")
        requests = lane_requests(engine, prompt, lanes)
        for event in gpu_events(engine, requests, stop):
            apply_all(lanes, event)
            yield event
        yield run_ended(lanes, requests, stop.is_set())

    return run_lanes
