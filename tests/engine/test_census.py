"""What would stall a GPU, counted per step on the CPU (engine/measure/census.py): a read of a device value on the
host, a tensor built from host values, a `nonzero`. Each lane is held to its ceiling at every step after its first
(whose drafter caches are made then); a change that adds one fails here before it costs a bubble on a GPU.

Chains read the device once a step (the verdict: accepted count, bonus and drafts in one copy) and send it nothing;
DSpark reads twice (its scheduler reads the confidences before it sizes the verify). A tree reads twice (the tree,
chosen or grown on the device and read once; the verdict, whose walk runs on the device at every temperature) and
sends nothing: its positions, mask, kept rows and trace rows are indexed on the device from the drafter's rows and
the walk's own output."""

from __future__ import annotations

import pytest

from engine.contract.types import GenerationConfig
from engine.measure.census import census, stalls_per_step
from engine.run import Run
from engine.timing import SpanClock

PROMPT = "def add(a, b):\n    return a + b\n\ndef mul(a, b):"
CHAINS = {"baseline": 1, "eagle3": 1, "classic": 1, "dflash": 1, "dspark": 2}  # host reads a step
TREES = {  # (host reads, tensors sent from the host) a step, the trees grown at the default budget
    "dflash_tree": (2, 0),  # read: the tree (its tokens and parents in one), the verdict (path and bonus)
    "eagle3_tree": (2, 0),
}


# The others in a batch of many requests at once (engine/batch.py traced_steps: the held-out prompts, cycled): short
# prompts of different lengths. The held-out ones run to hundreds of tokens, whose prefills cost seconds of CPU on the
# shipped models and count no step of their own; short ones keep the batch ragged, and leave and join as they do.
COMPANIONS = ["import os\n", "class Stack:\n    def", "x = [", "# sort a list of numbers\n", "while True:",
              "print('hello, world')\n", "for i in range(10):"]


@pytest.fixture
def short_companions(monkeypatch):
    monkeypatch.setattr("engine.batch.load_prompts", lambda: list(COMPANIONS))


def _steady_steps(engine, method: str, temperature: float) -> list[dict[str, int]]:
    config = GenerationConfig(method=method, max_new_tokens=16, temperature=temperature, seed=3)
    request = engine.requests(PROMPT, [config])[0]
    prompt_ids, drafter = list(request.prompt_ids), Run(engine).prepare(request.config)
    steps = stalls_per_step(Run(engine).device_steps(prompt_ids, config, drafter, SpanClock(engine.device)))
    assert len(steps) >= 4, method
    return steps[2:]  # after the prefill and the first decode step


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("method", sorted(CHAINS))
def test_a_chain_reads_the_device_once_a_step_and_sends_it_nothing(embedded_engine, method, temperature):
    for index, step in enumerate(_steady_steps(embedded_engine, method, temperature)):
        assert step["read"] <= CHAINS[method] and step["to_device"] == step["nonzero"] == 0, (method, index, step)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("method", sorted(TREES))
def test_a_tree_stays_under_its_ceiling(embedded_engine, method, temperature):
    reads, sent = TREES[method]
    for index, step in enumerate(_steady_steps(embedded_engine, method, temperature)):
        assert step["read"] <= reads and step["to_device"] <= sent and step["nonzero"] == 0, (method, index, step)


def test_the_census_sees_each_kind_of_stall():
    import torch

    with torch.inference_mode(), census() as counts:
        x = torch.arange(6)
        int(x[1]), x.tolist(), bool(x[2] > 0)  # three reads
        torch.tensor([1, 2])  # a tensor from host values
        x[x > 2], x.nonzero()  # two of unknown size
    assert dict(counts) == {"read": 3, "to_device": 1, "nonzero": 2}


@pytest.mark.parametrize("method, size", [("eagle3", 2), ("dflash", 2), ("dspark", 8)])
def test_a_batch_reads_the_device_at_most_three_times_a_step_whatever_its_size(embedded_engine, short_companions,
                                                                                method, size):
    """Many requests at once (engine/batch.py): every request's verdict comes back in one copy, DSpark's confidences
    in another, whatever the batch's size, at temperature 0 and above it."""
    for temperature in (0.0, 1.0):
        config = GenerationConfig(method=method, max_new_tokens=10, temperature=temperature, requests_at_once=size)
        request = embedded_engine.requests(PROMPT, [config])[0]
        prompt_ids, drafter = list(request.prompt_ids), Run(embedded_engine).prepare(request.config)
        steps = stalls_per_step(Run(embedded_engine).device_steps(prompt_ids, config, drafter,
                                                                  SpanClock(embedded_engine.device)))
        for index, step in enumerate(steps[2:]):
            assert step["read"] <= 3 and step["nonzero"] == 0, (method, size, temperature, index, step)


def test_a_batchs_target_sends_its_rows_lengths_and_counts_in_one_copy(embedded_engine, short_companions):
    """The baseline of 8 requests at once: the target's preallocated cache takes each step's lengths and counts in
    one copy; the anchors are a second, the verdict's own a third; nothing re-built on the host per request."""
    config = GenerationConfig(method="baseline", max_new_tokens=8, requests_at_once=8)
    request = embedded_engine.requests(PROMPT, [config])[0]
    prompt_ids, drafter = list(request.prompt_ids), Run(embedded_engine).prepare(request.config)
    steps = stalls_per_step(Run(embedded_engine).device_steps(prompt_ids, config, drafter,
                                                              SpanClock(embedded_engine.device)))
    assert steps[2:] and all(step["to_device"] <= 3 and step["read"] == 1 for step in steps[2:]), steps
