"""A drafter may ship two checkpoints: its temperature-0 weights, and weights trained for sampling that the
engine drafts with above temperature 0 (GenerationConfig.drafter_weights "auto"); "greedy" keeps the first. Or one
checkpoint for both, drafting above 0 with what it holds for sampling (DSpark: its confidence calibration at T = 1)."""

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


@pytest.fixture(scope="module")
def one_weight_engine(tokenizer):
    """A random target with a DSpark drafter whose one network serves both temperatures, its confidence calibrated
    apart for each (the sampled calibration twice as flat at every position)."""
    target = tiny_qwen3(len(tokenizer))
    dspark = tiny_dspark(target)
    dspark.sampled_confidence_temperatures = [2.0 * t for t in dspark.confidence_temperatures]
    return Engine(target, tokenizer, {"dspark": dspark}, torch.device("cpu"), preset="random",
                  sampled_drafter_models={"dspark": dspark})


def first_confidences(result) -> list[float]:
    return [t.confidence for t in next(s for s in result.steps if s.drafted).drafted]


def test_one_network_for_both_temperatures_scores_sampled_runs_with_its_sampled_calibration(one_weight_engine):
    config = GenerationConfig(method="dspark", max_new_tokens=24, temperature=1.0, seed=3, scheduler="none")
    sampled = one_weight_engine.generate(PROMPT, config)
    greedy = one_weight_engine.generate(PROMPT, GenerationConfig(**{**config.__dict__, "drafter_weights": "greedy"}))
    assert sampled.drafter.endswith(", calibrated for T > 0") and "for T > 0" not in greedy.drafter
    assert draft_probs(sampled) == draft_probs(greedy)  # the same network drew the same tokens
    logit = lambda c: torch.logit(torch.tensor(c, dtype=torch.float64))  # noqa: E731
    # the first block's confidences: σ(z / 2t) against σ(z / t), the same logits z halved
    assert logit(first_confidences(sampled)) == pytest.approx(logit(first_confidences(greedy)) / 2, rel=1e-3, abs=1e-4)
    baseline = one_weight_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24))
    at_zero = one_weight_engine.generate(PROMPT, GenerationConfig(method="dspark", max_new_tokens=24))
    assert at_zero.output_ids == baseline.output_ids and "for T > 0" not in at_zero.drafter


def test_one_network_with_one_calibration_drafts_as_it_is_at_every_temperature(tokenizer):
    target = tiny_qwen3(len(tokenizer))
    dspark = tiny_dspark(target)
    engine = Engine(target, tokenizer, {"dspark": dspark}, torch.device("cpu"), preset="random",
                    sampled_drafter_models={"dspark": dspark})
    assert engine.drafter_label("dspark", 1.0) == engine.drafter_label("dspark")


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
