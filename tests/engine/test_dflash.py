"""DFlash: draft-cache bookkeeping, and loading a checkpoint written with the public config fields."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from engine.drafters.dflash import DFlashDrafter
from engine.drafters.dflash_model import DFlashDraftModel, evenly_spaced_layers
from engine.models import forward_with_features, load_drafter, new_cache
from engine.timing import SpanClock

from conftest import decoder_layer_weights

PROMPT = "def parse(self, text):\n"


def features_of(engine, ids: torch.Tensor, layer_ids) -> torch.Tensor:
    return forward_with_features(engine.target, ids, new_cache(engine.target), layer_ids)[1]


@pytest.mark.parametrize("num_accepted", [0, 1, 3, 5])  # 5 = the whole block: the edge case
def test_draft_cache_after_accepts_and_rejects(random_engine, num_accepted):
    """The cache holds only committed context; drafting after any verdict equals a fresh drafter's."""
    k = 5
    model = random_engine.drafter_models["dflash"]
    clock = SpanClock(torch.device("cpu"))
    prompt = torch.tensor([random_engine.encode_prompt(PROMPT)])
    n = prompt.shape[1]
    drafter = DFlashDrafter(model, random_engine.target)
    drafter.start(prompt, features_of(random_engine, prompt, model.target_layer_ids), clock)
    committed = torch.cat([prompt, torch.tensor([[42]])], dim=1)  # the prefill's token is the first anchor
    block = drafter.propose(committed, k, 0.0, torch.Generator(), clock)
    assert drafter.cache.get_seq_length() == n  # the prompt as context; the block's keys are gone
    assert block.ids.shape == (k,) and block.probs.shape == (k, model.config.vocab_size)

    # Verification accepted `num_accepted` drafts; the target's features of anchor + accepted come back.
    verified = torch.cat([committed, block.ids[:num_accepted].view(1, -1)], dim=1)
    step_features = features_of(random_engine, verified, model.target_layer_ids)[:, n:]
    drafter.accept(n + 1 + num_accepted, step_features)
    committed = torch.cat([verified, torch.tensor([[7]])], dim=1)  # + the bonus, the next anchor
    again = drafter.propose(committed, k, 0.0, torch.Generator(), clock)
    assert drafter.cache.get_seq_length() == committed.shape[1] - 1

    fresh = DFlashDrafter(model, random_engine.target)
    fresh.start(committed[:, :-1], features_of(random_engine, committed[:, :-1], model.target_layer_ids), clock)
    expected = fresh.propose(committed, k, 0.0, torch.Generator(), clock)
    assert torch.equal(again.ids, expected.ids)
    assert torch.allclose(again.probs, expected.probs, atol=1e-5)


def test_block_is_drafted_in_one_forward(random_engine):
    from engine.contract.types import GenerationConfig

    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=20, drafts_per_step=6))
    for step in result.steps:
        assert len([s for s in step.spans if s.work == "draft"]) == (1 if step.num_verified else 0)


def test_drafts_per_step_are_capped_by_the_trained_block(random_engine):
    from engine.contract.types import GenerationConfig

    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=30, drafts_per_step=16))
    assert max(step.num_verified for step in result.steps) == random_engine.drafter_models["dflash"].block_size - 1


def test_target_layers_follow_the_paper():
    assert evenly_spaced_layers(36) == [1, 9, 17, 25, 33]  # DeepSpec's Qwen3 drafters
    assert evenly_spaced_layers(8) == [1, 2, 4, 6, 7]  # a shallow target keeps its top layer


def test_checkpoint_with_public_config_fields_loads(tmp_path, random_engine):
    """A checkpoint laid out like the public DFlash ones (config fields and weight names written here by
    hand, not by our module) loads with no missing or unexpected weight."""
    hidden, heads, kv_heads, head_dim, inter, layers = 64, 4, 2, 16, 128, 2
    config = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": 300, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 256, "rope_theta": 1000000.0, "attention_bias": False, "torch_dtype": "float32",
        "block_size": 16,
        "dflash_config": {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": 151669},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    g = torch.Generator().manual_seed(0)
    weights = {"fc.weight": torch.randn(hidden, 5 * hidden, generator=g),
               "hidden_norm.weight": torch.ones(hidden), "norm.weight": torch.ones(hidden)}
    for i in range(layers):
        weights |= decoder_layer_weights(f"layers.{i}.", hidden, heads, kv_heads, head_dim, inter, g)
    save_file(weights, str(tmp_path / "model.safetensors"))
    _, info = DFlashDraftModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    model = load_drafter(str(tmp_path), ("dflash",), torch.device("cpu"))
    assert (model.block_size, model.mask_token_id, model.target_layer_ids) == (16, 151669, [1, 9, 17, 25, 33])
    assert torch.equal(model.fc.weight, weights["fc.weight"])
    assert torch.equal(model.layers[1].self_attn.k_proj.weight, weights["layers.1.self_attn.k_proj.weight"])


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_shorter_drafts_are_the_head_of_the_whole_block(random_engine, method):
    """Asked for k < B drafts, a block drafter still runs its whole trained block (attention inside it is
    bidirectional) and keeps the first k: the drafts and their distributions equal the full block's head."""
    model = random_engine.drafter_models[method]
    prompt = torch.tensor([random_engine.encode_prompt(PROMPT)])
    features = features_of(random_engine, prompt, model.target_layer_ids)
    committed = torch.cat([prompt, torch.tensor([[42]])], dim=1)
    clock = SpanClock(torch.device("cpu"))

    def draft(k: int):
        drafter = random_engine.new_drafter(method)
        drafter.start(prompt, features, clock)
        return drafter.propose(committed, k, 0.0, torch.Generator(), clock)

    full = draft(random_engine.new_drafter(method).max_drafts)
    for k in (1, 2, 4):
        head = draft(k)
        assert torch.equal(head.ids, full.ids[:k])
        assert torch.allclose(head.probs, full.probs[:k], atol=1e-6)


def test_drafter_norm_gives_qwen3s_numbers_fused_and_under_autocast():
    """The drafters' RMSNorm: bit-identical to transformers' Qwen3RMSNorm in float32 (where it runs one fused op),
    and transformers' own computation under bfloat16 autocast (training)."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    from engine.drafters.dflash_model import RMSNorm

    ours, theirs = RMSNorm(48, eps=1e-6), Qwen3RMSNorm(48, eps=1e-6)
    with torch.no_grad():
        theirs.weight.normal_(generator=torch.Generator().manual_seed(0))
        ours.weight.copy_(theirs.weight)
    x = torch.randn(2, 9, 48, generator=torch.Generator().manual_seed(1)) * 3
    assert torch.equal(ours(x), theirs(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x.bfloat16()
        assert ours(y).dtype == theirs(y).dtype and torch.equal(ours(y), theirs(y))


def test_the_lane_header_says_how_many_tokens_a_block_drafts(random_engine):
    """z-lab's block size counts the anchor, DeepSpec's (DSpark's lane) does not: every header counts the drafts,
    so a DFlash "block 8" beside DSpark's "block 7" never reads as one more drafted token."""
    model = random_engine.drafter_models["dflash"]
    for method in ("dflash", "dspark"):
        label = random_engine.drafter_label(method)
        assert f"{random_engine.max_drafts(method)} drafts per block" in label and "block " not in label, label
    assert DFlashDrafter(model, random_engine.target).max_drafts == model.block_size - 1
