"""The drafters' fast path (engine/drafters/fused.py): each fused network computes what the network's own modules do
over a transformers cache, on the shipped checkpoints, through rounds of drafting and rollback."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import DynamicCache

from engine.drafters.dflash import DFlashDrafter
from engine.drafters.eagle3 import Eagle3Drafter
from engine.drafters.fused import DraftCache, FusedBlock, FusedEagle3, roll_back
from engine.timing import SpanClock

from conftest import tiny_dflash, tiny_eagle3, tiny_qwen3

CLOCK = SpanClock(torch.device("cpu"))


def _features(model, count: int, seed: int) -> torch.Tensor | None:
    if not getattr(model, "target_features", True):
        return None
    width = len(model.target_layer_ids) * model.config.hidden_size
    return torch.randn(1, count, width, generator=torch.Generator().manual_seed(seed)) * 3


def _rounds(drafter, prompt: torch.Tensor, rounds: list[int], k: int | None = None) -> list[torch.Tensor]:
    """The block's probabilities at each round, `rounds` giving how many drafts each verdict accepts."""
    model, k = drafter.model, k or drafter.max_drafts
    drafter.start(prompt, _features(model, prompt.shape[1], 0), CLOCK)
    committed, out = torch.cat([prompt, torch.tensor([[5]])], dim=1), []
    for i, accepted in enumerate(rounds):
        block = drafter.propose(committed, k, 1.0, torch.Generator().manual_seed(i), CLOCK)
        out.append(block.probs)
        committed = torch.cat([committed, block.ids[:accepted].view(1, -1), torch.tensor([[9 + i]])], dim=1)
        drafter.accept(committed.shape[1] - 1, _features(model, accepted + 1, i + 1))
    return out


def _block_model(engine, name: str):
    return engine.ablation_drafter_models["dflash"] if name == "dflash without features" else engine.drafter_models[name]


@pytest.mark.parametrize("name", ["dflash", "dspark", "dflash without features"])
def test_a_fused_block_drafter_drafts_what_the_transformers_path_drafts(embedded_engine, name):
    model = _block_model(embedded_engine, name)
    fast, slow = DFlashDrafter(model, embedded_engine.target), DFlashDrafter(model, embedded_engine.target, fused=False)
    assert fast.fused is not None and slow.fused is None
    prompt = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
    rounds = [0, 3, fast.max_drafts, 1]
    for mine, theirs in zip(_rounds(fast, prompt, rounds), _rounds(slow, prompt, rounds)):
        assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()
    assert isinstance(fast.cache, DraftCache) and fast.cache.length == slow.cache.get_seq_length()


@pytest.mark.parametrize("weights", ["greedy", "sampled"])
def test_the_fused_eagle3_layer_drafts_what_the_transformers_path_drafts(embedded_engine, weights):
    models = embedded_engine.drafter_models if weights == "greedy" else embedded_engine.sampled_drafter_models
    if "eagle3" not in models:
        pytest.skip("no EAGLE-3 drafter for sampling in this preset")
    fast, slow = Eagle3Drafter(models["eagle3"]), Eagle3Drafter(models["eagle3"], fused=False)
    assert fast.fused is not None and slow.fused is None
    prompt = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
    rounds = [0, 2, 5, 1]
    for mine, theirs in zip(_rounds(fast, prompt, rounds, 5), _rounds(slow, prompt, rounds, 5)):
        assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()
    assert isinstance(fast.cache, DraftCache) and fast.cache.length == slow.cache.get_seq_length()


def test_the_draft_cache_writes_in_place_rolls_back_by_length_and_grows():
    cache = DraftCache(2, 1, 4, 3, torch.zeros(1))
    first = torch.arange(8.0).view(1, 1, 2, 4)
    for layer in range(2):
        keys, values = cache.update(first + layer, -first, layer)
    assert cache.length == 2 and torch.equal(keys, first + 1) and torch.equal(values, -first)
    roll_back(cache, 1)
    keys, _ = cache.update(torch.full((1, 1, 3, 4), 7.0), torch.zeros(1, 1, 3, 4), 0)  # past the capacity: grows
    assert keys.shape[2] == 4 and torch.equal(keys[0, 0, 0], first[0, 0, 0]) and (keys[0, 0, 1:] == 7).all()
    assert cache.length == 1  # only the last layer's write moves the length on
    dynamic = DynamicCache()
    dynamic.update(first, first, 0)
    roll_back(dynamic, 1)
    assert dynamic.get_seq_length() == 1


@pytest.mark.parametrize("kind", ["dflash", "eagle3"])
def test_off_the_cpu_a_drafters_projections_become_views_of_its_joined_weights(tokenizer, kind):
    """As the target's (test_target.py): on a GPU a fused drafter's joined weights cost no memory, the network's own
    q, k, v, gate and up weights becoming slices of them (the meta device, shapes only, stands in for one), so a GPU
    call that moves tensors by their storage moves each weight once; joined at the first forward, so a drafter built
    for its label alone (ZeroGPU's app process) joins nothing; on the CPU they stay as they were."""
    target = tiny_qwen3(len(tokenizer), layers=6)
    make = (lambda t: tiny_dflash(t, layers=2)) if kind == "dflash" else (lambda t: tiny_eagle3(t, layers=2))
    fuse = FusedBlock if kind == "dflash" else FusedEagle3
    model = make(target).to("meta")
    fused = fuse(model)
    assert all(layer.self_attn.k_proj.weight.storage_offset() == 0 for layer in model.layers)  # built: none joined
    for layer, weights in zip(model.layers, fused.layers):
        attn, mlp, width = layer.self_attn, layer.mlp, layer.self_attn.q_proj.weight.shape[1]  # EAGLE-3's: 2 H
        q, k = attn.q_proj.weight.shape[0], attn.k_proj.weight.shape[0]
        assert [w.storage_offset() for w in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)] == [
            0, q * width, (q + k) * width]
        assert mlp.up_proj.weight.storage_offset() == mlp.gate_proj.weight.numel()
        assert weights.qkv.shape[0] == q + k + attn.v_proj.weight.shape[0] and weights.qkv.storage_offset() == 0
        assert attn.v_proj.weight.untyped_storage().nbytes() == weights.qkv.untyped_storage().nbytes()
        assert mlp.up_proj.weight.untyped_storage().nbytes() == weights.gate_up.untyped_storage().nbytes()
    on_cpu = make(target)
    weights = fuse(on_cpu).layers[1]
    k_proj = on_cpu.layers[1].self_attn.k_proj.weight
    assert k_proj.storage_offset() == 0
    assert k_proj.untyped_storage().data_ptr() != weights.qkv.untyped_storage().data_ptr()


@pytest.mark.parametrize("kind", ["dflash", "eagle3"])
def test_two_layer_random_drafters_agree_with_the_transformers_path_under_a_window(tokenizer, kind):
    """Two layers, so the second reads what the first attended to (its mask matters), and a window that hides the
    oldest context."""
    target = tiny_qwen3(len(tokenizer), layers=6)
    model = tiny_dflash(target, layers=2) if kind == "dflash" else tiny_eagle3(target, layers=2)
    make = (lambda fused: DFlashDrafter(model, target, fused=fused)) if kind == "dflash" else \
        (lambda fused: Eagle3Drafter(model, fused=fused))
    fast, slow = make(True), make(False)
    fast.window = slow.window = 12
    prompt = torch.randint(2, target.config.vocab_size, (1, 11), generator=torch.Generator().manual_seed(0))
    rounds = [0, 3, 4, 1, 2]
    with torch.no_grad():
        for mine, theirs in zip(_rounds(fast, prompt, rounds, 4), _rounds(slow, prompt, rounds, 4)):
            assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()


def test_a_drafter_given_another_network_drafts_with_it(embedded_engine):
    """A run that tunes its own copy of the network (engine/online.py) swaps the drafter's model before it starts: the
    drafts are the copy's, not the fused forward's of the engine's weights."""
    import copy

    model = embedded_engine.drafter_models["dflash"]
    tuned = copy.deepcopy(model)
    with torch.no_grad():
        tuned.layers[0].mlp.down_proj.weight.mul_(3)
    swapped, reference = DFlashDrafter(model, embedded_engine.target), DFlashDrafter(tuned, embedded_engine.target)
    swapped.model = tuned
    prompt = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
    for mine, theirs in zip(_rounds(swapped, prompt, [2, 1]), _rounds(reference, prompt, [2, 1])):
        assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    assert swapped.fused is None


class _Operations(TorchDispatchMode):
    """Operations dispatched, views (no kernel, no data) left out."""

    VIEWS = {"view", "_unsafe_view", "transpose", "t", "slice", "select", "unsqueeze", "squeeze", "expand", "alias",
             "as_strided", "detach", "split", "split_with_sizes", "chunk", "reshape", "permute", "unbind"}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func.overloadpacket.__name__ not in self.VIEWS
        return func(*args, **(kwargs or {}))


# A decode step's drafting (propose of 7 drafts and accept) on the shipped drafters, counted 2026-12-06: DFlash 109
# operations through its own modules and a transformers cache, 77 fused; EAGLE-3 331 and 212. The ceilings leave room
# for a release's small changes and fail a change that adds one operation per layer and draft.
CEILINGS = {"dflash": 80, "eagle3": 220}


@pytest.mark.parametrize("name", sorted(CEILINGS))
def test_a_fused_drafting_step_dispatches_fewer_operations(embedded_engine, name):
    model = embedded_engine.drafter_models[name]
    counts = {}
    for fused in (False, True):
        drafter = DFlashDrafter(model, embedded_engine.target, fused=fused) if name == "dflash" else \
            Eagle3Drafter(model, fused=fused)
        prompt = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
        n, width = prompt.shape[1], len(model.target_layer_ids) * model.config.hidden_size
        committed = torch.cat([prompt, torch.tensor([[5]])], dim=1)
        with torch.inference_mode():
            drafter.start(prompt, torch.randn(1, n, width), CLOCK)
            drafter.propose(committed, 7, 0.0, torch.Generator(), CLOCK)
            drafter.accept(n + 4, torch.randn(1, 4, width))
            committed = torch.cat([committed, torch.tensor([[1, 2, 3, 4]])], dim=1)
            with _Operations() as operations:
                drafter.propose(committed, 7, 0.0, torch.Generator(), CLOCK)
                drafter.accept(n + 5, torch.randn(1, 1, width))
        counts[fused] = operations.count
    assert counts[True] <= CEILINGS[name] and counts[True] < counts[False], counts


def test_an_eagle_tree_grown_fused_is_the_tree_grown_by_the_layers_own_modules(embedded_engine):
    from engine.drafters.eagle_tree import EagleTreeDrafter

    model = embedded_engine.drafter_models["eagle3"]
    prompt = torch.tensor([embedded_engine.encode_prompt("def add(a, b):\n    return a + b\n")])
    n, width = prompt.shape[1], len(model.target_layer_ids) * model.config.hidden_size
    features = torch.randn(1, n, width, generator=torch.Generator().manual_seed(0)) * 3
    trees = []
    for fused in (True, False):
        tree = EagleTreeDrafter(Eagle3Drafter(model, fused=fused), 24)
        with torch.inference_mode():
            tree.start(prompt, features, CLOCK)
            trees.append(tree.propose(torch.cat([prompt, torch.tensor([[5]])], dim=1), 5, 0.0, torch.Generator(),
                                      CLOCK))
    assert trees[0].parents == trees[1].parents and torch.equal(trees[0].ids, trees[1].ids)
    assert torch.allclose(trees[0].probs, trees[1].probs, rtol=1e-5, atol=1e-6)
