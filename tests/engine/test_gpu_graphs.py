"""CUDA graphs' capture path, driven on the CPU up to the CUDA calls (stand-ins answer those): the engine captures a
run's fixed-width verify on the thread that starts the run, before the overlap's device thread exists, with capture
errors held to the capturing thread; runs then replay the captured graph over the engine's one shared cache and
write the baseline's tokens; `auto` turns graphs on only on a device the device check passed."""

from __future__ import annotations

import contextlib
import threading

import pytest
import torch

from engine.contract.types import GenerationConfig
from engine.target import VERIFY_WIDTH, GraphedVerifies, graphs_wanted


class _Stream:
    def wait_stream(self, other) -> None:
        pass


class _Graph:
    def replay(self) -> None:
        pass


@pytest.fixture
def captures(monkeypatch):
    """Stand-ins for the CUDA calls of a capture; each capture's (thread, capture_error_mode) is recorded."""
    import engine.loop

    seen: list[tuple[int, str]] = []
    monkeypatch.setattr(engine.loop, "GRAPHED_CONTEXT", 512)  # the graphs' shared cache, smaller on the CPU

    @contextlib.contextmanager
    def graph(cuda_graph, capture_error_mode="global", **kwargs):
        seen.append((threading.get_ident(), capture_error_mode))
        yield

    for name, value in (("Stream", lambda device=None: _Stream()), ("current_stream", lambda device=None: _Stream()),
                        ("stream", lambda s: contextlib.nullcontext()), ("CUDAGraph", _Graph), ("graph", graph),
                        ("synchronize", lambda device=None: None)):
        monkeypatch.setattr(torch.cuda, name, value)
    return seen


def test_a_run_captures_its_verify_before_the_overlap_thread_starts_and_replays_it(embedded_engine, captures,
                                                                                   monkeypatch):
    replayed = []

    def replay(self, layer_ids, ids, positions, slots, mask):  # the captured forward, run eagerly on the CPU
        assert (tuple(layer_ids) if layer_ids is not None else None) in self.graphs, "replayed before its capture"
        replayed.append(threading.get_ident())
        return self.fused.forward(ids, positions, self.keys, self.values, slots, mask, False, layer_ids)

    monkeypatch.setattr(GraphedVerifies, "replay", replay)
    prompt = "def square(x):\n"
    want = embedded_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=8)).output_ids
    monkeypatch.setattr(embedded_engine, "verify_width", VERIFY_WIDTH)
    monkeypatch.setattr(embedded_engine, "cuda_graphs", True)
    monkeypatch.setattr(embedded_engine, "_graphed", None)
    for method in ("baseline", "eagle3_tree"):
        result = embedded_engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=8, overlap=True))
        assert result.output_ids == want, method
    caller = threading.get_ident()
    assert captures and all(mode == "thread_local" and thread == caller for thread, mode in captures), captures
    assert len(captures) == len(embedded_engine._graphed.graphs)  # one capture per set of feature layers, reused
    assert replayed and caller not in replayed  # the overlap's device thread replays what the caller captured


def test_a_run_too_long_for_the_graphs_cache_verifies_eagerly(embedded_engine, captures, monkeypatch):
    monkeypatch.setattr(embedded_engine, "verify_width", VERIFY_WIDTH)
    monkeypatch.setattr(embedded_engine, "cuda_graphs", True)
    monkeypatch.setattr(embedded_engine, "_graphed", None)
    assert embedded_engine.graphed(None, 400) is None and not captures
    assert embedded_engine.graphed(None, 100) is embedded_engine.graphed([0], 100) and len(captures) == 2


def test_auto_turns_graphs_on_only_where_the_device_check_passed(monkeypatch):
    import engine.target.graphs as target_module

    assert not graphs_wanted("auto", torch.device("cpu")) and not graphs_wanted("on", torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(target_module, "GRAPHS_CHECKED_ON", ())
    assert not graphs_wanted("auto", torch.device("cuda")) and graphs_wanted("on", torch.device("cuda"))
    monkeypatch.setattr(target_module, "GRAPHS_CHECKED_ON", ("NVIDIA H100 80GB HBM3",))
    assert graphs_wanted("auto", torch.device("cuda")) and not graphs_wanted("off", torch.device("cuda"))
    with pytest.raises(ValueError, match="cuda graphs must be one of"):
        graphs_wanted("sometimes", torch.device("cuda"))
