"""scripts/weights_beside.py: a drafter's shipped weights and a candidate's, side by side in one run."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engine.contract.types import EngineError
from engine.loop import Engine
from scripts import weights_beside
from tests.conftest import noisy_copy, tiny_qwen3

PROMPTS = ["def add(a, b):", "import os\nimport sys\n", "class Point:"]


@pytest.fixture(scope="module")
def noisier_engine(tokenizer):
    """random_engine's target (the same seed, so the same weights) with a much noisier EAGLE-3 lane: the candidate."""
    target = tiny_qwen3(len(tokenizer))
    return Engine(target, tokenizer, {"eagle3": noisy_copy(target, noise=0.5, seed=5)}, torch.device("cpu"))


def test_the_candidates_lane_is_measured_beside_the_shipped_one_and_the_baseline(random_engine, noisier_engine):
    blocks = weights_beside.compare(random_engine, noisier_engine, "eagle3", PROMPTS, [0.0, 1.0], [3],
                                    max_new_tokens=12)
    assert [(b["temperature"], b["drafts_per_step"]) for b in blocks] == [(0.0, 3), (1.0, 3)]
    greedy = blocks[0]
    assert greedy["mismatches"] == {}  # every lane wrote the baseline's tokens
    lanes = greedy["lanes"]
    assert lanes["baseline"]["speedup"] == 1.0 and "tau" not in lanes["baseline"]
    assert all(lanes[lane]["tokens"] == lanes["baseline"]["tokens"] == 12 * len(PROMPTS) for lane in lanes)
    # the noisier weights are the candidate's: fewer of their drafts are accepted
    assert lanes["shipped"]["tau"] > lanes["candidate"]["tau"] >= 1.0
    for lane in ("shipped", "candidate"):  # a chain's draft counts only once every draft before it was accepted
        positions = lanes[lane]["per_position"]
        assert len(positions) == 3 and positions[0]["drafts"] > 0
        assert all(p["low"] <= p["rate"] <= p["high"] for p in positions if p["drafts"])
        assert all(later["drafts"] <= earlier["accepted"] for earlier, later in zip(positions, positions[1:]))
    pairs = {(row["a"], row["b"]): row for row in greedy["pairwise"]}
    assert list(pairs) == weights_beside.PAIRS
    assert all(row["prompts"] == len(PROMPTS) and row["low"] <= row["ratio"] <= row["high"] for row in pairs.values())
    assert "tau" in blocks[1]["lanes"]["candidate"] and blocks[1]["mismatches"] == {}  # samples: never compared
    tau = greedy["tau_pair"]  # the candidate's τ over the shipped lane's, prompt by prompt: lower, the noisier weights
    assert tau["prompts"] == len(PROMPTS) and tau["low"] <= tau["ratio"] <= tau["high"] and tau["verdict"] == "b faster"
    assert tau["ratio"] == pytest.approx((lanes["candidate"]["tau"] / lanes["shipped"]["tau"]), rel=0.3)
    words = weights_beside.describe(blocks)
    assert "candidate / shipped" in words and "NOT the baseline's tokens" not in words
    assert "candidate / shipped τ: lower, " in words


class _OneTokenOff:
    """An engine whose runs write one token other than its own: what the identity check is there to catch."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def generate(self, prompt, config):
        result = self.engine.generate(prompt, config)
        return replace(result, output_ids=result.output_ids[:-1] + (result.output_ids[-1] + 1,))


def test_a_lane_that_does_not_write_the_baselines_tokens_is_named(random_engine, noisier_engine):
    blocks = weights_beside.compare(random_engine, _OneTokenOff(noisier_engine), "eagle3", PROMPTS, [0.0], [2],
                                    max_new_tokens=6)
    assert blocks[0]["mismatches"] == {"candidate": [0, 1, 2]}
    assert "NOT the baseline's tokens: candidate on prompts 0, 1, 2" in weights_beside.describe(blocks)


@pytest.mark.parametrize("argument, said", [
    ("eagle3", "give the lane and the folder"),
    ("baseline=assets/eagle3-drafter", "'baseline' has no shipped drafter in 'tiny'"),
    ("eagle3=assets/no-such-folder", "is not a checkpoint folder"),
])
def test_a_wrong_candidate_is_refused_in_one_line_before_anything_loads(argument, said, capsys, monkeypatch):
    monkeypatch.setattr(Engine, "load", lambda *a, **k: pytest.fail("loaded models for a refused candidate"))
    assert weights_beside.main([argument]) == 2
    error = capsys.readouterr().err
    assert said in error and error.count("\n") == 1


def test_a_training_checkpoint_is_measured_in_the_shipped_drafters_architecture(tmp_path):
    """A run part-way: its ckpt.pt's weights in the shipped drafter's architecture and config, rounded to float16 as
    an export is; weights of another shape are refused in one line."""
    from engine.contract.methods import METHOD_REGISTRY
    from engine.models import load_drafter

    kinds = METHOD_REGISTRY["eagle3"].kinds
    shipped = load_drafter("eagle3-drafter", kinds, torch.device("cpu"), torch.float32, local_files_only=True)
    trained = {name: weight + 0.01 * torch.randn_like(weight) if weight.is_floating_point() else weight
               for name, weight in shipped.state_dict().items()}
    torch.save({"model": trained, "optimizer": {}, "step": 7}, tmp_path / "ckpt.pt")
    folder = weights_beside.checkpoint_folder("tiny", "eagle3", tmp_path / "ckpt.pt", tmp_path / "out")
    reloaded = load_drafter(str(folder), kinds, torch.device("cpu"), torch.float32).state_dict()
    assert set(reloaded) == set(trained)
    for name, weight in trained.items():
        assert torch.equal(reloaded[name], weight.to(torch.float16).to(weight.dtype)), name

    name = next(n for n, w in trained.items() if w.is_floating_point())
    torch.save({"model": {**trained, name: trained[name][:1]}}, tmp_path / "other.pt")
    with pytest.raises(EngineError, match="do not fit the shipped eagle3 drafter") as refused:
        weights_beside.checkpoint_folder("tiny", "eagle3", tmp_path / "other.pt", tmp_path / "other")
    assert "\n" not in str(refused.value)
    torch.save({"step": 7}, tmp_path / "bare.pt")
    with pytest.raises(EngineError, match="not a training checkpoint"):
        weights_beside.checkpoint_folder("tiny", "eagle3", tmp_path / "bare.pt", tmp_path / "bare")
