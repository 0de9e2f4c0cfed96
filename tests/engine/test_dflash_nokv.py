"""DFlash without the target's features (an ablation: what KV injection buys): the flag survives a save and a load,
such a drafter's drafts ignore the target's hidden states while a normal one's follow them, it trains on exactly
what it drafts from, and the engine drafts with it on request only, its output still the baseline's at T = 0."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from conftest import tiny_dflash, tiny_qwen3
from engine.contract.methods import METHOD_REGISTRY
from engine.contract.types import EngineError, GenerationConfig
from engine.drafters import dflash
from engine.drafters.batched import batched
from engine.drafters.dflash import DFlashDrafter
from engine.drafters.dflash_model import checkpoint_keys
from engine.loop import Engine
from engine.models import forward_with_features, new_cache
from engine.timing import SpanClock
from engine.train.dflash import dflash_batch, dflash_config, sample_anchors

PROMPT = "def parse(self, text):\n"
ABLATION = dict(METHOD_REGISTRY["dflash"].ablations[0].overrides)  # {"drafter_weights": "no_features"}


@pytest.fixture(scope="module")
def target(tokenizer):
    return tiny_qwen3(len(tokenizer))


@pytest.fixture(scope="module")
def ablation_engine(tokenizer, target):
    """The normal tiny drafter in the DFlash lane, and one reading no features as its ablation."""
    return Engine(target, tokenizer, {"dflash": tiny_dflash(target)}, torch.device("cpu"), preset="random",
                  ablation_drafter_models={"dflash": tiny_dflash(target, seed=5, target_features=False)})


def test_the_flag_round_trips_through_a_checkpoint_and_is_absent_by_default(target, tmp_path):
    ablation, normal = tiny_dflash(target, target_features=False), tiny_dflash(target)
    ablation.save_pretrained(tmp_path / "nokv")
    normal.save_pretrained(tmp_path / "kv")
    saved = json.loads((tmp_path / "nokv" / "config.json").read_text())
    assert saved["dflash_config"]["target_features"] is False
    assert "target_features" not in json.loads((tmp_path / "kv" / "config.json").read_text())["dflash_config"]
    # the layout every DFlash loader expects: fc and hidden_norm kept, though never read
    assert {"fc.weight", "hidden_norm.weight"} <= checkpoint_keys(str(tmp_path / "nokv"))
    loaded = dflash.load(str(tmp_path / "nokv"), torch.device("cpu"), torch.float32)
    assert loaded.target_features is False and dflash.recognises(saved)
    assert dflash.load(str(tmp_path / "kv"), torch.device("cpu"), torch.float32).target_features is True
    assert all(torch.equal(a, b) for a, b in zip(ablation.state_dict().values(), loaded.state_dict().values()))
    # and the training config writes it only for the ablation
    assert dflash_config(target.config, 1, target_features=False).dflash_config["target_features"] is False
    assert "target_features" not in dflash_config(target.config, 1).dflash_config


def _block_probs(model, target, ids: torch.Tensor) -> torch.Tensor:
    """The drafter's block after `ids`, fed what the loop feeds it: the features it names, or none."""
    clock = SpanClock(torch.device("cpu"))
    drafter = DFlashDrafter(model, target)
    layers = drafter.target_layer_ids
    features = None if layers is None else forward_with_features(target, ids[:, :-1], new_cache(target), layers)[1]
    drafter.start(ids[:, :-1], features, clock)
    return drafter.propose(ids, model.block_size - 1, 1.0, torch.Generator(), clock).probs


def test_only_the_normal_drafter_reads_the_targets_hidden_states(target):
    """Another target with the same embeddings and LM head but other layers: other hidden states, same vocabulary."""
    other = copy.deepcopy(target)
    with torch.no_grad():
        for p in other.model.layers.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)) * 0.2)
    ids = torch.randint(2, 4000, (1, 12), generator=torch.Generator().manual_seed(1))
    normal, ablation = tiny_dflash(target), tiny_dflash(target, target_features=False)
    assert DFlashDrafter(ablation, target).target_layer_ids is None  # the loop computes no features for it
    assert not torch.allclose(_block_probs(normal, target, ids), _block_probs(normal, other, ids), atol=1e-4)
    assert torch.equal(_block_probs(ablation, target, ids), _block_probs(ablation, other, ids))


def test_training_drafts_exactly_what_the_drafter_drafts(target):
    """The batched training forward of the ablation (each block sees itself only) gives the inference path's block."""
    model = tiny_dflash(target, target_features=False)
    x = torch.randint(2, 4000, (1, 40), generator=torch.Generator().manual_seed(3))
    anchors = sample_anchors(1, 40, model.block_size, 4, torch.Generator().manual_seed(5))
    logits, _ = dflash_batch(model, target, x, torch.Generator().manual_seed(5), anchors_per_window=4)
    for m, anchor in enumerate(anchors[0].tolist()):
        probs = _block_probs(model, target, x[:, : anchor + 1])
        assert torch.allclose(logits[0, m].softmax(-1), probs, atol=1e-5)


def test_the_ablation_drafts_only_when_asked_and_keeps_the_baselines_output(ablation_engine):
    baseline = ablation_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24))
    normal = ablation_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=24))
    ablation = ablation_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=24, **ABLATION))
    tree = ablation_engine.generate(PROMPT, GenerationConfig(method="dflash_tree", max_new_tokens=24, **ABLATION))
    assert normal.output_ids == baseline.output_ids == ablation.output_ids == tree.output_ids
    assert "no target features" in tree.drafter  # DDTree grown over the ablation
    assert "no target features" in ablation.drafter and "no target features" not in normal.drafter
    drafted = lambda r: [t.id for s in r.steps for t in s.drafted]  # noqa: E731
    assert drafted(ablation) != drafted(normal)  # another drafter drafted


def test_an_engine_without_the_ablation_says_so_and_a_batch_refuses_it(random_engine, ablation_engine):
    with pytest.raises(EngineError, match="without the target's features"):
        random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=8, **ABLATION))
    drafter = ablation_engine.new_drafter("dflash", GenerationConfig(method="dflash", **ABLATION))
    with pytest.raises(EngineError, match="does not run in a batch"):
        batched(drafter, torch.device("cpu"))


def test_the_training_option_is_for_the_dflash_stage_only():
    from engine.train.__main__ import main

    for argv in (["eagle3", "--no-target-features"], ["dflash", "--no-target-features", "--sampled"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2


def test_the_lesson_recipe_measures_dflash_beside_its_ablation_with_intervals(ablation_engine, random_engine):
    from engine.measure.lesson import kv_injection

    prompts = [PROMPT, "class Stack:\n    def push(self, item):\n", "import os\n\ndef walk(path):\n"]
    doc = kv_injection(ablation_engine, prompts, max_new_tokens=16, rounds=1)
    data = doc["data"]
    assert data["method"] == "dflash" and set(data["lanes"]) == {"dflash", "dflash_no_features"}
    assert data["ablations"] == {"dflash_no_features": "trained without the target's features"}
    assert "no target features" in data["lanes"]["dflash_no_features"]["drafter"]
    for lane in data["lanes"].values():  # each headline is the ratio its interval is around
        for key, interval in (("tau", lane["tau_interval"]), ("speedup", lane["speedup_interval"])):
            assert interval["low"] <= lane[key] <= interval["high"]
            assert abs(interval["mean"] - lane[key]) < 2e-3
        assert lane["speedup_interval"]["low"] < lane["speedup_interval"]["high"]  # three prompts' times differ
    with pytest.raises(ValueError, match="without the target's features"):
        kv_injection(random_engine, prompts, max_new_tokens=8, rounds=1)


def test_the_model_card_measures_and_names_the_ablation_where_the_engine_holds_it(ablation_engine, random_engine):
    from engine.train.card import _shipped_models, card_lanes, render_markdown

    assert ("dflash_no_features", "dflash", ABLATION) in card_lanes(ablation_engine)
    assert not any(name.endswith("_no_features") for name, _, _ in card_lanes(random_engine))
    assert _shipped_models(ablation_engine)["dflash-drafter-nokv"] is ablation_engine.ablation_drafter_models["dflash"]
    models = {name: {"parameters": 1e6, "disk_mb": 1.0, "train_minutes": 1.0, "rounds": None}
              for name in ("dflash-drafter", "dflash-drafter-nokv")}
    models["dflash-drafter-nokv"]["target_features"] = False
    lane = {"drafts_per_step": 7, "tau": 2.0, "per_position_acceptance": [0.5]}
    card = {"models": models, "lanes": {"dflash": lane, "dflash_no_features": lane}, "total_disk_mb": 2.0,
            "heldout_prompts": 3, "target_shape": {"layers": 2, "width": 64, "grown_from": None},
            "greedy_loop_rate": 0.0, "python_version": "3", "torch_version": "2"}
    rows = {}  # each name's first row: the models' table (the loaders' table names the folders again)
    for line in render_markdown(card).splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert "reads no target features" in rows["dflash-drafter-nokv"]
    assert "reads target features" in rows["dflash-drafter"] and "no target" not in rows["dflash-drafter"]
    assert "dflash_no_features" in rows
