"""DSpark: the Markov head's formula, both schedulers' choices, cut tokens in the trace, checkpoint loading."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from engine.contract.methods import METHOD_REGISTRY
from engine.drafters.deepspec import markov_sample
from engine.drafters.dspark_model import DSparkDraftModel
from engine.models import load_drafter
from engine.scheduler import (fit_verify_cost, static_cut, steps_per_s_from_timings, survival, throughput_cut,
                              verify_len)
from engine.contract.types import GenerationConfig

from conftest import decoder_layer_weights

PROMPT = "def parse(self, text):\n"


def test_markov_head_adds_the_bigram_bias_of_the_previous_token():
    """A hand-made bias: after token 2 token 4 is favoured, after token 4 token 1 is."""
    vocab = 5
    bias_table = torch.zeros(vocab, vocab)
    bias_table[2, 4] = 3.0
    bias_table[4, 1] = 2.0
    base = torch.tensor([[0.0, 0.5, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0, 0.0], [0.3, 0.0, 0.0, 0.0, 0.0]])
    bias = lambda prev, k, state: (bias_table[prev], state)  # noqa: E731
    ids, probs = markov_sample(base[None], torch.tensor([2]), bias, 0.0, [torch.Generator()])
    assert ids[0].tolist() == [4, 1, 0]  # 4 (1+3 wins), then 1 (0+2 beats 1), then 0 (0.3, no bias after 1)
    assert torch.allclose(probs[0, 0], torch.softmax(base[0] + bias_table[2], -1))
    assert torch.allclose(probs[0, 1], torch.softmax(base[1] + bias_table[4], -1))
    ids, probs = markov_sample(base[None], torch.tensor([2]), bias, 1.0, [torch.Generator().manual_seed(0)])
    for k in range(3):
        prev = 2 if k == 0 else ids[0, k - 1].item()
        assert torch.allclose(probs[0, k], torch.softmax(base[k] + bias_table[prev], -1))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_markov_head_samples_a_batch_as_each_block_alone(temperature):
    """Blocks of several requests sampled together, position by position: each request's tokens and distributions
    are those it samples alone, its draws from its own generator, and one that keeps fewer drafts draws no more
    (so its generator is where a single run would leave it)."""
    torch.manual_seed(0)
    vocab, rows, length = 7, 3, 4
    bias_table, base = torch.randn(vocab, vocab), torch.randn(rows, length, vocab)
    bias = lambda prev, k, state: (bias_table[prev], state)  # noqa: E731
    anchors, ks = torch.tensor([1, 5, 2]), [4, 2, 3]
    together = [torch.Generator().manual_seed(r) for r in range(rows)]
    ids, probs = markov_sample(base, anchors, bias, temperature, together, ks)
    for r, k in enumerate(ks):
        alone = torch.Generator().manual_seed(r)
        own_ids, own_probs = markov_sample(base[r: r + 1, :k], anchors[r: r + 1], bias, temperature, [alone])
        assert torch.equal(ids[r, :k], own_ids[0]) and torch.allclose(probs[r, :k], own_probs[0])
        assert torch.equal(together[r].get_state(), alone.get_state())


def test_markov_head_of_the_model_is_low_rank_w2_of_w1(random_engine):
    model = random_engine.drafter_models["dspark"]
    prev = torch.tensor(17)
    expected = model.markov_head.markov_w1.weight[17] @ model.markov_head.markov_w2.weight.T
    hidden = torch.randn(model.config.hidden_size)  # the vanilla head ignores the backbone's state
    assert torch.allclose(model.markov_head.step(prev, hidden)[0], expected, atol=1e-5)


def test_throughput_scheduler_follows_the_formula():
    confidences = [0.9, 0.8, 0.3, 0.9]
    # τ(ℓ)·SPS(1+ℓ): ℓ=0: 1·100, ℓ=1: 1.9·95 = 180.5, ℓ=2: 2.62·90 = 235.8, ℓ=3: 2.836·80 = 226.9 (worse: stop)
    assert throughput_cut(confidences, [0.0, 100.0, 95.0, 90.0, 80.0, 60.0]) == 2
    # ℓ=3: 2.836·85 = 241.06, ℓ=4: 3.0304·80 = 242.4: each improves, so all four are admitted
    assert throughput_cut(confidences, [0.0, 100.0, 95.0, 90.0, 85.0, 80.0]) == 4
    assert survival(confidences) == pytest.approx([0.9, 0.72, 0.216, 0.1944])


def test_throughput_scheduler_stops_at_the_first_non_improvement():
    """ℓ=1 loses (1.5·60 < 100) though ℓ=2 would win (1.995·95): the early stop keeps ℓ = 0."""
    assert throughput_cut([0.5, 0.99], [0.0, 100.0, 60.0, 95.0]) == 0


def test_a_noisy_verify_timing_cannot_make_the_scheduler_verify_nothing():
    """Timings of a CPU where verify cost is about 3.8 ms + 0.25 ms per token, with the 2-token forward hit
    by a burst of load (×2): the raw table makes ℓ = 0 win on every step (1.9 / 8.6 ms < 1 / 4.05 ms); the
    fitted cost model keeps the scheduler verifying confident drafts."""
    seconds = [3.8e-3 + 0.25e-3 * n for n in range(1, 10)]
    seconds[1] *= 2.0
    raw = [0.0] + [1.0 / t for t in seconds]
    confidences = [0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5]
    assert throughput_cut(confidences, raw) == 0  # what the raw profile did (the failure this guards against)
    fitted = steps_per_s_from_timings(seconds)
    assert all(a >= b for a, b in zip(fitted[1:], fitted[2:]))  # verifying more never gets faster
    assert throughput_cut(confidences, fitted) >= 4
    a, b = fit_verify_cost([3.8e-3 + 0.25e-3 * n for n in range(1, 10)])
    assert a == pytest.approx(3.8e-3) and b == pytest.approx(0.25e-3)  # exact on noise-free timings


def test_static_cut_stops_at_the_first_low_confidence():
    assert static_cut([0.9, 0.6, 0.4, 0.95], 0.5) == 2
    assert static_cut([0.9, 0.6], 0.5) == 2
    assert verify_len("none", [0.1, 0.1], 0.5, None) == 2


@pytest.mark.parametrize("scheduler", ["throughput", "static", "none"])
def test_dspark_trace_marks_cut_tokens(random_engine, scheduler, monkeypatch):
    # The throughput scheduler's verify-speed profile, fixed at the shape measured for the embedded target on
    # these CPUs (one target forward 7.0 ms + 0.3 ms per verified token): the trace is checked against cuts the
    # scheduler must make, not against how the tiny random target's own profile came out (under load its
    # per-token cost drowns in noise, the fitted profile is flat, and a flat profile never cuts).
    profile = steps_per_s_from_timings([7.0e-3 + 0.3e-3 * n for n in range(1, 10)])
    monkeypatch.setattr(random_engine, "verify_steps_per_s", lambda: profile)
    config = GenerationConfig(method="dspark", max_new_tokens=40, drafts_per_step=7, scheduler=scheduler,
                              confidence_threshold=0.6)
    result = random_engine.generate(PROMPT, config)
    for step in result.steps:
        cut = [t for t in step.drafted if t.verdict == "cut"]
        assert len(cut) == len(step.drafted) - step.num_verified
        assert all(0.0 <= t.confidence <= 1.0 for t in step.drafted)
        if scheduler == "static":
            assert step.num_verified == static_cut([t.confidence for t in step.drafted], 0.6)
    if scheduler == "none":
        assert all(step.num_verified == len(step.drafted) for step in result.steps)
    else:
        assert any(step.num_verified < len(step.drafted) for step in result.steps)


def test_dspark_drafts_a_token_per_block_position(random_engine):
    model = random_engine.drafter_models["dspark"]
    result = random_engine.generate(PROMPT, GenerationConfig(method="dspark", max_new_tokens=30, drafts_per_step=16,
                                                             scheduler="none"))
    assert max(len(step.drafted) for step in result.steps) == model.block_size  # γ inputs, γ drafted tokens


def test_checkpoint_with_deepspec_config_fields_loads(tmp_path):
    hidden, heads, kv_heads, head_dim, inter, vocab, rank = 64, 4, 2, 16, 128, 300, 8
    config = {
        "architectures": ["Qwen3DSparkModel"], "model_type": "qwen3", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": 1, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": vocab, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 256, "attention_bias": False, "torch_dtype": "float32",
        "block_size": 7, "mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33], "num_target_layers": 36,
        "num_anchors": 512, "markov_rank": rank, "markov_head_type": "vanilla", "enable_confidence_head": True,
        "confidence_head_with_markov": True, "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    g = torch.Generator().manual_seed(0)
    weights = decoder_layer_weights("layers.0.", hidden, heads, kv_heads, head_dim, inter, g) | {
        "fc.weight": torch.randn(hidden, 5 * hidden, generator=g), "hidden_norm.weight": torch.ones(hidden),
        "norm.weight": torch.ones(hidden),
        "embed_tokens.weight": torch.randn(vocab, hidden, generator=g),  # DeepSpec's frozen copies of the
        "lm_head.weight": torch.randn(vocab, hidden, generator=g),  # target's: not needed here
        "markov_head.markov_w1.weight": torch.randn(vocab, rank, generator=g),
        "markov_head.markov_w2.weight": torch.randn(vocab, rank, generator=g),
        "confidence_head.proj.weight": torch.randn(1, hidden + rank, generator=g),
        "confidence_head.proj.bias": torch.zeros(1),
    }
    save_file(weights, str(tmp_path / "model.safetensors"))
    _, info = DSparkDraftModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"]
    assert set(info["unexpected_keys"]) <= {"embed_tokens.weight", "lm_head.weight"}
    model = load_drafter(str(tmp_path), ("deepspec",), torch.device("cpu"))
    assert (model.block_size, model.mask_token_id, model.markov_rank) == (7, 151669, rank)
    assert torch.equal(model.markov_head.markov_w2.weight, weights["markov_head.markov_w2.weight"])
    assert torch.equal(model.confidence_head.proj.weight, weights["confidence_head.proj.weight"])


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_saved_drafter_reloads_to_the_same_function(random_engine, tmp_path, kind):
    """Every buffer (the rotary frequencies too) and setting survives save and load: same outputs."""
    model = random_engine.drafter_models[kind]
    model.save_pretrained(tmp_path / kind)
    loaded = load_drafter(str(tmp_path / kind), METHOD_REGISTRY[kind].kinds, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(1, 6, model.config.hidden_size, generator=g)
    features = torch.randn(1, 5, len(model.target_layer_ids) * model.config.hidden_size, generator=g)
    positions = torch.arange(11).unsqueeze(0)
    assert torch.allclose(loaded(noise, features, positions), model(noise, features, positions), atol=1e-5)
    assert torch.equal(loaded.rotary_emb.inv_freq, model.rotary_emb.inv_freq)
