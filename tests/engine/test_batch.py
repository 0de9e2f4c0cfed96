"""Many requests at once (engine/batch.py): each request of a batch writes what it writes alone, at every batch
size, with ragged prompts, drafts and finishes; the ragged cache keeps each request's own entries."""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import pytest
import torch
from conftest import baseline_of, noisy_copy, tiny_dflash, tiny_dspark, tiny_eagle3, tiny_qwen3

from engine.batch import MAX_BATCH, generate_batch
from engine.contract.types import EngineError, GenerationConfig, Step
from engine.models import _cache_kwarg, new_cache
from engine.ragged import RaggedCache
from engine.scheduler import DraftGate, batch_cut, stored_measurement
from engine.speed import profile_batch_verify_speed

BATCHED = ("baseline", "eagle3", "classic", "dflash", "dspark")
PROMPTS = ["def add(a, b):", "import os\n\nfor name in os.listdir('.'):\n    print(", "x = [", "class Stack:\n    def",
           "# sort a list of numbers\n", "while True:", "print('hello, world')\n"]


@pytest.fixture(scope="module")
def lanes_engine(tokenizer):
    """Tiny random models serving every batched lane as the shipped preset does: a 6-layer target (a 512-token
    context, so held-out prompts join a batch), an EAGLE-3, a small LM, a DFlash and a DSpark drafter, and other
    weights for EAGLE-3, DFlash and DSpark above temperature 0. For the tests of a batch's mechanics (each request's
    generator, its trace among others), which hold for any weights; what needs drafts the target accepts runs on
    the shipped models."""
    from engine.loop import Engine

    target = tiny_qwen3(len(tokenizer), layers=6, context=512)
    drafters = {"eagle3": tiny_eagle3(target), "classic": noisy_copy(target, noise=0.05),
                "dflash": tiny_dflash(target), "dspark": tiny_dspark(target)}
    sampled = {"eagle3": tiny_eagle3(target, seed=5), "dflash": tiny_dflash(target, seed=6),
               "dspark": tiny_dspark(target, seed=7)}
    return Engine(target, tokenizer, drafters, torch.device("cpu"), preset="random", sampled_drafter_models=sampled)


@functools.cache
def greedy_alone(engine, prompt: str, method: str):
    """A lane's single run at temperature 0 (20 tokens), made once per engine, prompt and lane: at temperature 0 it
    is the same every time, and both batch sizes below hold their first request against it, and a request traced
    among others its trace (the baseline's: the run the identity checks hold batches against)."""
    if method == "baseline":
        return baseline_of(engine, prompt, 20)
    return engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=20))


@pytest.mark.parametrize("method", BATCHED)
@pytest.mark.parametrize("size, at_once", [(1, 1), (7, 3)])
def test_each_request_of_a_batch_writes_its_own_greedy_run(embedded_engine, method, size, at_once):
    """Temperature 0: token for token the target's greedy output, whatever else is in the batch (prompts of different
    lengths, requests that accept different numbers of drafts, so take different numbers of steps and leave the
    batch one by one, and with more requests than places, others joining as they leave); and each request accepts
    what it accepts alone, step by step."""
    prompts = PROMPTS[:size]
    config = GenerationConfig(method=method, max_new_tokens=20)
    batch = generate_batch(embedded_engine, prompts, config, requests_at_once=at_once)
    for prompt, request in zip(prompts, batch.requests):
        assert request.output_ids == baseline_of(embedded_engine, prompt, 20).output_ids, (method, prompt)
    if method not in ("baseline", "dspark"):  # each request's drafts are what it drafts alone (DSpark's scheduler
        # reads the whole batch, so how much it verifies depends on the batch: tested below)
        for prompt, request in list(zip(prompts, batch.requests))[:3]:
            alone = greedy_alone(embedded_engine, prompt, method)
            assert request.accepted == tuple(s.num_accepted for s in alone.steps), (method, prompt)
    if method != "baseline" and size > 1:
        assert len({len(r.accepted) for r in batch.requests}) > 1  # some requests left before others


@pytest.mark.parametrize("method", ["baseline", "eagle3", "dflash", "dspark"])
def test_a_batch_runs_to_the_context_limit_and_stops_each_request_there(random_engine, method):
    """Requests of different lengths reach the context limit (96 tokens on the random models) at different
    steps; each stops there as the target's greedy run alone does, token for token (each lane's single run does
    too: tests/engine/test_identity.py, up to the context limit; the three greedy runs made once for all four
    lanes). (The random engine's eagle3 lane drafts with a small LM.)"""
    prompts = ["def f(x):\n    return x\n" * 5, "x = 1\n", "def g(y):\n" * 9]
    batch = generate_batch(random_engine, prompts, GenerationConfig(method=method, max_new_tokens=200))
    for prompt, request in zip(prompts, batch.requests):
        alone = baseline_of(random_engine, prompt, 200)
        assert request.output_ids == alone.output_ids and request.finish_reason == alone.summary.finish_reason
        assert request.finish_reason == "context", prompt


@pytest.mark.parametrize("method", BATCHED)
def test_sampling_in_a_batch_draws_what_each_request_draws_alone(lanes_engine, method):
    """Above temperature 0 every request draws from its own generator, seeded as a single run is, in the same order:
    the batch writes each request's single-request sample (so it passes the distribution check the single runs
    pass: tests/engine/test_lesson_engine.py). Tiny models: the draws' order is the engine's, whatever the
    weights; above 0 they accept and reject drafts, and each lane drafts with its weights for sampling."""
    # DSpark's static cut: its throughput rule reads the whole batch (any rule that reads only what was drafted
    # keeps the output the target's), so its draws would follow another schedule than a single run's
    config = GenerationConfig(method=method, max_new_tokens=20, temperature=1.0, seed=5, scheduler="static")
    batch = generate_batch(lanes_engine, PROMPTS[:4], config)
    assert [r.output_ids for r in batch.requests] == [lanes_engine.generate(p, config).output_ids
                                                      for p in PROMPTS[:4]]
    assert len({r.output_ids for r in batch.requests}) == 4
    if method != "baseline":  # drafts accepted and drafts turned down: each verdict's draws in the order
        steps = [(a, v) for r in batch.requests for a, v in zip(r.accepted, r.verified)]
        assert any(a > 0 for a, _ in steps) and any(a < v for a, v in steps), method


def test_a_batch_counts_its_work(embedded_engine):
    batch = generate_batch(embedded_engine, PROMPTS[:3], GenerationConfig(method="dflash", max_new_tokens=16))
    assert batch.num_new_tokens == sum(len(r.output_ids) for r in batch.requests) == 48
    assert batch.steps == max(len(r.accepted) for r in batch.requests)
    for r in batch.requests:
        assert len(r.verified) == len(r.accepted) and all(a <= v for v, a in zip(r.verified, r.accepted))
        assert sum(r.accepted) + len(r.accepted) + 1 >= len(r.output_ids)  # the prefill's token, then each step's
    assert 1.0 <= batch.tau <= 1 + max(max(r.verified) for r in batch.requests)
    assert batch.wall_s >= batch.draft_s + batch.verify_s > 0
    # while all places were taken: part of the run (requests leave one by one at the end); one at a time, all of it
    assert 0 < batch.full_tokens < batch.num_new_tokens and 0 < batch.full_s < batch.wall_s
    alone = generate_batch(embedded_engine, PROMPTS[:2], GenerationConfig(method="dflash", max_new_tokens=8), 1)
    assert alone.full_tokens == alone.num_new_tokens == 16 and alone.steady_tokens_per_s > 0


def test_bad_batches_are_one_clear_line(random_engine):
    config = GenerationConfig(method="dflash", max_new_tokens=4)
    with pytest.raises(EngineError, match="at least one prompt"):
        generate_batch(random_engine, [], config)
    with pytest.raises(EngineError, match=f"requests at once must be from 1 to {MAX_BATCH}, got {MAX_BATCH + 1}"):
        generate_batch(random_engine, ["x"] * (MAX_BATCH + 1), config)
    with pytest.raises(EngineError, match="requests at once must be from 1"):
        generate_batch(random_engine, ["x"], config, requests_at_once=0)
    with pytest.raises(EngineError, match="requests at once must be an integer from 1 to"):
        GenerationConfig(requests_at_once=MAX_BATCH + 1).validate()
    with pytest.raises(EngineError, match="trees, which do not run in a batch: run it with requests at once 1"):
        random_engine.generate("x", GenerationConfig(method="dflash_tree", max_new_tokens=4, requests_at_once=2))
    with pytest.raises(EngineError, match="trees"):  # a tree lane's chain runs batched
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
        assert_rows_hold(target, ragged, [[12, 13, 14, 24, 25], [5, 6, 7, 8, 9, 20]])
        ragged.truncate([2, 4])  # a serial drafter's rollback: each request's newest entries dropped
        assert ragged.lengths == [2, 4]
        assert_rows_hold(target, ragged, [[12, 13], [5, 6, 7, 8]])
        joining = RaggedCache(new_cache(target), 2, torch.device("cpu"))  # two requests join, one longer than all
        target(torch.tensor([[30, 31, 32, 33, 34, 35], [36, 37, 0, 0, 0, 0]]), **{_cache_kwarg(target): joining.cache},
               **joining.causal_inputs([6, 2]))
        joining.keep([[0, 1, 2, 3, 4, 5], [0, 1]])
        ragged.extend(joining)
        ragged.extend(RaggedCache(new_cache(target), 1, torch.device("cpu")))  # a drafter's row, still empty
        assert ragged.lengths == [2, 4, 6, 2, 0]
        assert_rows_hold(target, ragged, [[12, 13], [5, 6, 7, 8], [30, 31, 32, 33, 34, 35], [36, 37]])


def assert_rows_hold(target, ragged: RaggedCache, sequences: list[list[int]]) -> None:
    """Each row's entries, read right-aligned, are a single request's cache after a forward over its sequence."""
    for row, sequence in enumerate(sequences):
        alone = new_cache(target)
        target(torch.tensor([sequence]), **{_cache_kwarg(target): alone})
        for layer, single in zip(ragged.cache.layers, alone.layers):
            for name in ("keys", "values"):
                mine, theirs = getattr(layer, name), getattr(single, name)
                torch.testing.assert_close(mine[row, :, mine.shape[2] - len(sequence):], theirs[0], rtol=1e-5, atol=1e-5)


def test_the_batch_scheduler_verifies_less_as_the_batch_grows():
    """scheduler.batch_cut: one verified length for the batch, the batch's expected tokens over the verify time of
    B · (1 + ℓ) tokens. Free tokens: everything drafted; a fixed cost per token: less as B grows."""
    sure, unsure = [0.95] * 7, [0.9, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1]
    assert batch_cut([sure, unsure], (0.01, 0.0)) == 7  # verifying costs nothing more: all of it
    cuts = [batch_cut([sure] * size, (0.008, 0.0003)) for size in (1, 4, 16, 64)]
    assert cuts == sorted(cuts, reverse=True) and cuts[0] > cuts[-1]
    assert batch_cut([unsure] * 32, (0.008, 0.0003)) <= batch_cut([sure] * 32, (0.008, 0.0003))
    assert batch_cut([[0.01] * 7] * 8, (0.008, 0.001)) == 0  # hopeless drafts: the target's own token only


def test_the_draft_gate_drafts_only_while_drafting_commits_more_a_second():
    """scheduler.DraftGate: each batch size its own measurements; both kinds tried first; then the faster kind, and
    the slower one tried again once in a while (the sooner the closer they are), so a change is noticed."""
    gate = DraftGate()

    def run(size, seconds_drafting, tokens_drafting, steps):
        chosen = []
        for _ in range(steps):
            drafted = gate.should_draft(size)
            chosen.append(drafted)
            gate.record(size, drafted, *((seconds_drafting, tokens_drafting) if drafted else (0.05, size)))
        return chosen

    busy = run(32, 0.25, 100, 80)  # drafting: 400 tokens/s; the target alone: 640
    assert busy[:2] == [True, False] and busy.count(True) < 8  # tried, then mostly not
    tries = [i for i, drafted in enumerate(busy) if drafted][1:]
    assert tries and all(later - earlier > DraftGate.PROBE_STEPS[0] for earlier, later in zip(tries, tries[1:]))
    assert gate.rate(32, True) == pytest.approx(400) and gate.rate(32, False) == pytest.approx(640)
    quiet = run(4, 0.02, 14, 40)  # another batch size, its own figures: drafting 700 tokens/s against 80
    assert quiet[:2] == [True, False] and quiet[2:].count(False) <= 40 // DraftGate.PROBE_STEPS[0]
    easier = run(32, 0.1, 100, 160)  # the text got easier: drafting pays at 32 too (1000 tokens/s), and is noticed
    assert easier[-40:].count(True) > 30
    before = gate.rate(8, True)
    gate.record(8, True, 5.0, 1, settled=False)  # a pass that caught up on skipped steps: not what drafting costs
    assert gate.rate(8, True) == before is None and gate.should_draft(8)  # ... and the next step drafts, measured


def test_dspark_in_a_batch_that_stops_and_starts_drafting_writes_the_greedy_run(embedded_engine, monkeypatch):
    """Steps of the target alone between drafting steps (the gate's choice, here every other step): each request's
    drafter catches up on the context it missed, and every request still writes the target's greedy output."""
    calls = []

    def every_other(gate, size):
        calls.append(size)
        return len(calls) % 2 == 1

    monkeypatch.setattr(DraftGate, "should_draft", every_other)
    prompts = PROMPTS[:5]
    batch = generate_batch(embedded_engine, prompts, GenerationConfig(method="dspark", max_new_tokens=20),
                           requests_at_once=3)
    for prompt, request in zip(prompts, batch.requests):  # 20 tokens: the greedy runs the tests above made
        assert request.output_ids == baseline_of(embedded_engine, prompt, 20).output_ids, prompt
    assert calls and all(size > 1 for size in calls)  # consulted only with requests at once
    verified = [r.verified for r in batch.requests]
    assert any(0 in v[:-1] for v in verified)  # steps that drafted nothing ...
    assert any(v[i] == 0 and v[i + 1] > 0 for v in verified for i in range(len(v) - 1))  # ... and drafting after


def test_a_machines_measurement_is_made_once_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path))
    calls = []

    def measure():
        calls.append(1)
        return (0.01, 0.0002)

    assert stored_measurement("cost", "this machine", measure) == (0.01, 0.0002)
    assert stored_measurement("cost", "this machine", measure) == (0.01, 0.0002) and len(calls) == 1
    assert stored_measurement("cost", "another device", measure) == (0.01, 0.0002) and len(calls) == 2
    (tmp_path / "cost.json").write_text("{not json")
    assert stored_measurement("cost", "this machine", measure) == (0.01, 0.0002) and len(calls) == 3


def test_the_batch_verify_cost_grows_with_the_tokens_of_the_batch(random_engine):
    a, b = profile_batch_verify_speed(random_engine.target, random_engine.fused_target, torch.device("cpu"),
                                      context=32, repeats=2)
    assert a > 0 and b >= 0


def test_dspark_in_a_batch_verifies_what_its_batch_scheduler_chooses(embedded_engine, monkeypatch):
    """The throughput rule in a batch cuts every request's block at one length from the batch's cost; verifying
    everything sends more; both write the target's greedy output. The cost is set here (a verified token as dear as
    10 ms, far above what a step costs whatever ℓ is), so the cut does not depend on this machine's load."""
    monkeypatch.setattr(embedded_engine, "batch_verify_cost", lambda: (0.001, 0.01))
    prompts = PROMPTS[:6]
    scheduled = generate_batch(embedded_engine, prompts, GenerationConfig(method="dspark", max_new_tokens=20))
    everything = generate_batch(embedded_engine, prompts, GenerationConfig(method="dspark", max_new_tokens=20,
                                                                            scheduler="none"))
    for prompt, one, other in zip(prompts, scheduled.requests, everything.requests):
        assert one.output_ids == other.output_ids == baseline_of(embedded_engine, prompt, 20).output_ids
    assert scheduled.verified_per_request < everything.verified_per_request


@pytest.mark.parametrize("method", ["baseline", "dflash"])
def test_a_request_among_others_is_traced_as_it_runs_alone(embedded_engine, method, monkeypatch):
    """requests_at_once above 1: the run's prompt decoded in a full batch of others (replaced as they finish); its
    trace is its own, token for token and (DFlash) draft for draft its single run's, each step saying the batch's
    size and what the whole batch committed meanwhile. The single run: the one the tests above made. The others:
    this file's short prompts, last first, in place of the held-out ones (hundreds of tokens each, whose prefills
    cost seconds here): of different lengths, and (DFlash) one leaves and another joins while this one runs."""
    monkeypatch.setattr("engine.batch.load_prompts", lambda: PROMPTS[::-1])
    config = GenerationConfig(method=method, max_new_tokens=20)
    alone = greedy_alone(embedded_engine, PROMPTS[1], method)
    among = embedded_engine.generate(PROMPTS[1], replace(config, requests_at_once=4))
    assert among.output_ids == alone.output_ids and among.text == alone.text
    assert [s.drafted_ids for s in among.steps] == [s.drafted_ids for s in alone.steps]
    assert [s.num_accepted for s in among.steps] == [s.num_accepted for s in alone.steps]
    assert {s.batch_size for s in (among.prefill, *among.steps)} == {4}
    assert all(s.batch_tokens >= len(s.committed) for s in among.steps)
    assert among.summary.batch_tokens_per_s > among.summary.tokens_per_s and alone.summary.batch_tokens_per_s is None
    assert Step.from_dict(json.loads(json.dumps(among.steps[0].to_dict()))) == among.steps[0]  # saved and read back
    assert {s.batch_size for s in alone.steps} == {1} and alone.steps[0].batch_tokens is None


def test_eagle3_in_a_batch_drafts_on_the_models_device_when_one_request_drafts_nothing():
    """A request that drafts 0 beside one drafting 2 (EAGLE-3 at requests at once 2, near a request's last token):
    every tensor of the serial draft forwards stays on the drafter's device. On the meta device (shapes only), as on
    CUDA, a host tensor among them is an error."""
    from conftest import tiny_eagle3, tiny_qwen3

    from engine.drafters.batched import Eagle3BatchDrafter
    from engine.drafters.eagle3 import Eagle3Drafter
    from engine.timing import SpanClock

    meta = torch.device("meta")
    model = tiny_eagle3(tiny_qwen3(200, layers=6)).to(meta)
    drafter, clock = Eagle3BatchDrafter(Eagle3Drafter(model), meta), SpanClock(torch.device("cpu"))
    features = model.fc.in_features
    drafter.start([torch.zeros(5, dtype=torch.long, device=meta)] * 2, [torch.zeros(5, features, device=meta)] * 2,
                  clock)
    committed = [torch.zeros(6, dtype=torch.long, device=meta)] * 2
    blocks = drafter.propose(committed, [0, 2], 0.0, [torch.Generator(), torch.Generator()], clock)
    assert blocks[0] is None
    assert blocks[1].ids.shape == (2,) and blocks[1].ids.device == meta and blocks[1].probs.device == meta
