"""An Engine in a process of its own, driven from another over a pipe: `EngineProcess`.

A web server shares its process with the engine otherwise: every page load, file open and API call of every
visitor takes the interpreter lock and the cores the decoding thread is timed on, so one visitor reloading a
page in a loop changes another's measured speedups. Here the models live in a child process that does nothing
else; the server process only reads plain values (steps, results) off the pipe.

The proxy offers what the app asks of an engine: its facts (preset, device name, methods, drafter labels,
draft caps, read once when the child is ready), `requests` (checked here by those facts and the child's tokenizer,
so a request arrives checked and the child checks nothing again), `stream` (steps as they finish; closing the
generator stops the run in the child between two steps), `generate`, `encode_prompt`, `target_entropy`, and
`call(fn, ...)`, which runs a module-level function `fn(engine, ...)` in the child (a sweep, the distribution
check) and returns its plain result. One job runs at a time, in the order asked; `encode_prompt`, which checks a
prompt before a run, goes over a second pipe and never waits behind a job. A job given `stop` (a threading.Event,
as the engine's own functions take) is stopped between two steps in the child once the event is set: the proxy
watches it and says so over the second pipe, and the job raises Stopped here as it would in process.

Torch-free on import: the child imports the engine (and torch); this module needs only the standard library and
the engine's plain types.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator

from .contract.interface import KnownFacts
from .contract.presets import PRESETS, Preset
from .contract.types import EngineError, GenerationConfig, Request, RunResult, Step, Stopped, as_request

_QUICK = frozenset({"encode_prompt"})  # calls served by the child's second thread, beside a running job
_JOBS = frozenset({"generate", "target_entropy", "warm_up"})  # Engine methods the proxy forwards as jobs


def _facts(engine) -> dict:
    """What the proxy keeps of the engine, read once: nothing of it changes while the engine runs."""
    methods = engine.methods()
    return {"preset": engine.preset, "device_name": engine.device_name, "device_type": engine.device.type,
            "methods": methods, "eos_id": engine.eos_id,
            "labels": {(m, hot): engine.drafter_label(m, 1.0 if hot else 0.0) for m in methods for hot in (False, True)},
            "caps": {m: engine.max_drafts(m) for m in methods}}


def _refuse(name: str):
    raise EngineError(f"the engine's process does not serve {name!r}")


def _reply(conn, work: Callable[[], object]) -> None:
    """Run `work` and send its result, or the one line of an EngineError, or any other failure's repr."""
    try:
        conn.send(("ok", work()))
    except Stopped as exc:
        conn.send(("stopped", str(exc)))
    except EngineError as exc:
        conn.send(("error", str(exc)))
    except Exception as exc:  # noqa: BLE001 - the server shows it as one line; the child goes on serving
        conn.send(("failure", f"{type(exc).__name__}: {exc}"))


class _Jobs:
    """The child's running job: its number and the stop event it was given (None: no stop asked for). A stop may
    arrive before its job has started (the job's function is still being imported): it is kept for it."""

    def __init__(self):
        self.number, self.stop, self.stopped = 0, None, 0  # stopped: the latest job number a stop was asked for
        self.lock = threading.Lock()

    def start(self, stoppable: bool) -> dict:
        with self.lock:
            self.number += 1
            self.stop = threading.Event() if stoppable else None
            if self.stop is not None and self.stopped == self.number:
                self.stop.set()
            return {"stop": self.stop} if stoppable else {}

    def stop_job(self, number: int) -> None:
        with self.lock:
            self.stopped = max(self.stopped, number)
            if number == self.number and self.stop is not None:  # a stop for a job that has ended does nothing
                self.stop.set()


def _serve_quick(conn, engine, jobs: _Jobs) -> None:
    while True:
        try:
            name, args = conn.recv()
        except EOFError:
            return
        if name == "stop":  # no answer: the job itself answers, Stopped
            jobs.stop_job(*args)
            continue
        _reply(conn, lambda: getattr(engine, name)(*args) if name in _QUICK else _refuse(name))


def _stream(conn, engine, request: Request) -> None:
    """Send each step as it finishes; a "stop" from the proxy ends the run between two steps."""
    steps = engine.stream(request)
    try:
        for step in steps:
            conn.send(("step", step))
            if conn.poll() and conn.recv()[0] == "stop":
                break
    except EngineError as exc:
        conn.send(("error", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001
        conn.send(("failure", f"{type(exc).__name__}: {exc}"))
        return
    finally:
        steps.close()
    conn.send(("end", None))


def serve(jobs, quick, preset: str | Preset, device: str, threads: int | None, warm_up: bool,
          cuda_graphs: str = "auto") -> None:
    """The child's life: load the engine, say it is ready (with its facts), then serve jobs until the pipe
    closes. A Preset (an operator's own pair, checked in the parent) is registered here first: the child is a
    fresh interpreter that knows only the shipped presets by name."""
    from .loop import Engine

    if isinstance(preset, Preset):
        PRESETS[preset.name] = preset
        preset = preset.name
    try:
        engine = Engine.load(preset, device, threads=threads, cuda_graphs=cuda_graphs)
        if warm_up:
            engine.warm_up()
    except EngineError as exc:
        jobs.send(("error", str(exc)))
        return
    jobs.send(("ready", _facts(engine)))
    running = _Jobs()
    threading.Thread(target=_serve_quick, args=(quick, engine, running), name="speclab-engine-quick",
                     daemon=True).start()
    while True:
        try:
            kind, payload = jobs.recv()
        except EOFError:
            return
        if kind == "stream":
            running.start(False)
            _stream(jobs, engine, *payload)
        elif kind in ("call", "method"):
            target, args, kwargs, stoppable = payload
            kwargs = {**kwargs, **running.start(stoppable)}
            if kind == "method":
                work = getattr(engine, target) if target in _JOBS else (lambda *a, **k: _refuse(target))
            else:
                work = lambda *a, **k: target(engine, *a, **k)  # noqa: E731
            _reply(jobs, lambda: work(*args, **kwargs))
        elif kind == "stop":  # a stop that arrived after its run had ended: nothing to stop
            continue


class EngineProcess(KnownFacts):
    """The engine of one preset, loaded and run in a child process (module docstring). preset: a shipped preset's
    name, or a Preset itself (an operator's own pair, engine/measure/pair.py), which the child registers."""

    def __init__(self, preset: str | Preset, device: str = "auto", threads: int | None = None, warm_up: bool = True,
                 cuda_graphs: str = "auto"):
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads or locks inherited
        self._jobs, child_jobs = context.Pipe()
        self._quick, child_quick = context.Pipe()
        self._process = context.Process(target=serve, args=(child_jobs, child_quick, preset, device, threads, warm_up,
                                                            cuda_graphs), name="speclab-engine", daemon=True)
        self._process.start()
        child_jobs.close()
        child_quick.close()
        self._job_lock, self._quick_lock = threading.Lock(), threading.Lock()
        self._number = 0  # jobs sent, streams included: the child numbers them alike
        kind, facts = self._receive(self._jobs)
        if kind != "ready":
            self.close()
            raise EngineError(facts)
        self.preset, self.device_name, self.device_type = facts["preset"], facts["device_name"], facts["device_type"]
        self.eos_id = facts["eos_id"]
        self._methods, self._labels, self._caps = facts["methods"], facts["labels"], facts["caps"]

    # --- the facts ------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The child's process id (where the models run)."""
        return self._process.pid

    # --- the work -------------------------------------------------------------------------------------

    def stream(self, request: Request | str, config: GenerationConfig | None = None) -> Iterator[Step]:
        """The steps of a checked request (or of a prompt and config made into one here, as Engine.stream does) as
        the child finishes them; closing this generator early stops the run there. The child checks nothing again."""
        request = as_request(self, request, config)
        return self._stream(request)

    def _stream(self, request: Request) -> Iterator[Step]:
        with self._job_lock:
            self._jobs.send(("stream", (request,)))
            self._number += 1
            ended = False
            try:
                while True:
                    kind, value = self._receive(self._jobs)
                    if kind == "step":
                        yield value
                    elif kind == "end":
                        ended = True
                        return
                    else:
                        ended = True
                        self._raise(kind, value)
            finally:
                if not ended:  # closed early: stop the child's run and read what it sent until it did
                    self._jobs.send(("stop", None))
                    while self._receive(self._jobs)[0] == "step":
                        pass

    def generate(self, request: Request | str, config: GenerationConfig | None = None,
                 stop: threading.Event | None = None) -> RunResult:
        return self._job("method", "generate", (as_request(self, request, config),), {}, stop)

    def target_entropy(self, prompt_ids, output_ids, temperature: float) -> list[float]:
        return self._job("method", "target_entropy", (prompt_ids, output_ids, temperature), {})

    def warm_up(self) -> None:
        self._job("method", "warm_up", (), {})

    def call(self, fn: Callable, *args, stop: threading.Event | None = None, **kwargs):
        """fn(engine, *args, **kwargs) run in the child, where the models are; fn must be a module-level function
        (it travels by name) and its arguments and result plain values. With `stop`, fn is given a stop event of
        the child's, set once `stop` is. A function of the app's is refused: the engine's process imports no app
        module (its measurements live under engine/measure)."""
        module = getattr(fn, "__module__", None) or ""
        if module == "app" or module.startswith("app."):
            raise EngineError(f"{module}.{getattr(fn, '__qualname__', fn)} is the app's: the engine's process runs "
                              f"engine functions only")
        return self._job("call", fn, args, kwargs, stop)

    def encode_prompt(self, prompt: str) -> list[int]:
        with self._quick_lock:
            self._quick.send(("encode_prompt", (prompt,)))
            return self._result(*self._receive(self._quick))

    def close(self) -> None:
        """End the child (also when the server exits: it is a daemon)."""
        for conn in (self._jobs, self._quick):
            conn.close()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.terminate()

    # --- the pipe -------------------------------------------------------------------------------------

    def _job(self, kind: str, target, args: tuple, kwargs: dict, stop: threading.Event | None = None):
        with self._job_lock:
            self._jobs.send((kind, (target, args, kwargs, stop is not None)))
            self._number += 1
            if stop is None:
                return self._result(*self._receive(self._jobs))
            done = threading.Event()
            threading.Thread(target=self._pass_stop, args=(stop, done, self._number), daemon=True,
                             name="speclab-engine-stop").start()
            try:
                return self._result(*self._receive(self._jobs))
            finally:
                done.set()

    def _pass_stop(self, stop: threading.Event, done: threading.Event, number: int) -> None:
        """Watch `stop` while job `number` runs; once it is set, tell the child to stop that job."""
        while not done.is_set():
            if stop.wait(0.02):
                with self._quick_lock:
                    self._quick.send(("stop", (number,)))
                return

    def _receive(self, conn):
        try:
            return conn.recv()
        except (EOFError, OSError):
            raise EngineError("the engine's process has ended; restart the server") from None

    def _result(self, kind: str, value):
        if kind == "ok":
            return value
        self._raise(kind, value)

    @staticmethod
    def _raise(kind: str, value: str):
        if kind == "stopped":
            raise Stopped(value)
        if kind == "error":
            raise EngineError(value)
        raise RuntimeError(f"the engine's process failed: {value}")


def run_on(engine, fn: Callable, *args, **kwargs):
    """fn(engine, *args, **kwargs) where the engine's models are: in its child process for an EngineProcess,
    here for an Engine. Whole measurements (sweeps, checks) go this way, so only their plain results travel. Any
    other engine whose models run elsewhere offers `call` too (app/hosting/zerogpu.py: a ZeroGPU Space's GPU calls)."""
    if isinstance(engine, EngineProcess) or callable(getattr(engine, "call", None)):
        return engine.call(fn, *args, **kwargs)
    return fn(engine, *args, **kwargs)
