"""The target and its cache (engine/target/): the fused forward computes transformers' numbers for a prefill, a
chain verify and a tree verify; keep leaves the cache a fresh prefill would build; a batch's preallocated cache
computes what transformers' ragged one does; and a forward dispatches at most the operations its ceiling allows (a
census of what a GPU would launch one by one)."""

from __future__ import annotations

import collections

import pytest
import torch
from conftest import tiny_qwen3
from torch.utils._python_dispatch import TorchDispatchMode

from engine.cpu.attention import use_lean_attention
from engine.cpu.layout import use_column_major_weights
from engine.models import crop_cache, forward_with_features, new_cache
from engine.target import BatchTarget, FusedQwen3, RaggedBatchTarget, Target, TransformersTarget
from engine.tree import verify_inputs

LAYERS = [0, 2]  # features read from the first and the third of 4 layers


@pytest.fixture(scope="module")
def model():
    model = tiny_qwen3(300, layers=4, seed=5)
    use_lean_attention(model)  # as the engine runs it on the CPU
    use_column_major_weights(model)
    return model


def _close(a, b, atol=2e-5):
    assert a.shape == b.shape
    assert torch.allclose(a, b, atol=atol, rtol=1e-5), (a - b).abs().max()


@torch.inference_mode()
def test_the_fused_forward_computes_transformers_numbers(model):
    ids = torch.randint(2, 300, (1, 20), generator=torch.Generator().manual_seed(0))
    target = Target(FusedQwen3(model), LAYERS, capacity=8)  # grows as the forwards need
    logits, features = target.prefill(ids[:, :12])
    cache = new_cache(model)
    expected_logits, expected_features = forward_with_features(model, ids[:, :12], cache, LAYERS, logits_to_keep=1)
    _close(logits, expected_logits)
    _close(features, expected_features)
    target.keep(11)  # the anchor (token 12) is read again by the verify, as the loop does
    crop_cache(cache, 11)
    chain = ids[:, 11:17]
    _close(target.verify(chain)[0], forward_with_features(model, chain, cache, LAYERS)[0])
    crop_cache(cache, 11)
    parents = (-1, -1, 0, 0, 2, 1)  # two children of the anchor, two under the first, one deeper, one under the second
    tree = ids[:, 11:18]
    got_logits, got_features = target.verify(tree, parents)
    want_logits, want_features = forward_with_features(model, tree, cache, LAYERS, **verify_inputs(parents, 11, "cpu"))
    _close(got_logits, want_logits)
    _close(got_features, want_features)


@torch.inference_mode()
@pytest.mark.parametrize("kind", ["fused", "transformers"])
def test_keep_leaves_the_cache_a_fresh_prefill_of_the_path_builds(model, kind):
    """After a tree verify, keeping the anchor and the path (nodes 0, 2, 4) leaves the cache of the committed
    sequence: the next token's logits equal those of a fresh prefill over it."""
    ids = torch.randint(2, 300, (1, 10), generator=torch.Generator().manual_seed(1))
    target = Target(FusedQwen3(model), None, 64) if kind == "fused" else TransformersTarget(model, None)
    target.prefill(ids)
    target.keep(9)
    parents = (-1, -1, 0, 0, 2)
    nodes = torch.tensor([[ids[0, -1], 11, 12, 13, 14, 15]])
    target.verify(nodes, parents)
    target.keep(9, [0, 1, 3, 5])  # the anchor, then nodes 0, 2 and 4
    assert target.length == 13
    committed = torch.cat([ids, torch.tensor([[11, 13, 15]])], dim=1)
    following = torch.tensor([[7]])
    fresh = Target(FusedQwen3(model), None, 64)
    fresh.prefill(committed)
    fresh.keep(13)
    _close(target.verify(torch.cat([committed[:, -1:], following], dim=1))[0],
           fresh.verify(torch.cat([committed[:, -1:], following], dim=1))[0])


@torch.inference_mode()
def test_a_batchs_preallocated_cache_computes_what_transformers_ragged_one_does(model):
    """Requests of different lengths join, verify different numbers of drafts, keep different numbers, one leaves and
    two more join (past the rows and positions the cache was made with, so it grows): every logit and feature of
    the fused batch target over its preallocated cache equals transformers' over the ragged cache."""
    fused = BatchTarget(FusedQwen3(model), LAYERS, torch.device("cpu"), rows=2, capacity=8)
    ragged = RaggedBatchTarget(model, LAYERS, torch.device("cpu"))
    generator = torch.Generator().manual_seed(3)

    def ids(n):
        return torch.randint(2, 300, (n,), generator=generator).tolist()

    def both(call):
        got, want = call(fused), call(ragged)
        for a, b in zip(got, want):  # logits and features (and a join's prompt ends); sums over other widths
            _close(a, b, atol=1e-4) if torch.is_tensor(a) else None
            assert torch.is_tensor(a) or a == b

    def step(counts, kept):
        tokens = torch.zeros(len(counts), max(counts), dtype=torch.long)
        for b, n in enumerate(counts):
            tokens[b, :n] = torch.tensor(ids(n))
        both(lambda target: target.verify(tokens, counts))
        for target in (fused, ragged):
            target.keep([list(range(k)) for k in kept])

    first = [ids(5), ids(9)]
    both(lambda target: target.join(first))
    step([3, 1], [2, 1])
    step([4, 2], [4, 1])
    for target in (fused, ragged):
        target.select([1])
    later = [ids(3), ids(12)]
    both(lambda target: target.join(later))
    assert fused.size == ragged.size == 3 and fused.keys.shape[1] >= 3 and fused.keys.shape[3] > 8
    step([2, 5, 1], [1, 3, 1])
    step([1, 1, 1], [1, 1, 1])
    assert fused.lengths == ragged.cache.lengths == [13, 7, 14]


class _Census(TorchDispatchMode):
    """Operations dispatched, by name, views (no kernel, no data) left out."""

    VIEWS = {"view", "_unsafe_view", "transpose", "t", "slice", "select", "unsqueeze", "squeeze", "expand", "alias",
             "as_strided", "detach", "split", "split_with_sizes", "chunk", "reshape", "permute", "unbind"}

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in self.VIEWS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


# transformers' Qwen3 on the embedded 24-layer target: 1,366 operations for a one-token forward (2026-12-04); the
# fused forward 524. The ceiling leaves room for a release's small changes, and fails a change that adds one per layer.
OPERATIONS_CEILING = 540


@torch.inference_mode()
def test_a_target_forward_dispatches_under_its_ceiling(embedded_engine):
    model = embedded_engine.target
    ids = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
    counts = {}
    for name, target in (("fused", Target(embedded_engine.fused_target, None, 64)),
                         ("transformers", TransformersTarget(model, None))):
        target.prefill(ids)
        target.keep(ids.shape[1] - 1)
        with _Census() as census:
            target.verify(ids[:, -1:])
        counts[name] = sum(census.counts.values())
    assert counts["fused"] <= OPERATIONS_CEILING, counts
    assert counts["fused"] <= 0.6 * counts["transformers"], counts


@torch.inference_mode()
def test_a_fixed_width_verify_computes_the_exact_ones_numbers(model):
    """Padded to a fixed width over the whole cache (what a CUDA graph replays), a chain's and a tree's verify give
    the logits and features of the exact-width verify, and keep the same cache."""
    ids = torch.randint(2, 300, (1, 20), generator=torch.Generator().manual_seed(2))
    fused = FusedQwen3(model)
    exact, fixed = Target(fused, LAYERS, 64), Target(fused, LAYERS, 64, width=8)
    for target in (exact, fixed):
        target.prefill(ids[:, :10])
        target.keep(9)
    for rows, parents in ((1, None), (6, None), (7, (-1, -1, 0, 0, 2, 1))):
        block = ids[:, 9: 9 + rows]
        (a_logits, a_features), (b_logits, b_features) = exact.verify(block, parents), fixed.verify(block, parents)
        _close(b_logits, a_logits, atol=2e-4)  # float32 rounding of logits near 50: another order of sums
        _close(b_features, a_features, atol=2e-4)
        for target in (exact, fixed):
            target.keep(9, [0, 1] if rows > 1 else [0])
    _close(fixed.verify(ids[:, 11:12])[0], exact.verify(ids[:, 11:12])[0], atol=2e-4)
    with pytest.raises(ValueError, match="wider than this target's fixed width of 8"):
        fixed.verify(ids[:, :9])  # one width for every verify: a wider one is refused, never run at another


def test_one_fixed_width_holds_the_largest_tree_and_block_any_lane_sends():
    """Every lane's verify runs at the one width (no lane pads to a width of its own, whose GEMM heights could
    pick other kernels): it holds the anchor and the largest tree or drafted block, and the room a run keeps."""
    from engine.contract.types import MAX_DRAFTS, MAX_TREE_NODES
    from engine.target import TREE_ROOM, VERIFY_WIDTH

    assert VERIFY_WIDTH >= 1 + max(MAX_TREE_NODES, MAX_DRAFTS) and VERIFY_WIDTH & (VERIFY_WIDTH - 1) == 0
    assert VERIFY_WIDTH < 2 * (1 + max(MAX_TREE_NODES, MAX_DRAFTS)) and TREE_ROOM >= VERIFY_WIDTH


def test_every_lane_writes_the_baselines_tokens_at_a_fixed_width(embedded_engine, monkeypatch):
    """The verify width CUDA runs at, run on the CPU: every lane still writes exactly the baseline's tokens."""
    from engine.contract.types import GenerationConfig
    from engine.target import VERIFY_WIDTH

    prompt = "def fibonacci(n):\n"
    exact = {m: embedded_engine.generate(prompt, GenerationConfig(method=m, max_new_tokens=16)).output_ids
             for m in ("baseline", "dflash")}
    monkeypatch.setattr(embedded_engine, "verify_width", VERIFY_WIDTH)
    for method in ("baseline", "dspark", "dflash_tree", "eagle3_tree"):
        result = embedded_engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=16))
        assert result.output_ids == exact["baseline"], method
    assert exact["dflash"] == exact["baseline"]


@pytest.mark.slow
def test_transformers_greedy_decoding_writes_our_baselines_tokens(embedded_engine):
    """On held-out prompts, transformers' own greedy `generate` on the same weights writes exactly what the engine's
    baseline (the fused forward over its own cache) writes."""
    from engine.contract.presets import load_prompts
    from engine.contract.types import GenerationConfig

    for prompt in load_prompts()[:2]:
        ours = embedded_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=24)).output_ids
        ids = torch.tensor([embedded_engine.encode_prompt(prompt)])
        with torch.inference_mode():
            theirs = embedded_engine.target.generate(ids, max_new_tokens=24, do_sample=False, min_new_tokens=1)
        assert list(ours) == theirs[0, ids.shape[1]:].tolist()[: len(ours)], prompt[:40]


def test_off_the_cpu_the_models_projections_become_views_of_the_joined_weights():
    """On a GPU the fused forward's joined weights cost no memory: the model's own q, k, v, gate and up weights are
    slices of them (the meta device, shapes only, stands in for one); on the CPU they stay as they were laid out."""
    model = tiny_qwen3(300, layers=2).to("meta")
    FusedQwen3(model)
    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    hidden = model.config.hidden_size
    assert [w.storage_offset() for w in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)] == [
        0, attn.q_proj.weight.shape[0] * hidden, (attn.q_proj.weight.shape[0] + attn.k_proj.weight.shape[0]) * hidden]
    assert mlp.up_proj.weight.storage_offset() == mlp.gate_proj.weight.shape[0] * hidden
    on_cpu = tiny_qwen3(300, layers=2)
    FusedQwen3(on_cpu)
    assert on_cpu.model.layers[1].self_attn.k_proj.weight.storage_offset() == 0


@torch.inference_mode()
def test_on_cuda_a_masked_verify_calls_one_kernel_sdpa_fuses(model, monkeypatch):
    """Where CUDA's fused attention takes no grouped key heads with a mask (it would fall back to the math kernel),
    the fused forward folds each key head's query heads into rows: every masked attention call it makes has equal
    query and key heads and an additive mask of the queries' dtype, built once a forward, and no `enable_gqa`: the
    memory-efficient kernel's conditions. The unmasked calls (the prefill, causal) keep the grouped heads, which the
    flash kernel reads. The CUDA path's code runs here on the CPU (only the device test is pointed at it) and
    computes the grouped call's numbers."""
    import engine.target.fused as target_module

    calls, real = [], torch.nn.functional.scaled_dot_product_attention

    def watched(q, k, v, attn_mask=None, **kwargs):
        calls.append((q.shape[1], k.shape[1], attn_mask, kwargs))
        return real(q, k, v, attn_mask=attn_mask, **kwargs)

    ids = torch.randint(2, 300, (1, 16), generator=torch.Generator().manual_seed(4))
    fused = FusedQwen3(model)
    assert fused.heads != fused.kv_heads  # the tiny model groups its key heads, as Qwen3 does
    want = []
    for target in (Target(fused, LAYERS, 64), Target(fused, LAYERS, 64, width=8)):
        target.prefill(ids[:, :10])
        want.append((target.verify(ids[:, 10:14]), target.verify(ids[:, 10:14], (-1, 0, 0))))
    monkeypatch.setattr(target_module.F, "scaled_dot_product_attention", watched)
    monkeypatch.setattr(target_module, "FUSED_ATTENTION_DEVICES", ("cpu",))
    for target, expected in zip((Target(fused, LAYERS, 64), Target(fused, LAYERS, 64, width=8)), want):
        target.prefill(ids[:, :10])
        got = (target.verify(ids[:, 10:14]), target.verify(ids[:, 10:14], (-1, 0, 0)))
        for (logits, features), (want_logits, want_features) in zip(got, expected):
            _close(logits, want_logits, atol=2e-4)
            _close(features, want_features, atol=2e-4)
    masked = [call for call in calls if call[2] is not None]
    assert masked and len(masked) < len(calls)  # the prefill's calls are unmasked
    for heads, kv_heads, mask, kwargs in masked:
        assert heads == kv_heads and mask.dtype == torch.float32 and not kwargs.get("enable_gqa"), (heads, kv_heads)
    assert len({id(call[2]) for call in masked}) == 4  # one mask a forward (two targets, two verifies), every layer
    for heads, kv_heads, mask, kwargs in calls:
        if mask is None:
            assert kwargs["enable_gqa"] == (heads != kv_heads) and kwargs["is_causal"]


def test_the_engine_joins_the_targets_weights_at_its_first_run_never_at_load(tokenizer):
    """On ZeroGPU the app's process loads the weights and a GPU call's worker runs them: weights joined at load
    would each be moved to the GPU twice (a view apart from what it views), so the engine joins them on first use,
    in the process that runs them."""
    from engine.contract.types import GenerationConfig
    from engine.loop import Engine

    engine = Engine(tiny_qwen3(len(tokenizer)), tokenizer, {}, torch.device("cpu"), preset="random",
                    fixed_width=True)
    assert engine._fused_target is None and engine.verify_width is not None  # the width known, nothing joined
    assert engine.methods() and engine.drafter_label("baseline")  # what the page reads before a run joins nothing
    assert engine._fused_target is None
    engine.generate("def f(x):\n", GenerationConfig(method="baseline", max_new_tokens=2))
    assert isinstance(engine._fused_target, FusedQwen3) and engine.fused_target is engine._fused_target
