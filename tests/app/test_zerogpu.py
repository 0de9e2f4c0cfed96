"""The engine on ZeroGPU (app/hosting/zerogpu.py, app/hosting/gpu.py), against a stand-in for ZeroGPU's worker model
that behaves as the `spaces` package's does where it matters: each call runs in a forked worker (a fresh one per
call here, the case that costs most); its arguments and every item it yields are pickled across; a generator the
caller stops reading runs on in the worker to its end (it is never told to stop); a call asking for more than the
cap is refused, and one that runs past its declared duration is aborted. In the app's process no model may run:
every module of the engine refuses a forward there."""

from __future__ import annotations

import inspect
import math
import io
import multiprocessing
import os
import pickle
import threading
import time
import types
from dataclasses import replace
from pathlib import Path

import gradio as gr
import pytest

from app.hosting import gpu, zerogpu
from app.run.runner import LaneRun, run_lanes
from engine.contract.types import GenerationConfig, Stopped
from engine.process import run_on

PROMPT = "def parse(self, text):\n"
# a target forward's pace in the worker (a GPU step), set by the tests that time a stop; from the moment the file
# "after" exists, where one is named
PACE = {"step_s": 0.0, "after": ""}


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        assert module.split(".")[0] != "torch", f"{module}.{name} crossed the GPU boundary"
        return super().find_class(module, name)


def across(data: bytes):
    """An item as the app's process receives it from the worker; refuses torch objects."""
    return PlainUnpickler(io.BytesIO(data)).load()


def _serve(fn, calls, results) -> None:
    """The worker: one call (arguments pickled), every item pickled back; a generator runs to its end."""
    args, kwargs = pickle.loads(calls.recv_bytes())
    try:
        if isinstance(work := fn(*args, **kwargs), types.GeneratorType):
            for item in work:
                results.send_bytes(pickle.dumps(("item", item)))
        else:
            results.send_bytes(pickle.dumps(("item", work)))
        results.send_bytes(pickle.dumps(("end", None)))
    except Exception as exc:  # noqa: BLE001 - as ZeroGPU, the worker's failure is said in the app's process
        results.send_bytes(pickle.dumps(("error", f"{type(exc).__name__}: {exc}")))


class StandInZeroGPU:
    """`spaces.GPU` as ZeroGPU runs it (module docstring): records each call's declared duration and its time."""

    def __init__(self, cap_s: float = 120, factor: float = 1.0):
        self.cap_s, self.declared, self.elapsed, self.aborted = cap_s, [], [], 0
        self.factor = factor  # the card's duration factor: a call is scheduled for what it asks times this
        self.context = multiprocessing.get_context("fork")

    def __call__(self, task=None, *, duration=None):
        def wrap(fn):
            def start(args, kwargs):
                declared = duration(*args, **kwargs) if callable(duration) else duration or 60
                self.declared.append(declared)
                declared *= self.factor
                if declared > self.cap_s:
                    raise gr.Error(f"The requested GPU duration ({declared}s) is larger than the maximum allowed")
                calls_out, calls_in = self.context.Pipe()
                results_in, results_out = self.context.Pipe(duplex=False)
                worker = self.context.Process(target=_serve, args=(fn, calls_in, results_out), daemon=True)
                worker.start()
                results_out.close()
                calls_out.send_bytes(pickle.dumps((args, kwargs)))
                return types.SimpleNamespace(worker=worker, results=results_in, declared=declared,
                                             started=time.monotonic(), ended=False)

            def receive(call):
                if not call.results.poll(max(0.0, call.declared - (time.monotonic() - call.started))):
                    call.worker.kill()  # past its duration: ZeroGPU aborts the task
                    call.ended = True
                    self.aborted += 1
                    raise gr.Error("GPU task aborted")
                kind, value = pickle.loads(call.results.recv_bytes())
                call.ended = kind != "item"
                if kind == "error":
                    raise gr.Error(f"ZeroGPU worker error: {value}")
                return kind, pickle.dumps(value)

            def finish(call):
                """The call returns only once the worker has ended (run on to its end, as nobody stops it)."""
                try:
                    while not call.ended:
                        receive(call)
                finally:
                    call.worker.join(5)
                    self.elapsed.append(time.monotonic() - call.started)

            if inspect.isgeneratorfunction(fn):
                def handler(*args, **kwargs):
                    call = start(args, kwargs)
                    try:
                        while (got := receive(call))[0] == "item":
                            yield across(got[1])
                    finally:
                        finish(call)
            else:
                def handler(*args, **kwargs):
                    call = start(args, kwargs)
                    try:
                        return across(receive(call)[1])
                    finally:
                        finish(call)
            return handler
        return wrap(task) if callable(task) else wrap


@pytest.fixture
def guarded(random_engine, tmp_path, monkeypatch):
    """The engine with every module refusing a forward in this process; in a worker, each target forward is
    written down (the time it began) and takes PACE["step_s"]. Yields the file of those times."""
    parent, log = os.getpid(), tmp_path / "forwards"
    monkeypatch.setattr(random_engine, "_verify_steps_per_s", random_engine.verify_steps_per_s())  # stored already

    def refuse_here(module, args):
        assert os.getpid() != parent, "a model ran in the app's process, outside a GPU call"

    def write_down(module, args):
        if os.getpid() != parent:
            with open(log, "a") as f:
                f.write(f"{time.monotonic()}\n")
            if not PACE["after"] or os.path.exists(PACE["after"]):
                time.sleep(PACE["step_s"])

    models = [random_engine.target, *random_engine.drafter_models.values(),
              *random_engine.sampled_drafter_models.values()]
    handles = [m.register_forward_pre_hook(refuse_here) for model in models for m in model.modules()]
    handles.append(random_engine.target.model.norm.register_forward_pre_hook(write_down))  # once a forward
    yield log
    for handle in handles:
        handle.remove()
    PACE.update(step_s=0.0, after="")


def zero_engine(engine, tmp_path, stand_in=None, **kwargs) -> zerogpu.ZeroGPUEngine:
    return zerogpu.ZeroGPUEngine(engine, stand_in or StandInZeroGPU(), costs=zerogpu.CostBook(tmp_path / "costs.json"),
                                 stops=zerogpu.StopFlags(tmp_path / "stops"), **kwargs)


def lanes_for(methods, max_new_tokens: int = 12) -> list[LaneRun]:
    base = GenerationConfig(max_new_tokens=max_new_tokens, drafts_per_step=3, scheduler="none")
    return [LaneRun(m, replace(base, method=m)) for m in methods]


def output_ids(lane: LaneRun) -> list[int]:
    return [token.id for step in lane.steps for token in step.committed]


def forwards_after(log, moment: float) -> int:
    return sum(float(line) > moment for line in log.read_text().split())


def many_runs(engine, prompt: str, runs: int, stop=None, started: str = "") -> int:
    """A measurement: `runs` whole runs of the baseline, stopped between any two steps; `started`: a file it
    creates as it starts (after the worker's warm-up)."""
    if started:
        Path(started).touch()
    for _ in range(runs):
        engine.generate(prompt, GenerationConfig(max_new_tokens=40), stop)
    return runs


def test_lanes_run_one_gpu_call_each_and_match_the_plain_runner(random_engine, guarded, tmp_path):
    stand_in = StandInZeroGPU()
    engine = zero_engine(random_engine, tmp_path, stand_in)
    methods = ["baseline", "eagle3", "dflash", "dspark"]
    behind = lanes_for(methods)
    for _ in gpu.lane_runner(engine)(engine, PROMPT, behind, threading.Event()):
        pass
    assert [lane.state for lane in behind] == ["done"] * len(methods)
    assert len(stand_in.declared) == len(methods) and not stand_in.aborted
    # every call's declared duration covers what it took, and stays within the cap
    assert all(took < declared <= zerogpu.GPU_CAP_S for took, declared in zip(stand_in.elapsed, stand_in.declared))
    assert [(lane.timing_runs, len(lane.rates)) for lane in behind] == [(1, 1)] * len(methods)
    with pytest.raises(AssertionError, match="outside a GPU call"):  # the guard holds in this process
        random_engine.generate(PROMPT, GenerationConfig(max_new_tokens=2))
    assert engine.costs.per_token_s("random") > 0  # measured in the calls, and the next durations use it


def test_outputs_behind_the_boundary_equal_the_plain_runner(random_engine, tmp_path):
    methods = ["baseline", "eagle3", "dspark"]
    behind, plain = lanes_for(methods), lanes_for(methods)
    engine = zero_engine(random_engine, tmp_path)
    for _ in gpu.lane_runner(engine)(engine, PROMPT, behind, threading.Event()):
        pass
    for _ in run_lanes(random_engine, PROMPT, plain, threading.Event(), timing_runs=1):
        pass
    assert [output_ids(lane) for lane in behind] == [output_ids(lane) for lane in plain]


def test_a_runs_requests_are_checked_in_the_apps_process_and_cross_whole(random_engine, tmp_path, monkeypatch):
    """The ZeroGPU engine makes a run's requests in the app's process (its facts and the tokenizer: no model runs),
    the prompt encoded once for every lane; each request crosses pickled to its GPU call, and the run's end says
    what it ran, DFlash's drafts per step cut to its trained block."""
    engine = zero_engine(random_engine, tmp_path)
    encoded, encode = [], random_engine.encode_prompt
    monkeypatch.setattr(random_engine, "encode_prompt", lambda prompt: (encoded.append(prompt), encode(prompt))[1])
    block = engine.max_drafts("dflash")
    configs = [GenerationConfig(method=m, max_new_tokens=6, drafts_per_step=block + 1) for m in ("baseline", "dflash")]
    lanes = [LaneRun(r.config.method, r.config, request=r) for r in engine.requests(PROMPT, configs)]
    end = list(gpu.lane_runner(engine)(engine, PROMPT, lanes, threading.Event()))[-1]
    assert encoded == [PROMPT] and [lane.state for lane in lanes] == ["done", "done"]
    assert [(lane.method, lane.drafts_per_step) for lane in end.lanes] == [("baseline", None), ("dflash", block)]


def test_stop_ends_a_lanes_gpu_work_within_a_step(random_engine, guarded, tmp_path):
    PACE["step_s"] = 0.05
    stop, lanes = threading.Event(), lanes_for(["baseline", "dflash"], max_new_tokens=60)
    engine, stopped_at = zero_engine(random_engine, tmp_path), None
    started = time.monotonic()
    for _ in gpu.lane_runner(engine)(engine, PROMPT, lanes, stop):
        if lanes[0].steps and stopped_at is None:
            stopped_at = time.monotonic()
            stop.set()
    assert forwards_after(guarded, stopped_at) <= 1  # the step in progress, no other
    assert [lane.state for lane in lanes] == ["stopped", "stopped"]
    assert time.monotonic() - started < 60 * PACE["step_s"]  # the worker did not run the lane to its end


def test_stop_ends_a_measurements_gpu_work_within_a_step(random_engine, guarded, tmp_path):
    started = tmp_path / "started"
    PACE.update(step_s=0.05, after=str(started))  # the measurement's own steps, not the worker's warm-up
    engine, stop, pressed = zero_engine(random_engine, tmp_path), threading.Event(), []

    def press():  # a few steps into the measurement itself, past the worker's warm-up
        while not started.exists():
            time.sleep(0.01)
        time.sleep(0.2)
        pressed.append(time.monotonic())
        stop.set()

    threading.Thread(target=press, daemon=True).start()
    with pytest.raises(Stopped):
        run_on(engine, many_runs, PROMPT, 50, stop=stop, started=str(started))  # as the Why tab and "Run it live" do
    assert forwards_after(guarded, pressed[0]) <= 1  # the step in progress, no other
    assert len(guarded.read_text().split()) < 50 * 40  # it ended early


def test_the_run_limit_ends_the_gpu_work_before_zerogpu_would(random_engine, guarded, tmp_path):
    PACE["step_s"] = 0.02
    stand_in = StandInZeroGPU()
    engine = zero_engine(random_engine, tmp_path, stand_in, cap_s=2)  # every call asks for at most 2 s
    with pytest.raises(Stopped, match="stopped after 2 s, the GPU time this measurement asked for"):
        engine.call(many_runs, PROMPT, 50, stop=threading.Event())
    assert stand_in.declared == [2] and not stand_in.aborted and stand_in.elapsed[0] < 2
    lanes = lanes_for(["baseline"], max_new_tokens=400)
    for _ in gpu.lane_runner(engine)(engine, PROMPT, lanes, threading.Event()):
        pass
    assert lanes[0].state == "error: stopped after 2 s, the GPU time this lane asked for" and not stand_in.aborted


def test_a_refused_call_is_shown_on_the_lanes(random_engine, tmp_path):
    engine = zero_engine(random_engine, tmp_path, StandInZeroGPU(cap_s=1))
    lanes = lanes_for(["baseline", "eagle3"])
    for _ in gpu.lane_runner(engine)(engine, PROMPT, lanes, threading.Event()):
        pass
    assert lanes[0].state.startswith("error: The requested GPU duration")
    assert lanes[1].state == "stopped"


def test_durations_come_from_measured_costs_and_stay_under_the_cap():
    short = zerogpu.lane_seconds(0.11, 64, 1, True)
    assert short == 10 + round(2 * 0.11 * (8 + 64 + 1) + 0.5)  # start, the warm-up run, the tokens, each x2
    assert zerogpu.lane_seconds(0.11, 64, 1, False) == short + zerogpu.PROFILE_S
    assert zerogpu.lane_seconds(0.11, 2048, 2, True) == zerogpu.GPU_CAP_S
    assert zerogpu.call_seconds(None, True) == zerogpu.GPU_CAP_S
    assert zerogpu.call_seconds(20.0, True) == 50 and zerogpu.call_seconds(80.0, True) == zerogpu.GPU_CAP_S
    assert zerogpu.worker_limit_s(30) == 28 and zerogpu.worker_limit_s(3) == 1.5


def test_a_call_asks_its_cost_divided_by_spaces_duration_factor_within_the_visitors_quota():
    """`spaces` schedules what a call asks times its card's duration factor (1.5 on an RTX PRO 6000 Blackwell):
    a call asks its cost divided by it, and at most what the 120-s anonymous quota allows once multiplied; the
    worker stops itself before the scheduled end."""
    cost = zerogpu.WORKER_START_S + zerogpu.MARGIN * 0.11 * (zerogpu.WARM_UP_TOKENS + 64 + 1)
    assert zerogpu.lane_seconds(0.11, 64, 1, True) == math.ceil(cost)
    assert zerogpu.lane_seconds(0.11, 64, 1, True, factor=1.5) == math.ceil(cost / 1.5)
    longest = zerogpu.lane_seconds(0.11, 4096, 2, True, factor=1.5)
    assert longest == 80 and longest * 1.5 <= zerogpu.GPU_CAP_S  # scheduled 120 s: the quota, not 180
    assert zerogpu.call_seconds(None, True, factor=1.5) == 80 and zerogpu.call_seconds(20.0, True, factor=1.5) == 34
    assert zerogpu.worker_limit_s(80, 1.5) == 118
    assert zerogpu.spaces_duration_factor() >= 1.0  # spaces' own table, read here off ZeroGPU (its first card's)


def test_on_a_card_with_a_duration_factor_a_lane_is_scheduled_within_the_quota(random_engine, guarded, tmp_path):
    stand_in = StandInZeroGPU(factor=1.5)
    engine = zero_engine(random_engine, tmp_path, stand_in, duration_factor=1.5)
    lanes = lanes_for(["baseline", "dflash"])
    for _ in gpu.lane_runner(engine)(engine, PROMPT, lanes, threading.Event()):
        pass
    assert [lane.state for lane in lanes] == ["done", "done"] and not stand_in.aborted
    assert all(took < 1.5 * asked <= zerogpu.GPU_CAP_S for took, asked in zip(stand_in.elapsed, stand_in.declared))
    long = replace(lanes[0].config, max_new_tokens=4096)
    assert engine.stream_seconds(long) * 1.5 <= zerogpu.GPU_CAP_S < zerogpu.lane_seconds(0.11, 4096, 1, True) * 1.5


def test_a_new_preset_starts_from_a_per_token_figure_estimated_for_its_shape(random_engine, tmp_path):
    """Before a Space has measured a preset, its lanes ask for a duration from the target's shape, not the cap; a
    larger target is estimated slower; once measured, the measurement alone counts (no stale floor under it)."""
    from types import SimpleNamespace

    qwen3_4b = SimpleNamespace(num_hidden_layers=36, hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, vocab_size=151936)
    big, small = zerogpu.estimated_per_token_s(qwen3_4b), zerogpu.estimated_per_token_s(random_engine.target.config)
    assert 0.02 < big < 0.5 and small < big
    engine = zero_engine(random_engine, tmp_path)  # the "random" preset: no figure in the table
    assert engine.start_per_token_s == small
    config = GenerationConfig(max_new_tokens=64)
    assert engine.stream_seconds(config) == zerogpu.lane_seconds(small, 64, 1, False) < zerogpu.GPU_CAP_S
    engine.costs.add_tokens("random", 0.5, 100)  # measured: 5 ms a token, below the start figure
    assert engine.costs.per_token_s("random") == 0.005
    assert engine.stream_seconds(config) == zerogpu.lane_seconds(0.005, 64, 1, False)


def test_the_targets_weights_are_joined_in_the_gpu_call_never_in_the_apps_process(tokenizer, tmp_path):
    """`spaces` moves every tensor apart (a joined tensor and each slice of it twice over): the app's process loads
    and wraps the engine and reads its facts without joining anything; the lane's GPU call joins them, in the
    worker."""
    import torch
    from conftest import tiny_qwen3

    from engine.loop import Engine

    fresh = Engine(tiny_qwen3(len(tokenizer)), tokenizer, {}, torch.device("cpu"), preset="random",
                   fixed_width=True)
    engine = zero_engine(fresh, tmp_path)
    lanes = lanes_for(["baseline"], max_new_tokens=4)
    for _ in gpu.lane_runner(engine)(engine, PROMPT, lanes, threading.Event()):
        pass
    assert lanes[0].state == "done" and len(output_ids(lanes[0])) == 4
    assert fresh._fused_target is None  # joined in the worker only


def test_costs_and_the_profile_are_kept_and_a_new_gpu_forgets_them(tmp_path):
    book = zerogpu.CostBook(tmp_path / "costs.json")
    book.device("tiny", "cuda (GPU A)")
    book.add_tokens("tiny", 2.0, 10)
    book.add_call("tiny", "m.f", 12.5)
    book.add_profile("tiny", [100.0, 90.0])
    again = zerogpu.CostBook(tmp_path / "costs.json")
    assert again.per_token_s("tiny") == 0.2 and again.call_s("tiny", "m.f") == 12.5
    assert again.profile("tiny") == [100.0, 90.0]
    again.device("tiny", "cuda (GPU B)")
    assert again.per_token_s("tiny") is None and again.profile("tiny") is None


def test_the_warm_up_profile_is_measured_once_and_inherited(random_engine, tmp_path, monkeypatch):
    import engine.loop

    measured, real = tmp_path / "profiles", engine.loop.profile_verify_speed

    def counted(*args, **kwargs):
        with open(measured, "a") as f:
            f.write("1\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.loop, "profile_verify_speed", counted)
    monkeypatch.setattr(random_engine, "_verify_steps_per_s", None)
    zero = zero_engine(random_engine, tmp_path)
    for _ in range(2):  # two calls, each in a fresh worker (a fork of this process)
        lanes = lanes_for(["dspark"])
        for _ in gpu.lane_runner(zero)(zero, PROMPT, lanes, threading.Event()):
            pass
        assert lanes[0].state == "done"
    assert measured.read_text().split() == ["1"]  # measured in the first worker only
    assert zero.costs.profile("random") == random_engine._verify_steps_per_s  # stored, and kept in this process


def test_the_device_is_named_from_inside_the_gpu_call(random_engine, tmp_path, monkeypatch):
    import engine.loop

    monkeypatch.setattr(engine.loop, "describe_device", lambda device: f"device seen by process {os.getpid()}")
    zero = zero_engine(random_engine, tmp_path)
    assert "named after the first run" in zero.device_name  # nothing read in this process
    zero.generate(PROMPT, GenerationConfig(max_new_tokens=2))
    assert zero.device_name.startswith("device seen by process ") and zero.device_name != random_engine.device_name


def test_the_real_spaces_package_runs_the_same_code_off_zerogpu(random_engine, tmp_path, monkeypatch):
    spaces = pytest.importorskip("spaces")
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    zero = zero_engine(random_engine, tmp_path, spaces.GPU)  # a no-op here: the calls run in this process
    lanes = lanes_for(["baseline", "dflash"])
    for _ in gpu.lane_runner(zero)(zero, PROMPT, lanes, threading.Event()):
        pass
    assert [lane.state for lane in lanes] == ["done", "done"]
    assert run_on(zero, many_runs, PROMPT, 2, stop=threading.Event()) == 2


def test_the_page_names_no_stand_in_device_and_its_run_goes_through_gpu_calls(random_engine, guarded, tmp_path,
                                                                            monkeypatch):
    import engine.loop
    from app.main import build_app

    monkeypatch.setattr(engine.loop, "describe_device", lambda device: f"device seen by process {os.getpid()}")
    stand_in = StandInZeroGPU()
    zero = zero_engine(random_engine, tmp_path, stand_in)
    demo = build_app(zero, run_lanes=gpu.lane_runner(zero))
    page = repr(demo.config)
    assert f"device seen by process {os.getpid()}" not in page and "named after the first run" in page
    run = next(block for block in demo.fns.values() if block.api_name == "run")
    values = ["none" if component.value == "throughput" else component.value for component in run.inputs]
    values[1], values[5] = ["baseline", "dflash"], 8  # the lanes, max new tokens: two GPU calls of a few tokens
    *_, last = run.fn(*values, types.SimpleNamespace(session_hash="zerogpu-test", query_params={}))
    assert "done on device seen by process" in last[0] and stand_in.declared and not stand_in.aborted
