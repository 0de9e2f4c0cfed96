"""The Compare tab's lanes on a Hugging Face ZeroGPU Space: one `spaces.GPU` call per lane.

app/hosting/zerogpu.py's ZeroGPUEngine runs each lane in a GPU call of its own (a shorter request gets a visitor a
GPU sooner and fits their quota better than one for every lane), and stops the worker within a step once the
run's stop event is set. `lane_runner` is the drop-in for app/runner.py's `run_lanes` that drives it: the lanes in
order, each lane's steps applied through the same LaneEvents the page's own runner applies, in the calling thread
(the visitor's request, whose ZeroGPU quota the call is counted against, is known there only). Each lane runs once:
a GPU's timing is steady, and a repeat would cost the visitor's quota again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import gradio as gr

from engine.contract.types import EngineError

from ..runner import COLLECT_S, LaneEvent, LaneRun
from .zerogpu import ZeroGPUEngine, no_gpu

__all__ = ["gpu_decorator", "lane_runner", "no_gpu", "warm_up_once", "zero_gpu"]


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


def lane_runner(engine: ZeroGPUEngine) -> Callable[..., Iterator[None]]:
    """A `run_lanes(engine, prompt, lanes, stop)` whose lanes run in GPU calls of `engine`."""

    def run_lanes(engine_: object, prompt: str, lanes: list[LaneRun], stop: threading.Event,
                  timing_runs: int | None = None, asked_s: float | None = None) -> Iterator[None]:
        """As app/runner.py's run_lanes: advance the lanes in order, yielding after every batch of steps (each lane
        runs once here, and every press runs: `timing_runs` and `asked_s` are not used)."""
        if engine_ is not engine:
            raise ValueError("this lane runner was built for another engine")
        try:
            for index, lane in enumerate(lanes):
                if stop.is_set():
                    lane.apply(LaneEvent(index, "stopped"))
                    continue
                lane.apply(LaneEvent(index, "running"))
                yield
                pending, shown = [], time.monotonic()
                try:
                    for step in engine.stream_until(prompt, lane.config, stop):
                        pending.append(step)
                        if time.monotonic() - shown >= COLLECT_S:
                            lane.apply(LaneEvent(index, steps=tuple(pending)))
                            pending, shown = [], time.monotonic()
                            yield
                except EngineError as exc:
                    lane.apply(LaneEvent(index, f"error: {exc}", tuple(pending)))
                    yield
                    continue
                lane.apply(LaneEvent(index, "stopped" if stop.is_set() else "done", tuple(pending)))
                yield
        except gr.Error as exc:  # ZeroGPU's own refusals (quota, no GPU free, a worker that died)
            unfinished = [lane for lane in lanes if lane.state in ("waiting", "running")]
            if unfinished:  # said once; the lanes after it are marked stopped below
                unfinished[0].state = f"error: {_refusal(exc)}"
        for lane in lanes:
            if lane.state in ("waiting", "running"):
                lane.state = "stopped"
        yield

    return run_lanes
