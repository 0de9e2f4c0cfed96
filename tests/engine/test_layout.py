"""engine/cpu/layout.py: linear weights laid out column by column, and LM heads packed for oneDNN, keep their values,
their sharing and the model's numbers (bit for bit wherever a product has 4 rows or more; the same greedy output)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from engine.cpu.layout import is_column_major, use_column_major_weights
from engine.models import new_cache

from conftest import tiny_qwen3


def _linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def test_weights_keep_shape_values_and_ties_and_the_model_still_saves(tmp_path):
    from transformers import AutoModelForCausalLM

    reference = tiny_qwen3(300, layers=2)
    model = copy.deepcopy(reference)
    head = model.get_output_embeddings()
    assert head.weight is model.get_input_embeddings().weight  # tied, as the embedded target's
    assert use_column_major_weights(model) == len(_linears(model)) - 1 > 0  # all but the vocabulary-wide head
    for before, after in zip(_linears(reference), _linears(model)):
        assert is_column_major(after.weight) == (after is not head) and not is_column_major(before.weight)
        assert after.weight.shape == before.weight.shape and torch.equal(after.weight, before.weight)
        assert isinstance(after.weight, nn.Parameter)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert use_column_major_weights(model) == 0  # once is enough
    model.save_pretrained(tmp_path)  # what users do with engine.target: transformers needs tied weights contiguous
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(reference.state_dict().values(), reloaded.state_dict().values()))


def test_forwards_agree_to_float32_rounding_and_greedy_output_is_the_same():
    # bit for bit on some CPUs; where oneDNN picks another kernel for some row counts (AMX) the last bits differ
    reference = tiny_qwen3(300, layers=2)
    model = copy.deepcopy(reference)
    use_column_major_weights(model)
    ids = torch.randint(1, 300, (1, 30), generator=torch.Generator().manual_seed(0))
    caches = [new_cache(reference), new_cache(model)]
    with torch.inference_mode():
        for start, end in ((0, 20), (20, 25), (25, 29)):  # a prefill, then verify-sized blocks over the cache
            expected, got = (m(ids[:, start:end], cache=c, use_cache=True).logits
                             for m, c in zip((reference, model), caches))
            assert torch.allclose(expected, got, rtol=1e-5, atol=1e-5), (start, end, (expected - got).abs().max())
        kwargs = dict(max_new_tokens=20, do_sample=False, pad_token_id=0)
        assert torch.equal(reference.generate(ids[:, :8], **kwargs), model.generate(ids[:, :8], **kwargs))


def test_only_float_cpu_weights_change(random_engine):
    assert is_column_major(random_engine.target.model.layers[0].mlp.up_proj.weight)  # the engine lays out its target
    assert all(is_column_major(m.weight) for m in _linears(random_engine.drafter_models["dflash"]))
    dspark = random_engine.drafter_models["dspark"]  # its Markov head's output is vocabulary-wide: left as it is
    assert not is_column_major(dspark.markov_head.markov_w2.weight)
    assert is_column_major(dspark.layers[0].mlp.down_proj.weight)
    half = tiny_qwen3(300).to(torch.bfloat16)
    assert use_column_major_weights(half) == 0 and not is_column_major(half.lm_head.weight)


def test_packed_vocab_products_give_f_linear_numbers_and_step_aside_when_they_cannot():
    import pickle

    from engine.cpu.layout import PACKED_MIN_ROWS, PackedVocabLinear, use_packed_vocab_products

    reference = tiny_qwen3(300, layers=2)
    model = copy.deepcopy(reference)
    if not use_packed_vocab_products(model):
        pytest.skip("no oneDNN packed linear that matches F.linear on this CPU")
    head = model.get_output_embeddings()
    assert type(head) is PackedVocabLinear and head.weight is model.get_input_embeddings().weight
    assert [type(m) for m in _linears(model)].count(PackedVocabLinear) == 1  # the vocabulary-wide one only
    x = torch.randn(40, head.in_features, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        for rows in (PACKED_MIN_ROWS, 5, 7, 8, 9, 16, 40):
            assert torch.equal(head(x[:rows]), torch.nn.functional.linear(x[:rows], head.weight)), rows
            assert torch.equal(head(x[None, :rows]), torch.nn.functional.linear(x[None, :rows], head.weight)), rows
        ids = torch.randint(1, 300, (1, 30), generator=torch.Generator().manual_seed(0))
        assert torch.equal(reference(ids).logits, model(ids).logits)
    # copies and pickles drop the packed copy and compute with F.linear; a changed weight is used as it is
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert clone.lm_head._packed.tensor is None
        with torch.inference_mode():
            assert torch.equal(clone(ids).logits, model(ids).logits)
    with torch.no_grad():
        head.weight.mul_(2)
    with torch.inference_mode():
        assert torch.equal(head(x[:8]), torch.nn.functional.linear(x[:8], head.weight))
    head.weight.requires_grad_(True)
    loss = head(x[:8]).sum()  # with a gradient wanted: F.linear, so training through it works
    loss.backward()
    assert head.weight.grad is not None


def test_a_torch_without_the_packed_operators_keeps_f_linear(monkeypatch):
    """The private oneDNN operators may be missing or differ in other torch releases (a ZeroGPU Space pins its own):
    the head then stays an nn.Linear, and nothing fails."""
    import engine.cpu.layout as layout

    def refuse(*args):
        raise RuntimeError("no such operator here")

    monkeypatch.setattr(layout, "_packed_product", refuse)
    model = tiny_qwen3(300)
    assert layout.use_packed_vocab_products(model) == 0 and type(model.lm_head) is nn.Linear
