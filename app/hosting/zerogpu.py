"""The engine on a Hugging Face ZeroGPU Space: every computation that needs the models inside a `spaces.GPU` call.

On ZeroGPU the app's own process has no GPU: `spaces` patches torch there so that loading "on CUDA" works, and
answers the GPU's name and memory with stand-ins. A function decorated with `spaces.GPU` runs in a worker, a fork
of the app's process that holds a real GPU for the call; its arguments and results (every item a generator
yields) are pickled across; a worker may serve several calls in turn, or be new. ZeroGPU asks each call for its
duration first, refuses one past what the visitor's quota or its cap allow, and aborts one that runs past it.

`ZeroGPUEngine` wraps the loaded engine so that nothing the app asks of it runs a model in the app's process:

- `stream` (a Compare lane, one GPU call per lane), `generate`, `target_entropy` and `call(fn, ...)` (the Why
  tab's sweeps and checks, a lesson point's "Run it live": app/tabs/why.py sends them through engine/process.py's
  `run_on`) each run inside one GPU call. The facts the page needs before any run (methods, drafter labels, draft
  caps) and `encode_prompt` (the tokenizer) are read in the app's process: no model runs for them. So a run's
  checked requests (`requests`: each config validated, the prompt encoded once) are made there too, and each
  crosses to its GPU call whole; the worker checks nothing again.
- Stop and the run limit reach the worker within one step: each call gets a run id, and the app's process writes
  a flag file for it (`StopFlags`) the moment the call's stop event is set; the worker reads it between two steps
  (a stream) or at every step (`stop.is_set()` in the engine's measurements and runs). Closing a ZeroGPU
  generator alone would not do: the worker runs on until it reaches its next item, and a measurement has none.
- Each call declares a duration computed from measured costs (`CostBook`, docs/hosting.md gives the basis), and the
  worker stops itself shortly before it, so a run that would overrun ends as "stopped" instead of being aborted.
  `spaces` schedules a call for the seconds it asks times its card's `duration_factor` (1.5 on an RTX PRO 6000
  Blackwell), so a call asks for its cost divided by the factor, and never more than an anonymous visitor's quota
  allows once multiplied. A preset with no cost measured yet starts from a per-token figure estimated for its
  shape (`estimated_per_token_s`), not the cap.
- The target's weights are joined for its fused forward inside the GPU call (engine/loop.py Engine.fused_target,
  built on first use), never in the app's process: `spaces` would move a joined tensor and each slice of it
  apart, every projection twice.
- A worker warms up, in its own process, only the methods its call runs, once; DSpark's verify-speed profile is
  measured in the first worker only and then stored (in the app's engine, so later forks inherit it, and on disk).
- The device's name is read inside the GPU call and shown from then on; before the first run the page names no
  device (the app's process would name the stand-in).

Torch-free: the app's process never imports torch; the worker runs the engine it inherited through the fork.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.contract.interface import KnownFacts
from engine.contract.types import EngineError, GenerationConfig, Request, RunResult, Step, Stopped, as_request

# ZeroGPU's caps and the costs a call's duration is computed from (docs/hosting.md, "How long a GPU call asks for").
GPU_CAP_S = 120  # the most one call is scheduled for: an anonymous visitor's daily quota is 2 minutes
WORKER_START_S = 10.0  # a new worker: the fork, the weights moved to its GPU, CUDA's context (an allowance)
PROFILE_S = 10.0  # DSpark's verify-speed profile, 90 timed forwards, when none is stored yet (an allowance)
MARGIN = 2.0  # measured costs are multiplied by this: a new worker's first calls, a shared GPU
WARM_UP_TOKENS = 8  # a method's warm-up run in a new worker (engine/loop.py Engine.warm_up)
# Seconds of GPU per new token of the slowest lane, measured on a GPU per preset: where a Space starts before it has
# measured its own (CostBook); a preset not listed here starts from estimated_per_token_s.
MEASURED_PER_TOKEN_S = {"tiny": 0.11}  # one H200, 2026-12-04: a plain step 60 ms, the AR tree's 440 ms at tau 4.3
# The estimate's basis for an unmeasured shape: the slowest lane (a tree's) runs about this many forwards a new
# token, each a launch-bound part (kernels a layer, each this long to launch) and a bandwidth-bound one (the
# weights read once, bfloat16, at a conservative share of a data-centre GPU's bandwidth).
FORWARDS_PER_TOKEN = 8
KERNELS_PER_LAYER = 15
LAUNCH_S = 10e-6
WEIGHT_BYTES_PER_S = 1.0e12
MEASURED_ON = {"tiny": "one NVIDIA H200 (docs/benchmarks.md, the trees on a GPU)"}
WORKER_GRACE_S = 2.0  # the worker stops itself this long before its declared duration ends
STOPS_FOLDER = "speclab-stops"
COSTS_FILE = "zerogpu_costs.json"
KEPT = 16  # measured costs kept per preset and kind


# --- stop flags ----------------------------------------------------------------------------------------

class StopFlag:
    """The worker's side of a run's stop: a threading.Event (the engine's runs and measurements call is_set at
    every step) that is also set once the app's process has written the run's flag file, or once the call's
    time is up."""

    def __init__(self, path: Path, deadline: float):
        self.path, self.deadline, self.reason = path, deadline, ""
        self._event = threading.Event()

    def is_set(self) -> bool:
        if not self._event.is_set():
            if self.path.exists():
                self.reason = "stopped"
                self._event.set()
            elif time.monotonic() >= self.deadline:
                self.reason = "out of time"
                self._event.set()
        return self._event.is_set()

    def set(self) -> None:
        self.reason = self.reason or "stopped"
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(0.005)
        return True


class StopFlags:
    """Run ids and their flag files, in a folder the app's process and its forks share (the same machine)."""

    def __init__(self, folder: Path | None = None):
        default = Path(tempfile.gettempdir()) / STOPS_FOLDER / str(os.getpid())
        self.folder = Path(folder) if folder is not None else default
        self.folder.mkdir(parents=True, exist_ok=True)

    def new(self) -> str:
        return uuid.uuid4().hex

    def path(self, run: str) -> Path:
        if not run.isalnum():
            raise ValueError(f"not a run id: {run!r}")
        return self.folder / run

    def set(self, run: str) -> None:
        self.path(run).touch()

    def clear(self, run: str) -> None:
        self.path(run).unlink(missing_ok=True)

    def flag(self, run: str, deadline: float) -> StopFlag:
        return StopFlag(self.path(run), deadline)

    def watch(self, run: str, stop: threading.Event | None) -> threading.Event:
        """Write the run's flag the moment `stop` is set (a thread waiting on it); set the returned event once
        the call has ended, and the watch ends."""
        done = threading.Event()
        if stop is None:
            return done

        def pass_on():
            while not done.is_set():
                if stop.wait(0.25):
                    if not done.is_set():
                        self.set(run)
                    return

        threading.Thread(target=pass_on, name="speclab-zerogpu-stop", daemon=True).start()
        return done


# --- what calls cost -------------------------------------------------------------------------------------

class CostBook:
    """Costs measured inside GPU calls, per preset: seconds per new token of a lane, seconds of each kind of
    measurement, and DSpark's verify-speed profile; kept in memory and in a JSON file (SPECLAB_CACHE, default
    ~/.cache/speclab), so a restarted Space starts from what it measured before. A different GPU forgets them."""

    def __init__(self, path: Path | None = None):
        folder = Path(os.environ.get("SPECLAB_CACHE") or Path.home() / ".cache" / "speclab")
        self.path = Path(path) if path is not None else folder / COSTS_FILE
        self._lock = threading.Lock()
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self._book = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self._book = {}

    def _entry(self, preset: str) -> dict:
        entry = self._book.get(preset)
        if not isinstance(entry, dict):
            entry = self._book[preset] = {}
        return entry

    def device(self, preset: str, device: str) -> None:
        """The device a worker named: costs measured on another are dropped."""
        with self._lock:
            if self._entry(preset).get("device") != device:
                self._book[preset] = {"device": device}
                self._save()

    def per_token_s(self, preset: str) -> float | None:
        """The slowest measured seconds per new token of the recent lanes here, or None before any (a figure
        measured elsewhere is where a Space starts, never a floor under what it measures)."""
        with self._lock:
            kept = self._entry(preset).get("per_token_s") or []
        return max((v for v in kept if isinstance(v, (int, float))), default=None)

    def call_s(self, preset: str, name: str) -> float | None:
        with self._lock:
            kept = (self._entry(preset).get("calls") or {}).get(name) or []
        return max((v for v in kept if isinstance(v, (int, float))), default=None)

    def profile(self, preset: str) -> list[float] | None:
        with self._lock:
            value = self._entry(preset).get("verify_steps_per_s")
        return list(value) if isinstance(value, list) and value else None

    def add_tokens(self, preset: str, seconds: float, tokens: int) -> None:
        if tokens > 0 and seconds > 0:
            self._add(preset, "per_token_s", None, seconds / tokens)

    def add_call(self, preset: str, name: str, seconds: float) -> None:
        if seconds > 0:
            self._add(preset, "calls", name, seconds)

    def add_profile(self, preset: str, profile: list[float]) -> None:
        with self._lock:
            self._entry(preset)["verify_steps_per_s"] = [float(v) for v in profile]
            self._save()

    def _add(self, preset: str, kind: str, name: str | None, value: float) -> None:
        with self._lock:
            entry = self._entry(preset)
            if name is None:
                entry[kind] = [*(entry.get(kind) or []), round(value, 6)][-KEPT:]
            else:
                calls = entry.setdefault(kind, {})
                calls[name] = [*(calls.get(name) or []), round(value, 3)][-KEPT:]
            self._save()

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(self._book, indent=1) + "\n", encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError:
            pass  # kept in memory only


def estimated_per_token_s(config) -> float:
    """Seconds per new token of the slowest lane for a target of `config`'s shape (a transformers config), before
    any is measured: FORWARDS_PER_TOKEN forwards, each its layers' kernel launches and its weights read once."""
    layers, hidden = config.num_hidden_layers, config.hidden_size
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    per_layer = hidden * head_dim * (2 * heads + 2 * kv_heads) + 3 * hidden * config.intermediate_size
    parameters = layers * per_layer + config.vocab_size * hidden
    forward_s = layers * KERNELS_PER_LAYER * LAUNCH_S + 2 * parameters / WEIGHT_BYTES_PER_S
    return FORWARDS_PER_TOKEN * forward_s


def asked(seconds: float, cap_s: float, factor: float) -> int:
    """What a call asks for to be scheduled `seconds`: `spaces` multiplies what is asked by its card's duration
    factor; never more than the cap (an anonymous visitor's quota) allows once multiplied."""
    return int(min(math.floor(cap_s / factor), math.ceil(seconds / factor)))


def lane_seconds(per_token_s: float, tokens: int, warm_ups: int, profile_stored: bool,
                 cap_s: float = GPU_CAP_S, factor: float = 1.0) -> int:
    """Seconds one lane's GPU call asks for: a new worker's start, the warm-up runs of its method, DSpark's profile
    when none is stored, and the lane's tokens (the prefill counted as one), each token at MARGIN times its cost
    (measured, else the start figure), divided by spaces' duration factor and within the cap (`asked`)."""
    seconds = (WORKER_START_S + (0.0 if profile_stored else PROFILE_S)
               + MARGIN * per_token_s * (warm_ups * WARM_UP_TOKENS + tokens + 1))
    return asked(seconds, cap_s, factor)


def call_seconds(measured_s: float | None, profile_stored: bool, cap_s: float = GPU_CAP_S,
                 factor: float = 1.0) -> int:
    """Seconds a measurement's GPU call asks for: a new worker's start and MARGIN times the same measurement's
    slowest measured time here (its warm-up included), as `asked`; all the cap allows until it has been measured
    once (a measurement's cost has no shape to estimate it from)."""
    if measured_s is None:
        return asked(cap_s, cap_s, factor)
    return asked(WORKER_START_S + (0.0 if profile_stored else PROFILE_S) + MARGIN * measured_s, cap_s, factor)


def worker_limit_s(declared_s: float, factor: float = 1.0) -> float:
    """How long the worker runs before it stops itself: WORKER_GRACE_S short of the duration it is scheduled for
    (what it asked for times spaces' duration factor)."""
    scheduled = declared_s * factor
    return max(scheduled * 0.5, scheduled - WORKER_GRACE_S)


def spaces_duration_factor() -> float:
    """The duration factor `spaces` applies on this Space's card (its own table, read the way it reads it), 1.0
    where the package is not installed or names none."""
    import warnings

    try:
        from spaces.zero.config import get_config

        with warnings.catch_warnings():  # off ZeroGPU it warns that it found no driver information
            warnings.simplefilter("ignore")
            return float(get_config()["duration_factor"])
    except Exception:  # noqa: BLE001 - no spaces, no driver information, another release's table: no factor
        return 1.0


def _declared(run: str, declared_s: int, *args, **kwargs) -> int:
    """ZeroGPU's `duration`, called with the call's own arguments: the seconds the app's process computed."""
    return declared_s


def no_gpu(task=None, **_):
    """Stands in for `spaces.GPU` where there is no ZeroGPU: returns the function unchanged."""
    if callable(task):
        return task
    return lambda fn: fn


# --- module-level work, sent to the worker by name --------------------------------------------------------

def _generate(engine, request: Request, stop=None) -> RunResult:
    return engine.generate(request, stop=stop)


def _target_entropy(engine, prompt_ids: list[int], output_ids: list[int], temperature: float, stop=None) -> list[float]:
    return engine.target_entropy(prompt_ids, output_ids, temperature)


def _name(fn: Callable) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


class ZeroGPUEngine(KnownFacts):
    """The engine, every model computation in a GPU call of `gpu` (`spaces.GPU` on ZeroGPU; module docstring)."""

    def __init__(self, engine, gpu: Callable = no_gpu, costs: CostBook | None = None, stops: StopFlags | None = None,
                 cap_s: float = GPU_CAP_S, duration_factor: float | None = None):
        self._engine, self.preset, self.eos_id = engine, engine.preset, getattr(engine, "eos_id", None)
        self._methods = list(engine.methods())
        self._labels = {(m, hot): engine.drafter_label(m, 1.0 if hot else 0.0) for m in self._methods
                        for hot in (False, True)}
        self._caps = {m: engine.max_drafts(m) for m in self._methods}
        self.costs = costs if costs is not None else CostBook()
        self.stops, self.cap_s = stops if stops is not None else StopFlags(), cap_s
        self.factor = duration_factor if duration_factor is not None else (
            1.0 if gpu is no_gpu else spaces_duration_factor())
        # seconds per new token until the Space has measured its own: the table's figure, else its shape's estimate
        self.start_per_token_s = MEASURED_PER_TOKEN_S.get(self.preset) or estimated_per_token_s(engine.target.config)
        stored = self.costs.profile(self.preset)
        if stored is not None:
            self._keep_profile(stored)
        # the GPU's name (read inside a GPU call); in the worker: the process that warmed up, and what it warmed
        self._device_name, self._warm_pid, self._warm = "", None, set()
        self._stream_on_gpu = gpu(duration=_declared)(self._worker_stream)
        self._call_on_gpu = gpu(duration=_declared)(self._worker_call)

    # --- facts (the app's process) ------------------------------------------------------------------------

    @property
    def device_name(self) -> str:
        """The GPU a worker named (read inside a GPU call); before the first run, no device is named."""
        return self._device_name or "ZeroGPU (the GPU is named after the first run)"

    def encode_prompt(self, prompt: str) -> list[int]:
        return self._engine.encode_prompt(prompt)  # the tokenizer only

    def warm_up(self) -> None:
        """Nothing here: the app's process has no GPU; each worker warms up what its call runs, once."""

    def close(self) -> None:
        pass

    # --- durations --------------------------------------------------------------------------------------

    def stream_seconds(self, config: GenerationConfig) -> int:
        warm_ups = 2 if config.temperature > 0 else 1  # the method's run at temperature 0 and above it
        return lane_seconds(self.costs.per_token_s(self.preset) or self.start_per_token_s, config.max_new_tokens,
                            warm_ups, self.costs.profile(self.preset) is not None, self.cap_s, self.factor)

    def call_seconds(self, fn: Callable) -> int:
        return call_seconds(self.costs.call_s(self.preset, _name(fn)), self.costs.profile(self.preset) is not None,
                            self.cap_s, self.factor)

    # --- the work (the app's process asks, a worker runs) ------------------------------------------------

    def stream(self, request: Request | str, config: GenerationConfig | None = None) -> Iterator[Step]:
        return self.stream_until(as_request(self, request, config), None)

    def stream_until(self, request: Request, stop: threading.Event | None) -> Iterator[Step]:
        """One checked request (KnownFacts.requests, here) in one GPU call, each step as the worker finishes it;
        once `stop` is set (or this generator is closed) the worker ends after its current step. EngineError from
        the engine; Stopped when the worker ran out of the time it asked for."""
        run = self.stops.new()
        declared = self.stream_seconds(request.config)
        watching = self.stops.watch(run, stop)
        work = self._stream_on_gpu(run, declared, request)
        try:
            for kind, value in work:
                if kind == "step":
                    yield value
                elif kind == "facts":
                    self._learn(value)
                elif kind == "cost":
                    self.costs.add_tokens(self.preset, *value)
                elif kind == "stopped":
                    if value == "out of time":
                        raise Stopped(f"stopped after {declared} s, the GPU time this lane asked for")
                    return
                elif kind == "error":
                    raise EngineError(value)
        finally:
            self.stops.set(run)  # closed early: the worker ends after its current step
            watching.set()
            work.close()
            self.stops.clear(run)

    def generate(self, request: Request | str, config: GenerationConfig | None = None, stop=None) -> RunResult:
        request = as_request(self, request, config)
        return self._call(_generate, (request,), {}, stop, self.stream_seconds(request.config))

    def target_entropy(self, prompt_ids: list[int], output_ids: list[int], temperature: float) -> list[float]:
        return self._call(_target_entropy, (list(prompt_ids), list(output_ids), temperature), {}, None,
                          self.stream_seconds(GenerationConfig(max_new_tokens=1)))

    def call(self, fn: Callable, *args, stop: threading.Event | None = None, **kwargs):
        """fn(engine, *args, stop=..., **kwargs) in one GPU call (fn module-level: it travels by name; its
        arguments and result plain values), as EngineProcess.call does in the engine's process."""
        return self._call(fn, args, kwargs, stop, self.call_seconds(fn), pass_stop=stop is not None)

    def _call(self, fn: Callable, args: tuple, kwargs: dict, stop, declared: int, pass_stop: bool = True):
        run = self.stops.new()
        watching = self.stops.watch(run, stop)
        try:
            kind, value, facts, seconds = self._call_on_gpu(run, declared, fn, args, kwargs, pass_stop)
        finally:
            watching.set()
            self.stops.clear(run)
        self._learn(facts)
        if kind == "ok" and fn not in (_generate, _target_entropy):
            self.costs.add_call(self.preset, _name(fn), seconds)
        if kind == "ok":
            return value
        if kind == "stopped":
            raise Stopped(f"stopped after {declared} s, the GPU time this measurement asked for"
                          if value == "out of time" else "stopped")
        raise EngineError(value)

    def _learn(self, facts: dict) -> None:
        """What a worker read on its GPU: the device's name, and the verify-speed profile it measured."""
        if facts.get("device_name"):
            self.costs.device(self.preset, facts["device_name"])
            self._device_name = facts["device_name"]
        if facts.get("verify_steps_per_s") and self.costs.profile(self.preset) is None:
            self.costs.add_profile(self.preset, facts["verify_steps_per_s"])
            self._keep_profile(facts["verify_steps_per_s"])

    def _keep_profile(self, profile: list[float]) -> None:
        """Give the app's engine the stored profile, so every later fork has it and never measures it again."""
        if getattr(self._engine, "_verify_steps_per_s", False) is None:
            self._engine._verify_steps_per_s = list(profile)

    # --- in the worker ------------------------------------------------------------------------------------

    def _ready(self, methods: list[str], temperatures: tuple[float, ...], stop: StopFlag) -> None:
        """Warm up `methods` in this process, once each: first-call costs stay out of the measured run. Stopped
        once `stop` is set, as the run itself would be."""
        if self._warm_pid != os.getpid():
            self._warm_pid, self._warm = os.getpid(), set()
        for method in methods:
            for temperature in temperatures:
                if (method, temperature) not in self._warm:
                    self._engine.generate("def f(x):\n    return x\n",
                                          GenerationConfig(method=method, max_new_tokens=WARM_UP_TOKENS,
                                                           temperature=temperature), stop)
                    self._warm.add((method, temperature))

    def _facts(self, had_profile: bool) -> dict:
        """What this worker read on its GPU: the device's name, and DSpark's profile when it measured it."""
        facts = {"device_name": self._engine.device_name, "pid": os.getpid()}
        profile = getattr(self._engine, "_verify_steps_per_s", None)
        if profile is not None and not had_profile:
            facts["verify_steps_per_s"] = [float(v) for v in profile]
        return facts

    def _has_profile(self) -> bool:
        return getattr(self._engine, "_verify_steps_per_s", None) is not None

    def _worker_stream(self, run: str, declared_s: int, request: Request):
        """The GPU call of one lane: its facts, each step, then what it cost; ends after the step in which its stop
        flag appeared or its time ran out."""
        flag = self.stops.flag(run, time.monotonic() + worker_limit_s(declared_s, self.factor))
        had_profile = self._has_profile()
        try:
            self._ready([request.config.method], (0.0, 1.0) if request.config.temperature > 0 else (0.0,), flag)
        except Stopped:
            yield "facts", self._facts(had_profile)
            yield "stopped", flag.reason or "stopped"
            return
        except EngineError as exc:
            yield "facts", self._facts(had_profile)
            yield "error", str(exc)
            return
        yield "facts", self._facts(had_profile)
        started, tokens = time.monotonic(), 0
        steps = self._engine.stream(request)
        try:
            for step in steps:
                tokens += len(step.committed)
                yield "step", step
                if flag.is_set():
                    yield "stopped", flag.reason
                    return
        except EngineError as exc:
            yield "error", str(exc)
            return
        finally:
            steps.close()
        yield "cost", (time.monotonic() - started, tokens)

    def _worker_call(self, run: str, declared_s: int, fn: Callable, args: tuple, kwargs: dict, pass_stop: bool):
        """The GPU call of a measurement or a whole run: ("ok" | "stopped" | "error", value, facts, seconds)."""
        flag = self.stops.flag(run, time.monotonic() + worker_limit_s(declared_s, self.factor))
        started, had_profile = time.monotonic(), self._has_profile()
        try:
            self._ready([args[0].config.method] if fn is _generate else [] if fn is _target_entropy else self._methods,
                        (0.0,), flag)
            result = "ok", fn(self._engine, *args, **({"stop": flag} if pass_stop else {}), **kwargs)
        except Stopped:
            result = "stopped", flag.reason or "stopped"
        except EngineError as exc:
            result = "error", str(exc)
        return (*result, self._facts(had_profile), time.monotonic() - started)
