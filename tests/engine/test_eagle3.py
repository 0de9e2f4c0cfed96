"""EAGLE-3: drafting with cache rollback equals an uncached reference, the lane is lossless at temperature 0,
DeepSpec's checkpoint layout loads, and the training-time test trains (and matches inference).

The reference below is plain functional torch over a state dict, written from the described behaviour
of DeepSpec's `Qwen3Eagle3Model`, sharing no code with engine/drafters/eagle3.py: every draft
is recomputed from scratch over the whole sequence of (hidden, token, position) inputs, causally.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from engine.drafters.eagle3 import Eagle3Drafter
from engine.timing import SpanClock
from engine.contract.types import EngineError, GenerationConfig

from conftest import EAGLE3_LAYER_IDS as LAYER_IDS, tiny_eagle3, tiny_qwen3



# --- the reference -------------------------------------------------------------------------------------

def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x, positions, theta):
    """x (heads, n, d) rotated by absolute positions (n,), non-interleaved halves."""
    d = x.shape[-1]
    angles = positions.float()[:, None] / theta ** (torch.arange(0, d, 2).float() / d)[None]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


def reference_outputs(w: dict, config: dict, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor):
    """Pre-norm outputs (n, H) of the draft layers over inputs hidden (n, H), tokens (n,), positions (n,),
    every position attending to itself and the ones before it."""
    eps, theta = config["rms_norm_eps"], config["rope_parameters"]["rope_theta"]
    heads, kv_heads, head_dim = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    n = tokens.numel()
    e = w["embed_tokens.weight"][tokens]
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        x = torch.cat([_rms(e, w[p + "input_layernorm.weight"], eps), _rms(hidden, w[p + "hidden_norm.weight"], eps)], -1)
        q = _rms((x @ w[p + "self_attn.q_proj.weight"].T).view(n, heads, head_dim), w[p + "self_attn.q_norm.weight"], eps)
        k = _rms((x @ w[p + "self_attn.k_proj.weight"].T).view(n, kv_heads, head_dim), w[p + "self_attn.k_norm.weight"], eps)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).view(n, kv_heads, head_dim)
        q, k, v = _rope(q.transpose(0, 1), positions, theta), _rope(k.transpose(0, 1), positions, theta), v.transpose(0, 1)
        k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
        scores = (q @ k.transpose(1, 2)) / head_dim ** 0.5
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        attn = (torch.softmax(scores, -1) @ v).transpose(0, 1).reshape(n, -1)
        hidden = hidden + attn @ w[p + "self_attn.o_proj.weight"].T
        y = _rms(hidden, w[p + "post_attention_layernorm.weight"], eps)
        hidden = hidden + (F.silu(y @ w[p + "mlp.gate_proj.weight"].T) * (y @ w[p + "mlp.up_proj.weight"].T)) \
            @ w[p + "mlp.down_proj.weight"].T
    return hidden


def reference_logits(w, config, hidden):
    return _rms(hidden, w["norm.weight"], config["rms_norm_eps"]) @ w["lm_head.weight"].T


def reference_drafts(w: dict, config: dict, committed: torch.Tensor, features: torch.Tensor, k: int):
    """Greedy drafts (k,) and their logits (k, V) after `committed` (n,), from the target's features of
    positions 0..n−2 (n − 1, 5H), recomputed from scratch for every draft. Feature p pairs with token p + 1
    at position p; each draft then feeds back the last output with the drafted token at the next position."""
    n = committed.numel()
    hidden = features @ w["fc.weight"].T
    tokens, positions = committed[1:], torch.arange(n - 1)
    ids, logits = [], []
    for _ in range(k):
        last = reference_outputs(w, config, hidden, tokens, positions)[-1]
        step_logits = reference_logits(w, config, last)
        token = step_logits.argmax()
        ids.append(token)
        logits.append(step_logits)
        hidden = torch.cat([hidden, last[None]])
        tokens, positions = torch.cat([tokens, token[None]]), torch.cat([positions, positions[-1:] + 1])
    return torch.stack(ids), torch.stack(logits)


# --- fixtures ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def target(tokenizer):
    return tiny_qwen3(len(tokenizer), layers=6)


def features_of(target, ids: torch.Tensor) -> torch.Tensor:
    out = target(ids, output_hidden_states=True)
    return torch.cat([out.hidden_states[i + 1] for i in LAYER_IDS], dim=-1)


def config_dict(model) -> dict:
    return model.config.to_dict()


# --- 1. incremental drafting with rollback equals drafting from scratch ---------------------------------

@pytest.mark.parametrize("layers", [1, 2])
def test_drafts_equal_uncached_reference_across_rounds(target, layers):
    model = tiny_eagle3(target, layers)
    w, config = {k: v.float() for k, v in model.state_dict().items()}, config_dict(model)
    drafter, clock = Eagle3Drafter(model), SpanClock(torch.device("cpu"))
    prompt = torch.randint(1, target.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        drafter.start(prompt, features_of(target, prompt), clock)
        committed = torch.cat([prompt, torch.tensor([[17]])], dim=1)  # the prefill's token
        # (draft length, accepted): rejections, partial accepts, a full accept, and K = 1.
        for k, num_accepted in [(4, 0), (3, 2), (5, 5), (1, 0), (6, 3), (2, 1)]:
            block = drafter.propose(committed, k, 0.0, torch.Generator(), clock)
            assert len([s for s in clock.take() if s.work == "draft"]) == k  # K serial forwards
            expected_ids, expected_logits = reference_drafts(w, config, committed[0], features_of(target, committed)[0, :-1], k)
            assert torch.equal(block.ids, expected_ids)
            assert torch.allclose(block.probs.log(), F.log_softmax(expected_logits, -1), atol=1e-4)
            n = committed.shape[1]
            verified = torch.cat([committed, block.ids[:num_accepted].view(1, -1)], dim=1)
            drafter.accept(n + num_accepted, features_of(target, verified)[:, n - 1:])
            assert drafter.cache.get_seq_length() == n - 1  # the serial steps' entries are gone
            committed = torch.cat([verified, torch.tensor([[5 + k]])], dim=1)  # + the bonus


# --- 2. lossless at temperature 0 ----------------------------------------------------------------------

def test_ar_lane_with_eagle3_equals_baseline(target, tokenizer):
    from engine.loop import Engine

    engine = Engine(target, tokenizer, {"eagle3": tiny_eagle3(target)}, torch.device("cpu"), preset="random")
    assert engine.drafter_label("eagle3") == "EAGLE-3, 1 layer"
    prompt = "def parse(self, text):\n"
    baseline = engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=40))
    for k in (1, 3, 5):
        result = engine.generate(prompt, GenerationConfig(method="eagle3", max_new_tokens=40, drafts_per_step=k))
        assert result.output_ids == baseline.output_ids


# --- 3. DeepSpec's checkpoint layout -----------------------------------------------------------------------

def deepspec_checkpoint(path, target, generator, layer_ids=LAYER_IDS, drop: str | None = None, **overrides) -> dict:
    """A checkpoint written as DeepSpec writes one: its config fields and exactly its weight names."""
    c = target.config
    hidden, heads, kv, hd, inter, vocab = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                                           c.intermediate_size, c.vocab_size)
    config = {"architectures": ["Qwen3Eagle3Model"], "model_type": "qwen3", "hidden_size": hidden,
              "intermediate_size": inter, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
              "num_hidden_layers": 1, "layer_types": ["full_attention"], "vocab_size": vocab, "rms_norm_eps": 1e-6,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "max_position_embeddings": 96,
              "attention_bias": False, "tie_word_embeddings": False, "target_layer_ids": layer_ids, "ttt_length": 7,
              "num_target_layers": c.num_hidden_layers, "step_loss_decay": 0.8, "draft_num_hidden_layers": 1,
              **overrides}

    def rand(*shape, scale=0.2):
        return torch.randn(*shape, generator=generator) * scale

    def norm(n):
        return torch.rand(n, generator=generator) + 0.5

    weights = {
        "embed_tokens.weight": target.get_input_embeddings().weight.clone(),
        "fc.weight": rand(hidden, 5 * hidden),
        "layers.0.self_attn.q_proj.weight": rand(heads * hd, 2 * hidden),
        "layers.0.self_attn.k_proj.weight": rand(kv * hd, 2 * hidden),
        "layers.0.self_attn.v_proj.weight": rand(kv * hd, 2 * hidden),
        "layers.0.self_attn.o_proj.weight": rand(hidden, heads * hd),
        "layers.0.self_attn.q_norm.weight": norm(hd), "layers.0.self_attn.k_norm.weight": norm(hd),
        "layers.0.mlp.gate_proj.weight": rand(inter, hidden), "layers.0.mlp.up_proj.weight": rand(inter, hidden),
        "layers.0.mlp.down_proj.weight": rand(hidden, inter),
        "layers.0.hidden_norm.weight": norm(hidden), "layers.0.input_layernorm.weight": norm(hidden),
        "layers.0.post_attention_layernorm.weight": norm(hidden),
        "norm.weight": norm(hidden),
        "lm_head.weight": target.get_output_embeddings().weight.clone(),
    }
    if drop:
        weights.pop(drop)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    return weights


def test_deepspec_checkpoint_loads_every_weight_and_drafts(target, tmp_path):
    from engine.models import load_drafter
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

    weights = deepspec_checkpoint(tmp_path / "ckpt", target, torch.Generator().manual_seed(7))
    model = load_drafter(str(tmp_path / "ckpt"), ("eagle3",), torch.device("cpu"))
    loaded = model.state_dict()
    assert set(loaded) == set(weights)  # no missing and no unexpected names
    for name, tensor in weights.items():
        assert torch.equal(loaded[name], tensor), name
    fresh = Qwen3RotaryEmbedding(model.config)  # a buffer, not in the checkpoint: it must survive the load
    assert torch.allclose(model.rotary_emb.inv_freq, fresh.inv_freq)
    assert model.target_layer_ids == LAYER_IDS and model.ttt_length == 7

    drafter, clock = Eagle3Drafter(model), SpanClock(torch.device("cpu"))
    prompt = torch.randint(1, target.config.vocab_size, (1, 7), generator=torch.Generator().manual_seed(1))
    committed = torch.cat([prompt, torch.tensor([[3]])], dim=1)
    with torch.no_grad():
        drafter.start(prompt, features_of(target, prompt), clock)
        block = drafter.propose(committed, 4, 0.0, torch.Generator(), clock)
        expected_ids, _ = reference_drafts(weights, model.config.to_dict(), committed[0], features_of(target, prompt)[0], 4)
    assert torch.equal(block.ids, expected_ids)

    saved = tmp_path / "resaved"  # our own save keeps DeepSpec's architecture name
    model.save_pretrained(saved)
    assert json.loads((saved / "config.json").read_text())["architectures"] == ["Qwen3Eagle3Model"]
    assert torch.equal(load_drafter(str(saved), ("eagle3",), torch.device("cpu")).fc.weight, weights["fc.weight"])


@pytest.mark.parametrize("change, message", [
    (dict(drop="norm.weight"), "missing norm.weight"),
    (dict(layer_ids=[0, 1, 2]), "needs 5 target_layer_ids"),
    (dict(layer_ids=[0, 1, 2, 3, 5]), "last layer"),
    (dict(layer_ids=[0, 2, 1, 3, 4]), "increasing"),
    (dict(layer_types=["sliding_attention"], use_sliding_window=True, sliding_window=16), "full attention"),
])
def test_unsupported_checkpoints_are_refused(target, tmp_path, change, message):
    from engine.models import load_drafter

    deepspec_checkpoint(tmp_path, target, torch.Generator().manual_seed(7), **change)
    with pytest.raises(EngineError, match=message):
        load_drafter(str(tmp_path), ("eagle3",), torch.device("cpu"))


# --- 4. training ---------------------------------------------------------------------------------------

def test_training_time_test_matches_the_inference_chain(target):
    """Step k of the training-time test at index i is the k-th serial draft forward after (f_0..f_i,
    t_1..t_{i+1}), fed the true tokens: same attention, positions and hidden states as at inference."""
    from engine.train.eagle3 import ttt_logits

    model = tiny_eagle3(target)
    w, config = {k: v.float() for k, v in model.state_dict().items()}, config_dict(model)
    x = torch.randint(1, target.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(2))
    anchors = torch.tensor([[0, 6, 16], [3, 9, 15]])  # i + 7 ≤ T − 1: every step has a token and a target
    steps = 7
    with torch.no_grad():
        first, later, teacher = ttt_logits(model, target, x, steps, anchors)
        features = features_of(target, x)
        assert torch.allclose(teacher, target(x).logits)
        for b in range(2):
            hidden = features[b, :-1] @ w["fc.weight"].T  # f_p pairs with token p + 1
            outputs = reference_outputs(w, config, hidden, x[b, 1:], torch.arange(23))
            assert torch.allclose(first[b, :-1], reference_logits(w, config, outputs), atol=1e-4)
            for m, i in enumerate(anchors[b].tolist()):
                h, tokens = hidden[: i + 1], x[b, 1: i + 2]
                last = outputs[i]
                for k in range(1, steps):
                    h = torch.cat([h, last[None]])
                    tokens, positions = torch.cat([tokens, x[b, i + 1 + k: i + 2 + k]]), torch.arange(i + 1 + k)
                    last = reference_outputs(w, config, h, tokens, positions)[-1]
                    assert torch.allclose(later[k - 1, b, m], reference_logits(w, config, last), atol=1e-4), (b, i, k)


def test_loss_is_the_step_weighted_soft_cross_entropy_to_the_target(target):
    """Step k at index i is scored against the target's distribution of token i + 2 + k, weighted 0.8^k."""
    from engine.train.eagle3 import eagle3_loss, sample_anchors, ttt_logits

    model = tiny_eagle3(target)
    x = torch.randint(1, target.config.vocab_size, (2, 20), generator=torch.Generator().manual_seed(5))
    steps, count = 7, 4
    with torch.no_grad():
        loss = eagle3_loss(model, target, torch.Generator().manual_seed(9), anchors_per_window=count)(x)
        anchors = sample_anchors(2, 20, count, steps, torch.Generator().manual_seed(9))
        first, later, _ = ttt_logits(model, target, x, steps, anchors)
        target_logits = target(x).logits

    def soft_ce(teacher, draft):
        return -(teacher.softmax(-1) * draft.log_softmax(-1)).sum()

    step_means = [torch.stack([soft_ce(target_logits[b, i + 1], first[b, i]) for b in range(2) for i in range(19)]).mean()]
    for k in range(1, steps):
        step_means.append(torch.stack([soft_ce(target_logits[b, i + 1 + k], later[k - 1, b, m])
                                       for b in range(2) for m, i in enumerate(anchors[b].tolist())]).mean())
    weights = torch.tensor([0.8 ** k for k in range(steps)])
    assert torch.allclose(loss, (torch.stack(step_means) * weights).sum() / weights.sum(), atol=1e-4)


def test_a_few_training_steps_reduce_the_loss(target):
    from engine.train.eagle3 import eagle3_loss, init_from_target

    model = tiny_eagle3(target).train()
    model.requires_grad_(True)
    init_from_target(model, target)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n in ("embed_tokens.weight", "lm_head.weight")}
    assert torch.equal(frozen["lm_head.weight"], target.get_output_embeddings().weight)
    loss_fn = eagle3_loss(model, target, torch.Generator().manual_seed(0), anchors_per_window=8)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    x = torch.randint(1, target.config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(3))
    losses = []
    for _ in range(4):
        loss = loss_fn(x)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
        assert model.fc.weight.grad.abs().sum() > 0 and model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    for name, p in model.named_parameters():
        if name in frozen:
            assert p.grad is None and torch.equal(p, frozen[name])
