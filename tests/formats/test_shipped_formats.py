"""The shipped drafters in the formats they claim, as the reference code reads them.

Each shipped drafter's config.json names the class of a public implementation that must load it as it is:
z-lab's `DFlashDraftModel` (z-lab/dflash, whose MLX loader reads the same config.json) for
assets/dflash-drafter, DeepSpec's `Qwen3DSparkModel` and `Qwen3Eagle3Model` (deepseek-ai/DeepSpec) for
assets/dspark-drafter and assets/eagle3-drafter. The config fields each loader reads and the weights each
module has are listed here by hand, from reading that code (none of it is imported or copied): a field
missing is a loader that fails or falls back to a default, a weight missing is one it leaves random, a
weight left over is one it never reads. The same holds for what the training code writes (a retrain keeps
the formats), older saves of ours still load, and `python -m engine.train reexport` migrates them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from engine.contract.methods import METHOD_REGISTRY
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from engine.models import load_drafter

from conftest import ASSETS, tiny_qwen3

# Fields of the Qwen3 draft layers all three reference modules build (attention, MLP, norms).
QWEN3_LAYER_FIELDS = {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                      "intermediate_size", "hidden_act", "rms_norm_eps", "attention_bias", "attention_dropout",
                      "vocab_size", "max_position_embeddings"}
# z-lab's PyTorch DFlashDraftModel: its layers read the layer types and window; it reads `num_target_layers` (for
# its default target layers, evaluated even when `dflash_config` names them) and `block_size` at the top level.
ZLAB_TORCH_FIELDS = QWEN3_LAYER_FIELDS | {"layer_types", "sliding_window", "num_target_layers", "block_size",
                                         "dflash_config"}
# z-lab's MLX load_draft reads these at the top level by key (no default), and two keys of `dflash_config`.
ZLAB_MLX_FIELDS = {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                   "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta", "max_position_embeddings",
                   "block_size", "num_target_layers", "dflash_config"}
ZLAB_NESTED_FIELDS = {"target_layer_ids", "mask_token_id"}
# DeepSpec's Qwen3DSparkModel: the fields its constructor asserts, and those its modules read.
DEEPSPEC_DSPARK_FIELDS = QWEN3_LAYER_FIELDS | {"layer_types", "sliding_window", "target_layer_ids", "mask_token_id",
                                              "num_anchors", "enable_confidence_head", "markov_rank", "block_size",
                                              "pad_token_id"}
# DeepSpec's Qwen3Eagle3Model, and its evaluator's check of a one-layer drafter.
DEEPSPEC_EAGLE3_FIELDS = QWEN3_LAYER_FIELDS | {"target_layer_ids", "ttt_length", "step_loss_decay", "pad_token_id",
                                              "draft_num_hidden_layers"}
# The architectures DeepSpec's evaluation entry point has an evaluator for (it looks up architectures[0]).
DEEPSPEC_EVALUATED = {"Qwen3DSparkModel", "Gemma4DSparkModel", "Qwen3Eagle3Model", "Gemma4Eagle3Model",
                      "Eagle3DraftModel"}


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _stored_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}


def _layer(prefix: str, config: dict, q_in: int) -> dict[str, tuple[int, ...]]:
    """One Qwen3-style draft layer of the reference modules: attention reading `q_in` features, MLP, norms."""
    hidden, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    head_dim, inter = config["head_dim"], config["intermediate_size"]
    shapes = {"self_attn.q_proj": (heads * head_dim, q_in), "self_attn.k_proj": (kv_heads * head_dim, q_in),
              "self_attn.v_proj": (kv_heads * head_dim, q_in), "self_attn.o_proj": (hidden, heads * head_dim)}
    weights = {f"{prefix}{name}.weight": shape for name, shape in shapes.items()}
    if config["attention_bias"]:
        weights |= {f"{prefix}{name}.bias": (shape[0],) for name, shape in shapes.items()}
    return weights | {
        f"{prefix}self_attn.q_norm.weight": (head_dim,), f"{prefix}self_attn.k_norm.weight": (head_dim,),
        f"{prefix}mlp.gate_proj.weight": (inter, hidden), f"{prefix}mlp.up_proj.weight": (inter, hidden),
        f"{prefix}mlp.down_proj.weight": (hidden, inter),
        f"{prefix}input_layernorm.weight": (hidden,), f"{prefix}post_attention_layernorm.weight": (hidden,)}


def zlab_dflash_weights(config: dict) -> dict[str, tuple[int, ...]]:
    """z-lab's DFlashDraftModel: its layers, `fc` over the concatenated target layers, `hidden_norm`, `norm`;
    no embedding table or LM head (it drafts with the target's); the rotary frequencies are not saved."""
    hidden, layer_ids = config["hidden_size"], config["dflash_config"]["target_layer_ids"]
    weights = {"fc.weight": (hidden, len(layer_ids) * hidden), "hidden_norm.weight": (hidden,), "norm.weight": (hidden,)}
    for i in range(config["num_hidden_layers"]):
        weights |= _layer(f"layers.{i}.", config, hidden)
    return weights


def deepspec_dspark_weights(config: dict) -> dict[str, tuple[int, ...]]:
    """DeepSpec's Qwen3DSparkModel: the DFlash backbone, its own embedding table and LM head, the Markov head
    (vanilla; gated adds gate_proj, rnn joint_proj) and the confidence head (reading the Markov embedding too
    when confidence_head_with_markov)."""
    hidden, vocab, rank = config["hidden_size"], config["vocab_size"], config["markov_rank"]
    weights = {"embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
               "fc.weight": (hidden, len(config["target_layer_ids"]) * hidden),
               "hidden_norm.weight": (hidden,), "norm.weight": (hidden,)}
    for i in range(config["num_hidden_layers"]):
        weights |= _layer(f"layers.{i}.", config, hidden)
    if rank:
        weights |= {"markov_head.markov_w1.weight": (vocab, rank), "markov_head.markov_w2.weight": (vocab, rank)}
        if config["markov_head_type"] == "gated":
            weights |= {"markov_head.gate_proj.weight": (rank, hidden + rank), "markov_head.gate_proj.bias": (rank,)}
        if config["markov_head_type"] == "rnn":
            weights |= {"markov_head.joint_proj.weight": (3 * rank, 2 * rank + hidden),
                        "markov_head.joint_proj.bias": (3 * rank,)}
    if config["enable_confidence_head"]:
        width = hidden + (rank if config["confidence_head_with_markov"] else 0)
        weights |= {"confidence_head.proj.weight": (1, width), "confidence_head.proj.bias": (1,)}
    return weights


def deepspec_eagle3_weights(config: dict) -> dict[str, tuple[int, ...]]:
    """DeepSpec's Qwen3Eagle3Model: embedding table, `fc`, layers whose attention reads [embedding ; hidden]
    (2H) and that have a `hidden_norm`, `norm`, LM head."""
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    weights = {"embed_tokens.weight": (vocab, hidden), "fc.weight": (hidden, len(config["target_layer_ids"]) * hidden),
               "norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    for i in range(config["num_hidden_layers"]):
        weights |= _layer(f"layers.{i}.", config, 2 * hidden) | {f"layers.{i}.hidden_norm.weight": (hidden,)}
    return weights


def check_zlab_dflash(folder: Path, num_target_layers: int) -> None:
    config = _config(folder)
    assert config["architectures"] == ["DFlashDraftModel"]
    assert not (ZLAB_TORCH_FIELDS | ZLAB_MLX_FIELDS) - set(config), "fields z-lab's loaders read are missing"
    nested = config["dflash_config"]
    assert not ZLAB_NESTED_FIELDS - set(nested)
    assert config["block_size"] == nested.get("block_size", config["block_size"])  # one block size, wherever read
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"]
    assert config["num_target_layers"] == num_target_layers
    assert all(0 <= i < num_target_layers for i in nested["target_layer_ids"])
    assert _stored_shapes(folder) == zlab_dflash_weights(config)


def check_deepspec_dspark(folder: Path, num_target_layers: int) -> None:
    config = _config(folder)
    assert config["architectures"] == ["Qwen3DSparkModel"] and config["architectures"][0] in DEEPSPEC_EVALUATED
    assert not DEEPSPEC_DSPARK_FIELDS - set(config), "fields DeepSpec's Qwen3DSparkModel reads are missing"
    if config["markov_rank"]:
        assert config["markov_head_type"] in ("vanilla", "gated", "rnn")
    if config["enable_confidence_head"]:
        assert "confidence_head_with_markov" in config
    assert config["tie_word_embeddings"] is False  # as DeepSpec writes it: the LM head is a tensor of its own
    layer_ids = config["target_layer_ids"]  # DeepSpec: strictly increasing, never the target's last layer
    assert layer_ids == sorted(set(layer_ids)) and all(0 <= i < num_target_layers - 1 for i in layer_ids)
    assert "has_own_embeddings" not in config  # ours alone, never saved
    assert _stored_shapes(folder) == deepspec_dspark_weights(config)


def check_deepspec_eagle3(folder: Path, num_target_layers: int) -> None:
    config = _config(folder)
    assert config["architectures"] == ["Qwen3Eagle3Model"] and config["architectures"][0] in DEEPSPEC_EVALUATED
    assert not DEEPSPEC_EAGLE3_FIELDS - set(config), "fields DeepSpec's Qwen3Eagle3Model reads are missing"
    assert config["draft_num_hidden_layers"] == config["num_hidden_layers"] == 1  # its evaluator's requirement
    assert config["tie_word_embeddings"] is False
    layer_ids = config["target_layer_ids"]
    assert layer_ids == sorted(set(layer_ids)) and all(0 <= i < num_target_layers - 1 for i in layer_ids)
    assert _stored_shapes(folder) == deepspec_eagle3_weights(config)


SHIPPED = {"dflash-drafter": check_zlab_dflash, "dspark-drafter": check_deepspec_dspark,
           "eagle3-drafter": check_deepspec_eagle3}


@pytest.mark.parametrize("folder", list(SHIPPED))
def test_shipped_drafter_has_every_field_and_exactly_the_weights_of_its_reference_class(folder):
    SHIPPED[folder](ASSETS / folder, _config(ASSETS / "target")["num_hidden_layers"])


def test_dsparks_stored_embeddings_and_head_are_the_targets_own():
    """DeepSpec's class drafts with the copies it finds in the checkpoint: they must be the target's, bit for bit."""
    stored = load_file(str(ASSETS / "dspark-drafter" / "model.safetensors"))
    target = load_file(str(ASSETS / "target" / "model.safetensors"))
    assert torch.equal(stored["embed_tokens.weight"], target["model.embed_tokens.weight"])
    head = target.get("lm_head.weight", target["model.embed_tokens.weight"])  # the target ties its head
    assert torch.equal(stored["lm_head.weight"], head)
    assert stored["lm_head.weight"].dtype == torch.float16


def test_the_model_card_names_the_class_that_loads_each_shipped_folder():
    from engine.train.card import REFERENCE_LOADERS

    card = json.loads((ASSETS / "model_card.json").read_text())
    assert set(REFERENCE_LOADERS) == set(card["models"])
    for folder, (architecture, _) in REFERENCE_LOADERS.items():
        assert _config(ASSETS / folder)["architectures"] == [architecture]
    text = (ASSETS / "MODEL_CARD.md").read_text()
    assert all(f"| {folder} | {architecture} |" in text for folder, (architecture, _) in REFERENCE_LOADERS.items())


# --- what the training code writes, older saves, and the migration --------------------------------------

# A target deep enough that the drafters' evenly spaced feature layers leave out its last one, which DeepSpec's
# evaluator refuses to read (train/dflash.py keeps the top layer of targets under 16 layers).
TINY_TARGET_LAYERS = 16

def _trained_drafters(target, mask_token_id: int = 1):
    """A DFlash and a DSpark drafter as the dflash and dspark stages build them for `target`."""
    from engine.drafters.dflash_model import DFlashDraftModel
    from engine.drafters.dspark_model import DSparkDraftModel
    from engine.train import dflash, dspark

    torch.manual_seed(0)
    dflash_drafter = DFlashDraftModel(dflash.dflash_config(target.config, mask_token_id))
    dspark_drafter = DSparkDraftModel(dspark.dspark_config(target.config, mask_token_id))
    dspark.init_markov_head(dspark_drafter)
    dspark_drafter.copy_target_embeddings(target)
    return {"dflash": dflash_drafter, "dspark": dspark_drafter}


def _as_older_save(folder: Path, kind: str) -> None:
    """Rewrite a drafter folder the way SpecLab saved it before following the reference layouts to the letter:
    DFlash without the top-level fields z-lab reads; DSpark under our class name, tie flag true, no copies of the
    target's embedding table and LM head."""
    config = _config(folder)
    if kind == "dflash":
        for name in ("block_size", "num_target_layers", "rope_theta"):
            config.pop(name)
    else:
        config.update(architectures=["DSparkDraftModel"], tie_word_embeddings=True)
        weights = load_file(str(folder / "model.safetensors"))
        del weights["embed_tokens.weight"], weights["lm_head.weight"]
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def test_a_retrain_saves_the_reference_formats(tmp_path):
    """The configs the dflash and dspark stages build, saved as their export saves them, are the formats above."""
    target = tiny_qwen3(300, layers=TINY_TARGET_LAYERS, hidden=32)
    for kind, drafter in _trained_drafters(target).items():
        drafter.to(torch.float16).save_pretrained(tmp_path / kind)
    check_zlab_dflash(tmp_path / "dflash", TINY_TARGET_LAYERS)
    check_deepspec_dspark(tmp_path / "dspark", TINY_TARGET_LAYERS)


def test_a_drafter_loaded_and_saved_again_keeps_its_format(tmp_path):
    """transformers folds `rope_theta` into `rope_parameters` when it reads a config and writes our class name as
    the architecture: a save after a load (a `--from-shipped` round) writes z-lab's and DeepSpec's fields again."""
    for kind, folder in (("dflash", "dflash-drafter"), ("deepspec", "dspark-drafter")):
        model = load_drafter(str(ASSETS / folder), (kind,), torch.device("cpu"))
        model.to(torch.float16).save_pretrained(tmp_path / folder)
    target_layers = _config(ASSETS / "target")["num_hidden_layers"]
    check_zlab_dflash(tmp_path / "dflash-drafter", target_layers)
    check_deepspec_dspark(tmp_path / "dspark-drafter", target_layers)


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_older_saves_of_ours_still_load_to_the_same_drafter(tmp_path, kind):
    folder = tmp_path / f"{kind}-drafter"
    shutil.copytree(ASSETS / f"{kind}-drafter", folder)
    _as_older_save(folder, kind)
    kinds = METHOD_REGISTRY[kind].kinds  # the checkpoint formats that may serve the lane
    older = load_drafter(str(folder), kinds, torch.device("cpu"))
    shipped = load_drafter(str(ASSETS / f"{kind}-drafter"), kinds, torch.device("cpu"))
    assert older.embed_tokens is None and older.lm_head is None  # SpecLab drafts with the target's
    own = {k: v for k, v in shipped.state_dict().items() if not k.startswith(("embed_tokens.", "lm_head."))}
    assert own.keys() == older.state_dict().keys()
    assert all(torch.equal(v, older.state_dict()[k]) for k, v in own.items())
    assert (older.block_size, older.mask_token_id, older.target_layer_ids) == \
        (shipped.block_size, shipped.mask_token_id, shipped.target_layer_ids)


def test_reexport_migrates_older_saves_to_the_reference_formats_with_the_same_weights(tmp_path, monkeypatch):
    """`python -m engine.train reexport`: older saves become z-lab's and DeepSpec's layouts, every weight they had
    unchanged, DSpark given the target's embedding table and LM head; run again, it writes the same bytes."""
    import engine.train.__main__ as cli

    assets = tmp_path / "assets"
    monkeypatch.setattr(cli, "ASSETS", assets)
    target = tiny_qwen3(300, layers=TINY_TARGET_LAYERS, hidden=32)
    target.to(torch.float16).save_pretrained(assets / "target")
    target = target.float()
    before = {}
    for kind, drafter in _trained_drafters(target).items():
        folder = assets / f"{kind}-drafter"
        drafter.to(torch.float16).save_pretrained(folder)
        _as_older_save(folder, kind)
        before[kind] = load_file(str(folder / "model.safetensors"))
    assert cli.main(["reexport", "--threads", "1"]) == 0
    check_zlab_dflash(assets / "dflash-drafter", TINY_TARGET_LAYERS)
    check_deepspec_dspark(assets / "dspark-drafter", TINY_TARGET_LAYERS)
    for kind, weights in before.items():
        after = load_file(str(assets / f"{kind}-drafter" / "model.safetensors"))
        assert all(torch.equal(after[name], tensor) for name, tensor in weights.items())
    written = {p: p.read_bytes() for p in assets.glob("d*-drafter/*")}
    assert cli.main(["reexport", "--threads", "1"]) == 0
    assert {p: p.read_bytes() for p in assets.glob("d*-drafter/*")} == written
