"""The public checkpoint formats, proven offline: tiny random checkpoints written in each public layout
(z-lab DFlash, DeepSpec DFlash, DeepSpec DSpark with each Markov head, DeepSpec EAGLE-3, a Qwen3 target
and small drafter) into a local hub cache under the real repo ids, then loaded through the real presets'
code path with the hub offline.

The layouts are written here by hand from the formats' documentation (weight names, config fields), not
by our modules, and the block drafters' drafts are checked against an independent reference
(reference_drafters.py) at every draft length: a shorter block or an off-by-one read-out fails.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from engine.loop import Engine
from engine.contract.methods import METHOD_REGISTRY
from engine.models import drafter_kind_of, implementation, forward_with_features, load_drafter, new_cache
from engine.contract.presets import PRESETS
from engine.timing import SpanClock
from engine.contract.types import EngineError, GenerationConfig

from conftest import noisy_copy, tiny_qwen3
from reference_drafters import greedy_block_drafts

TARGET_LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 8, 64, 4, 2, 16, 128
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
                 "{% endif %}")
PROMPT = "def parse(self, text):"


def _rand(generator, *shape, scale=0.15):
    return torch.randn(*shape, generator=generator) * scale


def _norm(generator, size):
    return 1.0 + _rand(generator, size, scale=0.1)


def _layer(prefix: str, generator, q_in: int) -> dict[str, torch.Tensor]:
    """One Qwen3-style draft layer under the public names; q/k/v read `q_in` features."""
    return {
        prefix + "self_attn.q_proj.weight": _rand(generator, HEADS * HEAD_DIM, q_in),
        prefix + "self_attn.k_proj.weight": _rand(generator, KV_HEADS * HEAD_DIM, q_in),
        prefix + "self_attn.v_proj.weight": _rand(generator, KV_HEADS * HEAD_DIM, q_in),
        prefix + "self_attn.o_proj.weight": _rand(generator, HIDDEN, HEADS * HEAD_DIM),
        prefix + "self_attn.q_norm.weight": _norm(generator, HEAD_DIM),
        prefix + "self_attn.k_norm.weight": _norm(generator, HEAD_DIM),
        prefix + "mlp.gate_proj.weight": _rand(generator, INTER, HIDDEN),
        prefix + "mlp.up_proj.weight": _rand(generator, INTER, HIDDEN),
        prefix + "mlp.down_proj.weight": _rand(generator, HIDDEN, INTER),
        prefix + "input_layernorm.weight": _norm(generator, HIDDEN),
        prefix + "post_attention_layernorm.weight": _norm(generator, HIDDEN),
    }


def _base_config(target) -> dict:
    config = target.config.to_dict()
    for key in ("architectures", "dtype", "torch_dtype", "transformers_version"):
        config.pop(key, None)
    return config


def _snapshot(cache: Path, repo_id: str) -> Path:
    """The folder of a hub repo's snapshot in a hub cache, with refs/main pointing at it."""
    root = cache / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    return snapshot


def _write(cache: Path, repo_id: str, config: dict, weights: dict[str, torch.Tensor]) -> Path:
    folder = _snapshot(cache, repo_id)
    (folder / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder


def deepspec_block(target, generator, markov_rank: int, head_type: str | None, confidence: bool,
                   own_lm_head: torch.Tensor | None = None, layers: int = 2, block_size: int = 7):
    """A DeepSpec `Qwen3DSparkModel` checkpoint (DFlash when markov_rank is 0 and there is no confidence
    head), with the frozen copies of the target's embedding and LM head DeepSpec stores."""
    vocab = target.config.vocab_size
    config = _base_config(target) | {
        "architectures": ["Qwen3DSparkModel"], "num_hidden_layers": layers, "num_target_layers": TARGET_LAYERS,
        "layer_types": ["full_attention"] * layers, "block_size": block_size, "mask_token_id": 1,
        "target_layer_ids": [1, 2, 4, 5, 6], "num_anchors": 512, "markov_rank": markov_rank,
        "enable_confidence_head": confidence, "tie_word_embeddings": False}
    if markov_rank:
        config["markov_head_type"] = head_type
    if confidence:
        config["confidence_head_with_markov"] = bool(markov_rank)
    weights = {"fc.weight": _rand(generator, HIDDEN, 5 * HIDDEN), "hidden_norm.weight": _norm(generator, HIDDEN),
               "norm.weight": _norm(generator, HIDDEN),
               "embed_tokens.weight": target.get_input_embeddings().weight.clone(),
               "lm_head.weight": (own_lm_head if own_lm_head is not None
                                  else target.get_output_embeddings().weight).clone()}
    for i in range(layers):
        weights |= _layer(f"layers.{i}.", generator, HIDDEN)
    if markov_rank:
        weights["markov_head.markov_w1.weight"] = _rand(generator, vocab, markov_rank, scale=1.0)
        weights["markov_head.markov_w2.weight"] = _rand(generator, vocab, markov_rank, scale=0.5)
        if head_type == "gated":
            weights["markov_head.gate_proj.weight"] = _rand(generator, markov_rank, HIDDEN + markov_rank)
            weights["markov_head.gate_proj.bias"] = _rand(generator, markov_rank)
        if head_type == "rnn":
            weights["markov_head.joint_proj.weight"] = _rand(generator, 3 * markov_rank, 2 * markov_rank + HIDDEN)
            weights["markov_head.joint_proj.bias"] = _rand(generator, 3 * markov_rank)
    if confidence:
        weights["confidence_head.proj.weight"] = _rand(generator, 1, HIDDEN + markov_rank)
        weights["confidence_head.proj.bias"] = _rand(generator, 1)
    return config, weights


def zlab_dflash(target, generator, layers: int = 2, block_size: int = 16):
    """A z-lab DFlash checkpoint: `dflash_config` without target_layer_ids (z-lab then derives them from
    num_target_layers), block_size at the top level, no embedding or LM head."""
    config = _base_config(target) | {
        "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "num_hidden_layers": layers, "num_target_layers": TARGET_LAYERS, "layer_types": ["full_attention"] * layers,
        "block_size": block_size, "dflash_config": {"mask_token_id": 1}}
    num_features = 2  # z-lab's default for a 2-layer drafter reads 2 target layers
    weights = {"fc.weight": _rand(generator, HIDDEN, num_features * HIDDEN),
               "hidden_norm.weight": _norm(generator, HIDDEN), "norm.weight": _norm(generator, HIDDEN)}
    for i in range(layers):
        weights |= _layer(f"layers.{i}.", generator, HIDDEN)
    return config, weights


def deepspec_eagle3(target, generator):
    """A DeepSpec `Qwen3Eagle3Model` checkpoint: one layer whose q/k/v read [embedding ; hidden] (2H)."""
    config = _base_config(target) | {
        "architectures": ["Qwen3Eagle3Model"], "num_hidden_layers": 1, "num_target_layers": TARGET_LAYERS,
        "layer_types": ["full_attention"], "target_layer_ids": [1, 2, 4, 5, 6], "ttt_length": 7,
        "step_loss_decay": 0.8, "draft_num_hidden_layers": 1, "tie_word_embeddings": False}
    weights = {"embed_tokens.weight": target.get_input_embeddings().weight.clone(),
               "lm_head.weight": target.get_output_embeddings().weight.clone(),
               "fc.weight": _rand(generator, HIDDEN, 5 * HIDDEN), "norm.weight": _norm(generator, HIDDEN),
               "layers.0.hidden_norm.weight": _norm(generator, HIDDEN)}
    weights |= _layer("layers.0.", generator, 2 * HIDDEN)
    return config, weights


@pytest.fixture(scope="module")
def hub(tokenizer, tmp_path_factory):
    """A hub cache holding every checkpoint of the real presets, as tiny random models."""
    cache = tmp_path_factory.mktemp("hub")
    target = tiny_qwen3(len(tokenizer), layers=TARGET_LAYERS, hidden=HIDDEN, context=256, seed=5)
    target.config.eos_token_id = tokenizer.eos_token_id
    folder = _snapshot(cache, "Qwen/Qwen3-4B")
    target.save_pretrained(folder)
    chat_tokenizer = copy.deepcopy(tokenizer)
    chat_tokenizer.chat_template = CHAT_TEMPLATE
    chat_tokenizer.save_pretrained(folder)
    noisy_copy(target, noise=0.05).save_pretrained(_snapshot(cache, "Qwen/Qwen3-0.6B"))
    g = torch.Generator().manual_seed(11)
    checkpoints = {
        "deepseek-ai/eagle3_qwen3_4b_ttt7": deepspec_eagle3(target, g),
        "deepseek-ai/dflash_qwen3_4b_block7": deepspec_block(target, g, 0, None, False),
        "deepseek-ai/dspark_qwen3_4b_block7": deepspec_block(target, g, 16, "vanilla", True),
        "z-lab/Qwen3-4B-DFlash-b16": zlab_dflash(target, g),
    }
    for repo_id, (config, weights) in checkpoints.items():
        _write(cache, repo_id, config, weights)
    return SimpleNamespace(cache=cache, target=target, checkpoints=checkpoints)


def _features(target, ids: torch.Tensor, layer_ids) -> torch.Tensor:
    return forward_with_features(target, ids, new_cache(target), layer_ids)[1]


def _first_block(hub, folder: Path, config: dict, weights: dict, kinds, layout: str, k: int):
    """Our drafter's first block of k drafts and the reference's whole block, on the same context."""
    model = load_drafter(str(folder), kinds, torch.device("cpu"), dtype=torch.float32)
    engine = SimpleNamespace(target=hub.target, verify_steps_per_s=None)
    drafter = implementation(drafter_kind_of(model)).build(model, engine)
    prompt = torch.randint(2, hub.target.config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(3))
    anchor = 77
    features = _features(hub.target, prompt, drafter.target_layer_ids)
    clock = SpanClock(torch.device("cpu"))
    drafter.start(prompt, features, clock)
    block = drafter.propose(torch.cat([prompt, torch.tensor([[anchor]])], dim=1), k, 0.0, torch.Generator(), clock)
    embed = weights.get("embed_tokens.weight", hub.target.get_input_embeddings().weight)
    lm_head = weights.get("lm_head.weight", hub.target.get_output_embeddings().weight)
    ref_ids, ref_logits = greedy_block_drafts(weights, config, features[0], anchor, prompt.shape[1], embed, lm_head,
                                              layout)
    return model, block, ref_ids, ref_logits


LAYOUTS = {  # name -> (writer, kinds the lane accepts, reference read-out)
    "zlab_dflash_b16": (lambda t, g: zlab_dflash(t, g), METHOD_REGISTRY["dflash"].kinds, "zlab"),
    "deepspec_dflash": (lambda t, g: deepspec_block(t, g, 0, None, False), METHOD_REGISTRY["dflash"].kinds, "deepspec"),
    "deepspec_dspark_vanilla": (lambda t, g: deepspec_block(t, g, 16, "vanilla", True),
                                METHOD_REGISTRY["dspark"].kinds, "deepspec"),
    "deepspec_dspark_gated": (lambda t, g: deepspec_block(t, g, 16, "gated", True), METHOD_REGISTRY["dspark"].kinds,
                              "deepspec"),
    "deepspec_dspark_rnn": (lambda t, g: deepspec_block(t, g, 16, "rnn", False), METHOD_REGISTRY["dspark"].kinds,
                            "deepspec"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_block_drafts_equal_the_reference_at_every_length(hub, tmp_path, layout):
    """At every draft length the drafts are the first k of the reference's whole-block drafts: the
    whole checkpoint block runs, and each format reads its drafts from the right positions."""
    writer, kinds, read_out = LAYOUTS[layout]
    config, weights = writer(hub.target, torch.Generator().manual_seed(21))
    folder = _write(tmp_path, "local/" + layout, config, weights)
    block_size = config["block_size"]
    longest = block_size - 1 if read_out == "zlab" else block_size
    for k in sorted({1, 3, longest}):
        _, block, ref_ids, ref_logits = _first_block(hub, folder, config, weights, kinds, read_out, k)
        assert block.ids.tolist() == ref_ids[:k], f"k={k}"
        assert torch.allclose(block.probs, ref_logits[:k].softmax(-1), atol=1e-5), f"k={k}"


def test_deepspec_embeddings_equal_to_the_target_are_shared_and_different_ones_used(hub, tmp_path):
    config, weights = deepspec_block(hub.target, torch.Generator().manual_seed(1), 0, None, False)
    model, _, _, _ = _first_block(hub, _write(tmp_path, "local/same", config, weights), config, weights,
                                  ("deepspec",), "deepspec", 3)
    assert model.embed_tokens is None and model.lm_head is None  # equal copies: the target's serve

    other_head = hub.target.get_output_embeddings().weight + 0.05
    config, weights = deepspec_block(hub.target, torch.Generator().manual_seed(1), 16, "gated", True, own_lm_head=other_head)
    model, block, ref_ids, ref_logits = _first_block(hub, _write(tmp_path, "local/other", config, weights), config,
                                                     weights, ("deepspec",), "deepspec", 7)
    assert model.lm_head is not None and torch.equal(model.lm_head.weight, other_head)
    assert block.ids.tolist() == ref_ids and torch.allclose(block.probs, ref_logits.softmax(-1), atol=1e-5)


@pytest.mark.parametrize("change, message", [
    (lambda c, w: c.update(layer_types=["sliding_attention", "full_attention"], use_sliding_window=True,
                           sliding_window=4), "sliding-window"),
    (lambda c, w: c.update(markov_head_type="transformer"), "markov_head_type"),
    (lambda c, w: c.update(markov_head_type="vanilla"), "unexpected"),  # gated weights, vanilla config
    (lambda c, w: w.pop("markov_head.gate_proj.bias"), "missing"),
])
def test_unsupported_or_mismatched_checkpoints_are_refused_in_one_line(hub, tmp_path, change, message):
    config, weights = deepspec_block(hub.target, torch.Generator().manual_seed(2), 16, "gated", True)
    change(config, weights)
    folder = _write(tmp_path, "local/bad", config, weights)
    with pytest.raises(EngineError, match=message) as err:
        load_drafter(str(folder), ("deepspec",), torch.device("cpu"))
    assert "\n" not in str(err.value)


def test_zlab_default_target_layers_follow_num_target_layers(hub):
    model = load_drafter("z-lab/Qwen3-4B-DFlash-b16", METHOD_REGISTRY["dflash"].kinds, torch.device("cpu"),
                         cache_dir=str(hub.cache), local_files_only=True)
    assert model.target_layer_ids == [1, 5]  # 8 target layers, 2 draft layers: 1 to N − 3 evenly
    assert model.block_size == 16


@pytest.mark.parametrize("preset", ["qwen3-4b", "qwen3-4b-zlab"])
def test_real_preset_runs_offline_from_the_hub_cache_with_identity(hub, preset):
    engine = Engine.load(preset, "cpu", cache_dir=str(hub.cache), offline=True)
    assert engine.methods() == list(METHOD_REGISTRY)  # every lane of the preset loaded
    labels = {m: engine.drafter_label(m) for m in engine.methods()}
    assert labels["eagle3"].startswith("EAGLE-3") and labels["classic"].startswith("small LM")
    assert labels["dflash"].startswith("DFlash (DeepSpec" if preset == "qwen3-4b" else "DFlash,")
    assert labels["dspark"].startswith("DSpark")
    prompt_ids = engine.encode_prompt(PROMPT)
    assert "</think>" in engine.tokenizer.decode(prompt_ids)  # the chat template, thinking off
    baseline = engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=20))
    for method in engine.methods()[1:]:
        result = engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=20,
                                                          drafts_per_step=METHOD_REGISTRY[method].default_drafts))
        assert result.output_ids == baseline.output_ids, method
        assert result.drafter == labels[method]


def test_preset_refused_in_one_line_when_weights_are_neither_cached_nor_downloadable(tmp_path):
    with pytest.raises(EngineError, match="neither cached nor downloadable") as err:
        Engine.load("qwen3-4b", "cpu", cache_dir=str(tmp_path), offline=True)
    assert "Qwen/Qwen3-4B" in str(err.value) and "\n" not in str(err.value)


def test_a_preset_too_large_for_the_gpus_free_memory_is_refused_unless_the_check_is_off(monkeypatch):
    """The free-memory check reads the GPU's free memory; where the loading process has no GPU of its own (ZeroGPU's,
    answered by a stand-in) the loader turns it off."""
    import engine.models as models

    monkeypatch.setattr(models, "_cached", lambda name, cache_dir: True)
    monkeypatch.setattr(models, "_weights_bytes", lambda name, cache_dir: 8 * 2**30)
    read = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: read.append(device) or (2**30, 2 * 2**30))
    cuda = torch.device("cuda")
    with pytest.raises(EngineError, match="needs about .* GiB of GPU memory; 1.0 GiB is free"):
        models.require_runnable(PRESETS["qwen3-4b"], "cuda", cuda, None, offline=True)
    assert read == [cuda]
    assert models.require_runnable(PRESETS["qwen3-4b"], "cuda", cuda, None, offline=True, check_memory=False) == {
        "cache_dir": None, "local_files_only": True}
    assert read == [cuda]  # not read again


def test_preset_that_needs_a_gpu_is_refused_on_a_cpu_unless_asked_for(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EngineError, match="needs a CUDA GPU"):
        Engine.load("qwen3-4b", "auto", cache_dir=str(tmp_path), offline=True)


def test_presets_are_an_allowlist():
    with pytest.raises(EngineError, match="unknown preset"):
        Engine.load("someone/any-repo", "cpu")
    for preset in PRESETS.values():
        assert set(preset.drafters) <= set(METHOD_REGISTRY)


@pytest.mark.parametrize("entry, field", [
    ({"id": True, "text": "a", "prob": 0.1}, "id"), ({"id": -1, "text": "a", "prob": 0.1}, "id"),
    ({"id": 1, "text": 3, "prob": 0.1}, "text"), ({"id": 1, "text": "a", "prob": float("nan")}, "prob"),
    ({"id": 1, "text": "a", "prob": float("inf")}, "prob"), ({"id": 1, "text": "a", "prob": False}, "prob"),
    ({"id": 1, "text": "a", "prob": 1.5}, "prob")])
def test_a_saved_top_k_entry_is_refused_naming_its_field(entry, field):
    """A top-k list is read on a quick path; a bad entry still fails with the field named."""
    from engine.contract.types import _Reader
    with pytest.raises(ValueError, match=f"draft_top {field}"):
        _Reader().top([{"id": 2, "text": "b", "prob": 0.5}, entry], "draft_top")
    assert _Reader().top([{"id": 2, "text": "b", "prob": 1 + 1e-7}], "draft_top")[0].prob == 1.0
