"""The lanes' device work where a Hugging Face ZeroGPU Space wants it: inside `@spaces.GPU`.

On ZeroGPU a decorated function runs in a forked process that holds a GPU for the call: its arguments and
everything it yields are pickled across. So the decorated generator (`lane_batches`) takes plain values
(the prompt and the lanes' GenerationConfigs; the engine comes with the fork, never as an argument) and
yields plain values: app/runner.py's LaneEvents, the same the page's own runner applies. Everything else stays
in the app's process:
the LaneRun objects, the Stop event (Stop closes the GPU generator, which ZeroGPU turns into a stop in the
worker), and all rendering, so drawing never sits on the GPU clock or the visitor's GPU quota.

`lane_runner` returns a drop-in for app/runner.py's `run_lanes`; off ZeroGPU (no `spaces` package, or
`spaces` on a machine that is not ZeroGPU, where `spaces.GPU` is a no-op) it runs in the calling thread
exactly as `run_lanes` does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import gradio as gr

from engine.contract.interface import EngineLike
from engine.contract.types import GenerationConfig

from ..runner import LaneEvent, LaneRun, lane_events

# The GPU time a run asks for: a fixed part (ZeroGPU moving the weights to its GPU, a first warm-up in a new
# worker, DSpark's verify-speed profile) plus a budget per token to write; capped, since a shorter request
# gets a visitor a GPU sooner (ZeroGPU queues long requests behind short ones) and must fit their daily quota.
GPU_BASE_S = 15.0
GPU_PER_TOKEN_S = 0.05
GPU_CAP_S = 120


def zero_gpu() -> bool:
    """Whether this process runs on a ZeroGPU Space (the variable the `spaces` package reads)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def gpu_seconds(configs: list[GenerationConfig]) -> int:
    """Seconds of GPU one run of these lanes asks for: 15 + 0.05 per token of every lane, at most 120."""
    tokens = sum(config.max_new_tokens for config in configs)
    return int(min(GPU_CAP_S, GPU_BASE_S + GPU_PER_TOKEN_S * tokens))


def no_gpu(task=None, **_):
    """Stands in for `spaces.GPU` where the package is not installed: returns the function unchanged."""
    if callable(task):
        return task
    return lambda fn: fn


def gpu_decorator() -> Callable:
    """`spaces.GPU` when the package is installed (a no-op itself off ZeroGPU), else `no_gpu`."""
    try:
        import spaces
    except ImportError:
        return no_gpu
    return spaces.GPU


def warm_up_once(engine) -> None:
    """Run the engine's warm-up once per process: on ZeroGPU the app's process has no GPU to warm up on,
    so each new GPU worker (a fork, with a copy of the engine) does it at the start of its first run, before
    any lane's clock starts. The process that warmed it is marked on the engine itself."""
    if getattr(engine, "warmed_in_process", None) != os.getpid():
        engine.warm_up()
        engine.warmed_in_process = os.getpid()


def lane_runner(engine: EngineLike, gpu: Callable = no_gpu) -> Callable[..., Iterator[None]]:
    """A `run_lanes(engine, prompt, lanes, stop)` whose device work runs inside `gpu(duration=...)`."""

    def lane_batches(prompt: str, configs: list[GenerationConfig]) -> Iterator[LaneEvent]:
        """The GPU work: the live pass's events (the caller stops it by closing it; no page to wait for)."""
        warm_up_once(engine)
        yield from lane_events(engine, prompt, configs, threading.Event(), settle_s=0.0)

    def duration(prompt: str, configs: list[GenerationConfig]) -> int:
        return gpu_seconds(configs)

    on_gpu = gpu(duration=duration)(lane_batches)

    def run_lanes(engine_: object, prompt: str, lanes: list[LaneRun], stop: threading.Event,
                  timing_runs: int | None = None) -> Iterator[None]:
        """As app/runner.py's run_lanes: advance the lanes in order, yielding after every batch of steps (each lane
        runs once here: `timing_runs` is not used)."""
        if engine_ is not engine:
            raise ValueError("this lane runner was built for another engine")
        work = on_gpu(prompt, [lane.config for lane in lanes])
        try:
            for event in work:
                lanes[event.index].apply(event)
                yield
                if stop.is_set():
                    break
        except gr.Error as exc:  # ZeroGPU's own refusals (quota, no GPU free, a worker that died)
            text = str(getattr(exc, "message", None) or exc).strip()
            message = text.splitlines()[0] if text else type(exc).__name__
            unfinished = [lane for lane in lanes if lane.state in ("waiting", "running")]
            if unfinished:  # said once; the lanes after it are marked stopped below
                unfinished[0].state = f"error: {message}"
        finally:
            work.close()  # on ZeroGPU this stops the worker after its current step
        for lane in lanes:
            if lane.state in ("waiting", "running"):
                lane.state = "stopped"
        yield

    return run_lanes
