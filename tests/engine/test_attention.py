"""engine/cpu/attention.py: the CPU attention path gives transformers' SDPA numbers bit for bit, in every forward the
engine makes (prefill, one token, a verify block over a cache, after a rollback) and in transformers' own
`generate` with a padding mask."""

from __future__ import annotations

import copy

import pytest
import torch

from engine.cpu.attention import NAME, causal_mask, use_lean_attention
from engine.models import crop_cache, new_cache
from conftest import tiny_qwen3


@pytest.fixture(scope="module")
def pair():
    """A tiny grouped-query target (4 query heads over 2 key/value heads) twice: transformers' SDPA, and ours."""
    reference = tiny_qwen3(300, layers=2)
    lean = copy.deepcopy(reference)
    assert use_lean_attention(lean) and lean.config._attn_implementation == NAME
    assert reference.config._attn_implementation == "sdpa"
    return reference, lean


def _forward(model, ids, cache):
    out = model(ids, cache=cache, use_cache=True, output_hidden_states=True)
    return out.logits, out.hidden_states


def test_every_engine_forward_is_bit_identical(pair):
    reference, lean = pair
    ids = torch.randint(1, 300, (1, 40), generator=torch.Generator().manual_seed(0))
    caches = [new_cache(reference), new_cache(lean)]
    # prefill, a one-token step, a verify of 6 tokens, a rollback of 4, a verify of 3, another single token
    for start, end, keep in ((0, 20, None), (20, 21, None), (21, 27, 23), (23, 26, None), (26, 27, None)):
        (ref_logits, ref_hidden), (logits, hidden) = (_forward(m, ids[:, start:end], c)
                                                      for m, c in zip(pair, caches))
        assert torch.equal(ref_logits, logits), (start, end)
        assert all(torch.equal(a, b) for a, b in zip(ref_hidden, hidden)), (start, end)
        if keep is not None:
            for cache in caches:
                crop_cache(cache, keep)


def test_the_verify_mask_lets_each_new_token_see_the_cache_and_itself():
    mask = causal_mask(1, 3, 7, q_offset=4)
    expected = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    assert mask.shape == (1, 1, 3, 7) and torch.equal(mask[0, 0], expected)
    assert causal_mask(1, 1, 7, q_offset=6) is None  # one token over its cache: every key
    assert causal_mask(1, 5, 5) is None  # a prefill: SDPA's own causal square
    assert causal_mask(1, 5, 5, allow_is_causal_skip=False)[0, 0].equal(torch.ones(5, 5, dtype=torch.bool).tril())


def test_generate_with_a_padding_mask_matches_transformers(pair):
    """transformers' generate passes a 2-D mask: left padding goes through transformers' own mask function."""
    reference, lean = pair
    ids = torch.randint(1, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # the second row is left-padded
    kwargs = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(reference.generate(ids, **kwargs), lean.generate(ids, **kwargs))


def test_engine_switches_only_causal_lms_on_the_cpu(random_engine):
    assert random_engine.target.config._attn_implementation == NAME
    assert random_engine.drafter_models["eagle3"].config._attn_implementation == NAME  # a small LM drafts there
    assert not use_lean_attention(random_engine.drafter_models["dflash"])  # has its own attention
    eager = tiny_qwen3(300)
    eager.set_attn_implementation("eager")
    assert not use_lean_attention(eager) and eager.config._attn_implementation == "eager"
