"""Correctness first: at temperature 0 every method's output equals target-only greedy decoding."""

from __future__ import annotations

import functools

import pytest

from engine.contract.types import GenerationConfig

from conftest import TINY_CONTEXT, baseline_of

PROMPTS = [
    "def parse(self, text):\n",
    "import os\n",
    "class Queue:\n    \"\"\"A FIFO queue.\"\"\"\n",
    "x = 'héllo 🚀'\n",
    "for i in range(10):",
]


def _reference_greedy(model, prompt_ids: list[int], max_new_tokens: int, eos_id: int, context: int) -> list[int]:
    """Plain greedy decoding with no cache and no engine code: the ground truth."""
    import torch

    ids = list(prompt_ids)
    with torch.no_grad():
        while len(ids) - len(prompt_ids) < max_new_tokens and len(ids) < context:
            next_id = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            ids.append(next_id)
            if next_id == eos_id:
                break
    return ids[len(prompt_ids):]


@functools.cache
def ar_run(engine, prompt: str, drafts: int):
    """An EAGLE-3 run at temperature 0 (40 tokens), made once per engine, prompt and draft length: at temperature 0
    it is the same every time; the identity test holds it against the baseline, and another reads its verdicts."""
    return engine.generate(prompt, GenerationConfig(method="eagle3", max_new_tokens=40, drafts_per_step=drafts))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_baseline_equals_uncached_greedy(random_engine, prompt):
    result = random_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=24))
    expected = _reference_greedy(random_engine.target, list(result.prompt_ids), 24, random_engine.eos_id,
                                 random_engine.context_length)
    assert list(result.output_ids) == expected


def test_baseline_is_the_same_run_after_run(random_engine):
    """What lets baseline_of reuse a run: a later baseline, after drafted runs on the same engine, is the same."""
    first = baseline_of(random_engine, PROMPTS[1], 40)
    for method in ("eagle3", "dflash", "dspark"):
        random_engine.generate(PROMPTS[1], GenerationConfig(method=method, max_new_tokens=40, drafts_per_step=3))
    again = random_engine.generate(PROMPTS[1], GenerationConfig(method="baseline", max_new_tokens=40))
    assert again.output_ids == first.output_ids and again.text == first.text


@pytest.mark.parametrize("drafts", range(1, 9))
@pytest.mark.parametrize("prompt", PROMPTS)
def test_ar_equals_baseline_at_temperature_zero(random_engine, prompt, drafts):
    baseline = baseline_of(random_engine, prompt, 40)
    ar = ar_run(random_engine, prompt, drafts)
    assert ar.output_ids == baseline.output_ids
    assert ar.text == baseline.text


@pytest.mark.parametrize("block_size", range(2, 9))
@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_dflash_equals_baseline_at_temperature_zero(random_engine, prompt, block_size):
    baseline = baseline_of(random_engine, prompt, 30)
    dflash = random_engine.generate(prompt, GenerationConfig(method="dflash", max_new_tokens=30,
                                                             drafts_per_step=block_size - 1))
    assert dflash.output_ids == baseline.output_ids
    assert dflash.steps[0].num_verified == max(step.num_verified for step in dflash.steps) == block_size - 1


@pytest.mark.parametrize("method", ["eagle3", "dflash", "dspark"])
@pytest.mark.parametrize("drafts", [1, 3, 7])
def test_identity_up_to_the_context_limit(random_engine, method, drafts):
    """Run until the context is full: the last steps shorten K so the block always fits."""
    prompt = PROMPTS[2]
    baseline = baseline_of(random_engine, prompt, 500)
    other = random_engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=500, drafts_per_step=drafts))
    assert baseline.summary.finish_reason == other.summary.finish_reason == "context"
    assert len(baseline.prompt_ids) + len(baseline.output_ids) == TINY_CONTEXT
    assert other.output_ids == baseline.output_ids


def test_identity_mixes_accepts_and_rejects(random_engine):
    """The identity tests above only mean something if drafts are both accepted and rejected (the runs they read)."""
    verdicts = set()
    for prompt in PROMPTS:
        result = ar_run(random_engine, prompt, 4)
        verdicts |= {t.verdict for step in result.steps for t in step.drafted}
    assert verdicts == {"accepted", "rejected", "unverified"}


@pytest.mark.parametrize("scheduler", ["throughput", "static", "none"])
@pytest.mark.parametrize("drafts", [2, 4, 7])
@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_dspark_equals_baseline_under_every_scheduler(random_engine, prompt, drafts, scheduler):
    baseline = baseline_of(random_engine, prompt, 30)
    dspark = random_engine.generate(prompt, GenerationConfig(method="dspark", max_new_tokens=30,
                                                             drafts_per_step=drafts, scheduler=scheduler))
    assert dspark.output_ids == baseline.output_ids


@pytest.mark.parametrize("max_new_tokens", [1, 2, 5, 9])
def test_max_new_tokens_is_exact(random_engine, max_new_tokens):
    baseline = baseline_of(random_engine, PROMPTS[0], max_new_tokens)
    ar = random_engine.generate(PROMPTS[0], GenerationConfig(method="eagle3", max_new_tokens=max_new_tokens, drafts_per_step=4))
    assert len(ar.output_ids) == max_new_tokens
    assert ar.output_ids == baseline.output_ids


@pytest.mark.slow
def test_embedded_models_identity(embedded_engine):
    """The shipped models: every lane's output equals the baseline's on held-out prompts, at each lane's
    default draft length, and so does each shipped ablation's drafter."""
    from engine.measure.bench import load_prompts
    from engine.contract.methods import METHOD_REGISTRY
    from engine.contract.presets import PRESETS, ablation_shipped
    from engine.train.card import card_lanes

    shipped = PRESETS["tiny"].drafters
    trees = {m for m, entry in METHOD_REGISTRY.items() if entry.grows_from in shipped}
    assert set(embedded_engine.methods()) == {"baseline", *shipped, *trees}  # every shipped drafter loads, trees too
    assert set(embedded_engine.ablation_drafter_models) == {  # and every ablation trained to its end
        m for m, name in PRESETS["tiny"].ablation_drafters.items() if ablation_shipped(name)} == {"dflash"}
    for prompt in load_prompts()[:2]:  # the random models' tests above cover every length and setting
        baseline = baseline_of(embedded_engine, prompt, 48)
        for name, method, overrides in card_lanes(embedded_engine)[1:]:  # every lane, then each shipped ablation
            k = METHOD_REGISTRY[method].default_drafts
            other = embedded_engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=48,
                                                                      drafts_per_step=k, **overrides))
            assert other.output_ids == baseline.output_ids, name


@pytest.mark.slow
def test_the_shipped_models_warm_up(embedded_engine):
    """The warm-up the app and the engine process run before serving: every lane once briefly, and each drafter
    that has weights for sampling once above temperature 0."""
    embedded_engine.warm_up()
