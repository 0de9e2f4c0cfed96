"""The DFlash draft network (arXiv 2602.06036): one non-causal pass drafts a whole block.

Input: the block [anchor, MASK × (B − 1)] embedded with the target's own embedding table. Conditioning
("KV injection"): the hidden states of 5 target layers at the committed positions are concatenated,
projected by `fc` (5H → H, no bias) and normalised by `hidden_norm`; in every draft layer the keys and
values are k_proj / v_proj of [context features ; block], queries come from the block only, k_norm acts on
all keys, and RoPE uses absolute positions. Hidden states of the mask positions go through the target's
LM head, so each mask position predicts the token that stands there.

Parameter and config names follow the public checkpoints (z-lab/dflash, DeepSpec's DFlash): a Qwen3
config with `dflash_config = {"target_layer_ids", "mask_token_id"}` and `block_size` (nested or top
level); weights `fc`, `hidden_norm`, `norm`, `layers.N.self_attn.{q,k,v,o}_proj`, `.q_norm`, `.k_norm`,
`layers.N.mlp.*`, `layers.N.input_layernorm`, `layers.N.post_attention_layernorm`, and, where a checkpoint
stores them (DeepSpec does), `embed_tokens` and `lm_head`. Without `target_layer_ids` the layers follow
z-lab's default for `num_target_layers`. Written for this project from the paper.

An ablation reads no target features (`dflash_config["target_features"]` false; absent means true): keys and
values then cover the block alone, so the drafter sees nothing of the context but the anchor. Its `fc` and
`hidden_norm` stay in the checkpoint, unused and untrained, so it has the layout every DFlash loader expects
(z-lab's code, which knows no such flag, would load it and inject features it never learned to read).

Saved, a drafter is z-lab's checkpoint as their loaders read it (`DFlashDraftModel.save_pretrained`): besides
`dflash_config`, their PyTorch `DFlashDraftModel` reads `block_size` and `num_target_layers` at the top level,
and their MLX loader `rope_theta`, `block_size` and `num_target_layers` there too.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel, Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm, Qwen3RotaryEmbedding, rotate_half


def dflash_setting(config: Qwen3Config, name: str, default=None):
    """A DFlash field from `dflash_config`, or from the top level of the config (older checkpoints)."""
    nested = getattr(config, "dflash_config", None) or {}
    return nested.get(name, getattr(config, name, default))


def spaced_layers(first: int, last: int, count: int) -> list[int]:
    """`count` layer indices evenly spaced from `first` to `last`, both included (rounded)."""
    return [round(first + i * (last - first) / (count - 1)) for i in range(count)]


def evenly_spaced_layers(num_target_layers: int, count: int = 5) -> list[int]:
    """Target layers read by the drafter: evenly spaced from layer 1 to layer N − 3, the papers' choice for
    deep targets (36 layers: 1, 9, 17, 25, 33). A shallow target (under 16 layers) keeps its top layer in
    the set, since in a small model the last layers carry most of what predicts the next tokens."""
    return spaced_layers(1, num_target_layers - 3 if num_target_layers >= 16 else num_target_layers - 1, count)


def zlab_default_layers(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """z-lab's default when a checkpoint names no target layers: one per draft layer, evenly spaced from
    layer 1 to layer N − 3 (Python's round, as theirs), or the middle layer for a one-layer drafter."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    first, span = 1, num_target_layers - 4
    return [int(round(first + i * span / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def target_layers_of(config: Qwen3Config) -> list[int]:
    layer_ids = dflash_setting(config, "target_layer_ids")
    if layer_ids is not None:
        return [int(i) for i in layer_ids]
    num_target_layers = getattr(config, "num_target_layers", None)
    if num_target_layers is None:
        raise ValueError("the config names neither target_layer_ids nor num_target_layers")
    return zlab_default_layers(int(num_target_layers), config.num_hidden_layers)


def refuse_sliding_window(config: Qwen3Config) -> None:
    """Every drafter here attends to its whole context; a checkpoint whose layers slide would draft
    differently, so it is refused instead of run wrongly."""
    sliding = [i for i, t in enumerate(getattr(config, "layer_types", None) or []) if t == "sliding_attention"]
    if sliding:
        raise ValueError(f"draft layers {sliding} use sliding-window attention, which SpecLab does not implement "
                         f"for drafters (only full attention)")


def checkpoint_keys(path: str, **hub) -> set[str]:
    """Weight names stored in a checkpoint (a folder or hub id), without loading the weights."""
    from safetensors import safe_open
    from transformers.utils import cached_file

    index = cached_file(path, "model.safetensors.index.json", _raise_exceptions_for_missing_entries=False, **hub)
    if index is not None:
        return set(json.loads(Path(index).read_text())["weight_map"])
    with safe_open(cached_file(path, "model.safetensors", **hub), framework="pt") as f:
        return set(f.keys())


def load_block_model(cls, path: str, device: torch.device, dtype: torch.dtype, **hub):
    """Build `cls` from a checkpoint and load every stored weight, refusing any weight the module does
    not have or any module weight the checkpoint lacks (silently wrong drafts otherwise)."""
    config = Qwen3Config.from_pretrained(path, **hub)
    config.has_own_embeddings = "embed_tokens.weight" in checkpoint_keys(path, **hub)
    model, info = cls.from_pretrained(path, config=config, dtype=dtype, output_loading_info=True, **hub)
    problems = [f"{name}: {', '.join(sorted(info[name])[:4])}" for name in ("missing_keys", "unexpected_keys")
                if info.get(name)]
    if problems:
        raise ValueError(f"weights do not match the {cls.__name__} layout ({'; '.join(problems)})")
    return model.to(device).eval().requires_grad_(False)


def rewrite_saved_config(directory, fields: dict, drop: tuple[str, ...] = ()) -> None:
    """Set `fields` in (and remove `drop` from) the config.json transformers just wrote into `directory`: what a
    checkpoint format needs that transformers does not write by itself (it writes the class name as the
    architecture, and the config as it holds it)."""
    path = Path(directory) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    for name in drop:
        config.pop(name, None)
    config.update(fields)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def share_target_embeddings(model, target) -> None:
    """A checkpoint's own embedding table and LM head (DeepSpec stores frozen copies of the target's) are
    dropped when they equal the target's, which then serve; copies that differ stay and are used."""
    for own, theirs in (("embed_tokens", target.get_input_embeddings()), ("lm_head", target.get_output_embeddings())):
        module = getattr(model, own, None)
        if module is not None and module.weight.shape == theirs.weight.shape \
                and torch.equal(module.weight.to(theirs.weight.dtype), theirs.weight):
            setattr(model, own, None)


class RMSNorm(Qwen3RMSNorm):
    """Qwen3's RMSNorm (same weight, same numbers). In float32 outside autocast, which is how drafters run on the
    CPU, it is torch's one fused op instead of seven small ones: a draft layer has four norms, and at a block of
    8 rows their per-op overhead is most of their cost. Training (autocast) keeps transformers' version."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        device_type = hidden_states.device.type  # autocast knows no "meta" (shape-only runs, tests)
        if hidden_states.dtype == self.weight.dtype == torch.float32 \
                and not (device_type != "meta" and torch.is_autocast_enabled(device_type)):
            return F.rms_norm(hidden_states, (hidden_states.shape[-1],), self.weight, self.variance_epsilon)
        return super().forward(hidden_states)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (batch, heads, length, head_dim); cos, sin: (batch, length, head_dim). transformers' Qwen3
    `rotate_half`; not its `apply_rotary_pos_emb`, which rotates queries and keys at the same positions, while
    here the keys also cover the context positions that give no queries."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


class DraftAttention(nn.Module):
    """Qwen3 attention (per-head q_norm / k_norm, RoPE, grouped KV heads) of a draft layer whose inputs are
    `input_width` wide (H for the block drafters, 2H for EAGLE-3's [embedding ; hidden]); keys and values
    may also cover context features that give no queries (the block drafters' KV injection)."""

    def __init__(self, config: Qwen3Config, layer_idx: int, input_width: int | None = None):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        width, bias = input_width or config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(width, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(width, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(width, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, block: torch.Tensor, context: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor,
                cache=None, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """block (b, q, width) and new context features (b, c, width) or None; cos/sin cover the c + q new
        key positions. Keys and values of earlier positions come from `cache`, which this call extends.
        attention_mask: bool, True = may attend (None: every key)."""
        b, q_len, _ = block.shape
        keys_in = block if context is None else torch.cat([context, block], dim=1)
        q = self.q_norm(self.q_proj(block).view(b, q_len, self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(keys_in).view(b, -1, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(keys_in).view(b, -1, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = _rope(q, cos[:, -q_len:], sin[:, -q_len:])
        k = _rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask,
                                             enable_gqa=self.num_heads != self.num_kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, q_len, -1))


class DFlashDecoderLayer(nn.Module):
    def __init__(self, config: Qwen3Config, layer_idx: int):
        super().__init__()
        self.self_attn = DraftAttention(config, layer_idx)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, context: torch.Tensor, cos, sin, cache=None, attention_mask=None):
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), context, cos, sin, cache, attention_mask)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class DFlashDraftModel(PreTrainedModel):
    config_class = Qwen3Config
    base_model_prefix = "dflash"
    _no_split_modules = ["DFlashDecoderLayer"]
    _supports_sdpa = True  # attention is always torch SDPA here, whatever the config asks

    def __init__(self, config: Qwen3Config):
        super().__init__(config)
        refuse_sliding_window(config)
        self.target_layer_ids = target_layers_of(config)
        self.block_size = int(dflash_setting(config, "block_size", 16))
        mask_token_id = dflash_setting(config, "mask_token_id")
        if mask_token_id is None:
            raise ValueError("the config has no mask_token_id")
        self.mask_token_id = int(mask_token_id)
        self.target_features = bool(dflash_setting(config, "target_features", True))  # False: the ablation above
        self.layers = nn.ModuleList([DFlashDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(config)
        self.fc = nn.Linear(len(self.target_layer_ids) * config.hidden_size, config.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        # Checkpoints that store the embedding table and LM head (DeepSpec's) load them here; otherwise the
        # drafter uses the target's (z-lab, and our own checkpoints).
        own = bool(getattr(config, "has_own_embeddings", False))
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size) if own else None
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False) if own else None
        self.post_init()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as transformers does, then complete config.json with `checkpoint_fields` and drop what only
        this process needs (`has_own_embeddings`, which the loader reads from the stored weights instead)."""
        super().save_pretrained(save_directory, *args, **kwargs)
        rewrite_saved_config(save_directory, self.checkpoint_fields(), drop=("has_own_embeddings",))

    def checkpoint_fields(self) -> dict:
        """Top-level fields z-lab's loaders read: `block_size` and `num_target_layers` (their PyTorch class reads
        both even when `dflash_config` names the layers), and `rope_theta` (their MLX loader), which transformers
        keeps only inside `rope_parameters` once it has read a config, so it is written back here at every save.
        `num_target_layers` is the target's depth, known to the config that trained the drafter (train/dflash.py)."""
        fields = {"block_size": self.block_size}
        rope = getattr(self.config, "rope_parameters", None) or {}
        rope_theta = rope.get("rope_theta", getattr(self.config, "rope_theta", None))
        if rope_theta is not None:
            fields["rope_theta"] = float(rope_theta)
        num_target_layers = getattr(self.config, "num_target_layers", None)
        if num_target_layers is not None:
            fields["num_target_layers"] = int(num_target_layers)
        return fields

    def forward(self, noise_embedding: torch.Tensor, target_hidden: torch.Tensor | None, position_ids: torch.Tensor,
                cache=None, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """noise_embedding (b, q, H): the embedded block. target_hidden (b, c, 5H): features of the context
        positions new to `cache` (None, and c = 0, for a drafter without target features). position_ids (b, c + q):
        their absolute positions, context first. Returns the block's final hidden states (b, q, H)."""
        context = self.hidden_norm(self.fc(target_hidden)) if self.target_features else None
        cos, sin = self.rotary_emb(noise_embedding, position_ids)
        hidden = noise_embedding
        for layer in self.layers:
            hidden = layer(hidden, context, cos, sin, cache, attention_mask)
        return self.norm(hidden)
