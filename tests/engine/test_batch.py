"""Many requests at once (engine/batch.py): each request of a batch writes what it writes alone, at every batch
size, with ragged prompts, drafts and finishes; the ragged cache keeps each request's own entries."""

from __future__ import annotations

import pytest
import torch
from conftest import baseline_of

from engine.batch import MAX_BATCH, generate_batch
from engine.contract.types import EngineError, GenerationConfig
from engine.models import _cache_kwarg, new_cache
from engine.ragged import RaggedCache

BATCHED = ("baseline", "dflash", "dspark")
PROMPTS = ["def add(a, b):", "import os\n\nfor name in os.listdir('.'):\n    print(", "x = [", "class Stack:\n    def",
           "# sort a list of numbers\n", "while True:", "print('hello, world')\n"]


@pytest.mark.parametrize("method", BATCHED)
@pytest.mark.parametrize("size", [1, 3, 7])
def test_each_request_of_a_batch_writes_its_own_greedy_run(embedded_engine, method, size):
    """Temperature 0: token for token the target's greedy output, whatever else is in the batch (prompts of different
    lengths, requests that accept different numbers of drafts, so take different numbers of steps and leave the
    batch one by one); and each request accepts what it accepts alone, step by step."""
    prompts = PROMPTS[:size]
    config = GenerationConfig(method=method, max_new_tokens=20)
    batch = generate_batch(embedded_engine, prompts, config)
    for prompt, request in zip(prompts, batch.requests):
        assert request.output_ids == baseline_of(embedded_engine, prompt, 20).output_ids, (method, prompt)
    if method != "baseline":  # each request's drafts are what it drafts alone
        for prompt, request in list(zip(prompts, batch.requests))[:3]:
            alone = embedded_engine.generate(prompt, config)
            assert request.accepted == tuple(s.num_accepted for s in alone.steps), (method, prompt)
    if method != "baseline" and size > 1:
        assert len({len(r.accepted) for r in batch.requests}) > 1  # some requests left before others


@pytest.mark.parametrize("method", BATCHED)
def test_a_batch_runs_to_the_context_limit_and_stops_each_request_there(random_engine, method):
    """Requests of different lengths reach the context limit (96 tokens on the random models) at different
    steps; each stops there as it does alone."""
    prompts = ["def f(x):\n    return x\n" * 5, "x = 1\n", "def g(y):\n" * 9]
    config = GenerationConfig(method=method, max_new_tokens=200)
    batch = generate_batch(random_engine, prompts, config)
    for prompt, request in zip(prompts, batch.requests):
        alone = random_engine.generate(prompt, config)
        assert request.output_ids == alone.output_ids and request.finish_reason == alone.summary.finish_reason


@pytest.mark.parametrize("method", BATCHED)
def test_sampling_in_a_batch_draws_what_each_request_draws_alone(embedded_engine, method):
    """Above temperature 0 every request draws from its own generator, seeded as a single run is, in the same order:
    the batch writes each request's single-request sample (so it passes the distribution check the single runs
    pass: tests/engine/test_lesson_engine.py)."""
    config = GenerationConfig(method=method, max_new_tokens=20, temperature=1.0, seed=5)
    batch = generate_batch(embedded_engine, PROMPTS[:4], config)
    assert [r.output_ids for r in batch.requests] == [embedded_engine.generate(p, config).output_ids
                                                      for p in PROMPTS[:4]]
    assert len({r.output_ids for r in batch.requests}) == 4


def test_a_batch_counts_its_work(embedded_engine):
    batch = generate_batch(embedded_engine, PROMPTS[:3], GenerationConfig(method="dflash", max_new_tokens=16))
    assert batch.num_new_tokens == sum(len(r.output_ids) for r in batch.requests) == 48
    assert batch.steps == max(len(r.accepted) for r in batch.requests)
    for r in batch.requests:
        assert len(r.verified) == len(r.accepted) and all(a <= v for v, a in zip(r.verified, r.accepted))
        assert sum(r.accepted) + len(r.accepted) + 1 >= len(r.output_ids)  # the prefill's token, then each step's
    assert 1.0 <= batch.tau <= 1 + max(max(r.verified) for r in batch.requests)
    assert batch.wall_s >= batch.draft_s + batch.verify_s > 0


def test_bad_batches_are_one_clear_line(random_engine):
    config = GenerationConfig(method="dflash", max_new_tokens=4)
    with pytest.raises(EngineError, match="a batch holds 1 to"):
        generate_batch(random_engine, [], config)
    with pytest.raises(EngineError, match="a batch holds 1 to"):
        generate_batch(random_engine, ["x"] * (MAX_BATCH + 1), config)
    with pytest.raises(EngineError, match="trees"):
        generate_batch(random_engine, ["x"], GenerationConfig(method="dflash_tree", max_new_tokens=4))
    with pytest.raises(EngineError, match="the prompt is empty"):
        generate_batch(random_engine, ["x", " "], config)


def test_the_ragged_cache_keeps_each_requests_own_entries(random_engine):
    """Entries appended, kept and dropped per request, requests leaving: each row's entries, read right-aligned,
    are exactly what a single request's cache holds after the same forwards."""
    target = random_engine.target
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    with torch.inference_mode():
        ragged = RaggedCache(new_cache(target), len(prompts), torch.device("cpu"))
        ids = torch.zeros(3, 5, dtype=torch.long)
        for b, p in enumerate(prompts):
            ids[b, : len(p)] = torch.tensor(p)
        target(ids, **{_cache_kwarg(target): ragged.cache}, **ragged.causal_inputs([len(p) for p in prompts]))
        ragged.keep([[0, 1, 2, 3, 4], [0, 1], [0, 1, 2]])
        step = torch.tensor([[20, 21, 22], [23, 0, 0], [24, 25, 0]])
        target(step, **{_cache_kwarg(target): ragged.cache}, **ragged.causal_inputs([3, 1, 2]))
        ragged.keep([[0], [0], [0, 1]])  # as after a verify: the anchor and each request's accepted drafts
        assert ragged.lengths == [6, 3, 5]
        ragged.select([2, 0])  # the second request finished
        assert ragged.lengths == [5, 6]
        for row, sequence in ((0, [12, 13, 14, 24, 25]), (1, [5, 6, 7, 8, 9, 20])):
            alone = new_cache(target)
            target(torch.tensor([sequence]), **{_cache_kwarg(target): alone})
            for layer, single in zip(ragged.cache.layers, alone.layers):
                kept = layer.keys[row, :, layer.keys.shape[2] - len(sequence):]
                torch.testing.assert_close(kept, single.keys[0], rtol=1e-5, atol=1e-5)
