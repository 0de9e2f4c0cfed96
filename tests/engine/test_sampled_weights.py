"""A drafter may ship two checkpoints: its temperature-0 weights, and weights trained for sampling that the
engine drafts with above temperature 0 (GenerationConfig.drafter_weights "auto"); "greedy" keeps the first."""

import pytest
import torch

from conftest import noisy_copy, tiny_dflash, tiny_dspark, tiny_qwen3
from engine.loop import Engine
from engine.contract.presets import PRESETS
from engine.contract.types import EngineError, GenerationConfig

PROMPT = "def add(a, b):"


@pytest.fixture(scope="module")
def two_weight_engine(tokenizer):
    """A random target with drafters whose sampled checkpoints differ from their greedy ones."""
    target = tiny_qwen3(len(tokenizer))
    greedy = {"eagle3": noisy_copy(target, noise=0.05), "dflash": tiny_dflash(target), "dspark": tiny_dspark(target)}
    sampled = {"eagle3": noisy_copy(target, noise=0.05, seed=7), "dflash": tiny_dflash(target, seed=8),
               "dspark": tiny_dspark(target, seed=9)}
    return Engine(target, tokenizer, greedy, torch.device("cpu"), preset="random", sampled_drafter_models=sampled)


def draft_probs(result) -> list[float]:
    return [t.draft_prob for s in result.steps for t in s.drafted]


@pytest.mark.parametrize("method", ["eagle3", "dflash", "dspark"])
def test_temperature_zero_drafts_with_the_greedy_weights_and_equals_the_baseline(two_weight_engine, method):
    baseline = two_weight_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24))
    result = two_weight_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=24))
    assert result.output_ids == baseline.output_ids
    assert "trained for T > 0" not in result.drafter


@pytest.mark.parametrize("method", ["eagle3", "dflash", "dspark"])
def test_above_zero_the_sampled_weights_draft_unless_greedy_weights_are_asked_for(two_weight_engine, method):
    config = GenerationConfig(method=method, max_new_tokens=24, temperature=1.0, seed=3)
    sampled = two_weight_engine.generate(PROMPT, config)
    greedy = two_weight_engine.generate(PROMPT, GenerationConfig(**{**config.__dict__, "drafter_weights": "greedy"}))
    assert sampled.drafter.endswith("trained for T > 0") and "trained for T > 0" not in greedy.drafter
    assert draft_probs(sampled) != draft_probs(greedy)  # other networks drafted
    assert two_weight_engine.drafter_label(method, 1.0) == sampled.drafter
    assert two_weight_engine.drafter_label(method) == greedy.drafter


def test_an_engine_without_sampled_weights_drafts_with_its_only_ones_at_any_temperature(random_engine):
    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=16, temperature=1.0))
    assert "trained for T > 0" not in result.drafter


def test_unknown_drafter_weights_get_one_line():
    with pytest.raises(EngineError, match="unknown drafter weights 'sampled'"):
        GenerationConfig(drafter_weights="sampled").validate()


def test_the_embedded_preset_names_sampled_weights_only_for_methods_it_drafts():
    tiny = PRESETS["tiny"]
    assert set(tiny.sampled_drafters) <= set(tiny.drafters)
    assert set(tiny.sampled_drafters.values()) <= set(tiny.checkpoints())


def test_auto_proposals_follow_the_methods_own_choice(random_engine, monkeypatch):
    from dataclasses import replace

    from engine.contract.methods import METHOD_REGISTRY

    config = GenerationConfig(method="dflash", max_new_tokens=16, temperature=1.0)
    sampled = [t.draft_prob for s in random_engine.generate(PROMPT, config).steps for t in s.drafted]
    assert any(p < 1.0 for p in sampled)
    monkeypatch.setitem(METHOD_REGISTRY, "dflash", replace(METHOD_REGISTRY["dflash"], proposal="argmax"))
    argmax = [t.draft_prob for s in random_engine.generate(PROMPT, config).steps for t in s.drafted]
    assert argmax and all(p == 1.0 for p in argmax)
