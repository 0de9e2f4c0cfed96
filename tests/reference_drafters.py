"""An independent oracle for the block drafters: plain functional torch over a checkpoint's state dict,
uncached, written from the reference implementations' documented behaviour (z-lab's DFlash and
DeepSpec's DFlash / DSpark), sharing no code with engine/drafters.

It always runs the checkpoint's whole block [anchor, MASK × (B − 1)] over the full context, attention
non-causal, and reads out the drafts the way each format does:
- z-lab DFlash: mask positions 1..B−1 predict the tokens at their own positions (B − 1 drafts);
- DeepSpec (DFlash and DSpark): position j predicts the token after it, the anchor the first (B drafts),
  then the Markov head (vanilla, gated or rnn) corrects them left to right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """x (heads, n, d) rotated by absolute positions (n,), the default (non-interleaved) RoPE."""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * inv_freq[None]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope_theta(config: dict) -> float:
    params = config.get("rope_parameters") or {}
    return float(params.get("rope_theta", config.get("rope_theta", 10000.0)))


def block_backbone(w: dict, config: dict, context_features: torch.Tensor, block_ids: torch.Tensor,
                   anchor_position: int, embed: torch.Tensor) -> torch.Tensor:
    """Post-norm hidden states (B, H) of the block at positions anchor_position.., reading the context
    features (c, n·H) of positions 0..c−1 (c = anchor_position)."""
    eps, theta = config.get("rms_norm_eps", 1e-6), rope_theta(config)
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    ctx = _rms(context_features @ w["fc.weight"].T, w["hidden_norm.weight"], eps)
    h = embed[block_ids]
    block_len, c = block_ids.numel(), ctx.shape[0]
    q_pos = torch.arange(anchor_position, anchor_position + block_len)
    k_pos = torch.cat([torch.arange(c), q_pos])
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        x = _rms(h, w[p + "input_layernorm.weight"], eps)
        keys_in = torch.cat([ctx, x])
        q = _rms((x @ w[p + "self_attn.q_proj.weight"].T).view(block_len, heads, head_dim),
                 w[p + "self_attn.q_norm.weight"], eps).transpose(0, 1)
        k = _rms((keys_in @ w[p + "self_attn.k_proj.weight"].T).view(-1, kv_heads, head_dim),
                 w[p + "self_attn.k_norm.weight"], eps).transpose(0, 1)
        v = (keys_in @ w[p + "self_attn.v_proj.weight"].T).view(-1, kv_heads, head_dim).transpose(0, 1)
        q, k = _rope(q, q_pos, theta), _rope(k, k_pos, theta)
        k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
        attn = torch.softmax(q @ k.transpose(1, 2) / head_dim ** 0.5, dim=-1) @ v  # every key visible
        h = h + attn.transpose(0, 1).reshape(block_len, -1) @ w[p + "self_attn.o_proj.weight"].T
        x = _rms(h, w[p + "post_attention_layernorm.weight"], eps)
        mlp = (F.silu(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T))
        h = h + mlp @ w[p + "mlp.down_proj.weight"].T
    return _rms(h, w["norm.weight"], eps)


def markov_bias(w: dict, head_type: str, prev_id: int, hidden: torch.Tensor, state):
    e = w["markov_head.markov_w1.weight"][prev_id]
    w2 = w["markov_head.markov_w2.weight"]
    if head_type == "vanilla":
        return e @ w2.T, None
    if head_type == "gated":
        g = torch.sigmoid(torch.cat([hidden, e]) @ w["markov_head.gate_proj.weight"].T + w["markov_head.gate_proj.bias"])
        return (g * e) @ w2.T, None
    state = torch.zeros_like(e) if state is None else state
    z = torch.cat([state, e, hidden]) @ w["markov_head.joint_proj.weight"].T + w["markov_head.joint_proj.bias"]
    r = e.numel()
    gate, cand, out = torch.sigmoid(z[:r]), torch.tanh(z[r: 2 * r]), torch.tanh(z[2 * r:])
    return out @ w2.T, gate * state + (1 - gate) * cand


def greedy_block_drafts(w: dict, config: dict, context_features: torch.Tensor, anchor_id: int, anchor_position: int,
                        embed: torch.Tensor, lm_head: torch.Tensor, layout: str) -> tuple[list[int], torch.Tensor]:
    """The whole block's greedy drafts and their logits, as the reference of `layout` ("zlab" or
    "deepspec") drafts them."""
    block_size = config.get("block_size") or config["dflash_config"]["block_size"]
    mask_id = config.get("mask_token_id") or config["dflash_config"]["mask_token_id"]
    block_ids = torch.tensor([anchor_id] + [mask_id] * (block_size - 1))
    out = block_backbone(w, config, context_features, block_ids, anchor_position, embed)
    if layout == "zlab":
        logits = out[1:] @ lm_head.T
        return logits.argmax(-1).tolist(), logits
    base = out @ lm_head.T
    if not config.get("markov_rank"):
        return base.argmax(-1).tolist(), base
    head_type, prev, state, ids, rows = config.get("markov_head_type", "vanilla"), anchor_id, None, [], []
    for k in range(block_size):
        bias, state = markov_bias(w, head_type, prev, out[k], state)
        row = base[k] + bias
        prev = int(row.argmax())
        ids.append(prev)
        rows.append(row)
    return ids, torch.stack(rows)
