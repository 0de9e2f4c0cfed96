"""Draft trees: the best-first tree is the likeliest prefixes, the ancestor-only verify forward scores each node as
its own path would, only the accepted path's cache entries stay, and both tree lanes write exactly the baseline's
text at temperature 0 and the target's distribution above it."""

from __future__ import annotations

import functools
import itertools
import json
import math

import pytest
import torch

from engine.contract.types import GenerationConfig, Step
from engine.loop import Engine
from engine.models import forward_logits, forward_with_features, keep_cache_entries, new_cache
from engine.tree import best_first, children, depths, judged_nodes, row_table, verify_inputs, verify_tree

from conftest import baseline_of, tiny_dflash, tiny_eagle3, tiny_qwen3

PROMPTS = ["def parse(self, text):\n", "import os\n", "class Queue:\n    \"\"\"A FIFO queue.\"\"\"\n"]
TREE_LANES = ("eagle3_tree", "dflash_tree")


@pytest.fixture(scope="module")
def tree_engine(tokenizer):
    """Random models with an EAGLE-3 and a DFlash drafter, so both tree lanes run."""
    target = tiny_qwen3(len(tokenizer), layers=6)
    drafters = {"eagle3": tiny_eagle3(target), "dflash": tiny_dflash(target)}
    return Engine(target, tokenizer, drafters, torch.device("cpu"), preset="random")


def paths(ids: list[int], parents: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Every node's root-to-node token sequence."""
    out = []
    for node, parent in enumerate(parents):
        out.append((out[parent] if parent >= 0 else ()) + (ids[node],))
    return set(out)


def read_tree(probs: torch.Tensor, budget: int) -> tuple[list[int], tuple[int, ...]]:
    """best_first's tree on the host: its tokens and parents, checking its positions against its parents."""
    ids, parents, position = best_first(probs, budget)
    parents = tuple(parents.tolist())
    assert position.tolist() == [d - 1 for d in depths(parents)]
    return ids.tolist(), parents


# --- building the tree --------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [1, 4, 9, 20])
def test_best_first_takes_the_likeliest_prefixes(budget):
    generator = torch.Generator().manual_seed(budget)
    probs = torch.softmax(3 * torch.randn(3, 5, generator=generator), dim=-1)  # 3 positions, 5 tokens
    ids, parents = read_tree(probs, budget)
    every = {prefix: math.prod(float(probs[d, t]) for d, t in enumerate(prefix))
             for length in (1, 2, 3) for prefix in itertools.product(range(5), repeat=length)}
    likeliest = set(sorted(every, key=every.get, reverse=True)[:budget])
    assert len(ids) == budget and paths(ids, parents) == likeliest
    assert all(parent < node for node, parent in enumerate(parents))  # parents first
    for siblings in children(parents):  # likeliest first
        depth_probs = [float(probs[depths(parents)[s] - 1, ids[s]]) for s in siblings]
        assert depth_probs == sorted(depth_probs, reverse=True)


def test_a_chain_is_the_tree_of_single_children():
    probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    ids, parents = read_tree(probs, 3)  # the chain's 0.9 · 0.8 · 0.7 = 0.504 beats every other 3rd prefix
    assert (ids, parents) == ([0, 0, 0], (-1, 0, 1))


def test_a_tree_has_its_fixed_size_and_breaks_ties_toward_the_shallower():
    """min(budget, prefixes) nodes whatever their scores (a shape the host knows before the device has chosen):
    impossible prefixes come last; between equal scores the shallower prefix goes first."""
    probs = torch.tensor([[0.6, 0.4], [1.0, 0.0]])  # (0) = (0, 0) = 0.6, (1) = (1, 0) = 0.4, (·, 1) impossible
    assert read_tree(probs, 3) == ([0, 1, 0], (-1, -1, 0))
    ids, parents = read_tree(probs, 6)
    assert len(ids) == 6 and paths(ids, parents) == {(0,), (1,), (0, 0), (1, 0), (0, 1), (1, 1)}
    assert all(parent < node for node, parent in enumerate(parents))


def test_siblings_drawn_from_the_trees_device_rows_match_those_sent_from_the_host():
    from engine.drafters.ddtree import sample_siblings

    probs = torch.softmax(torch.randn(3, 7, generator=torch.Generator().manual_seed(5)), dim=-1)
    ids, parents, position = best_first(probs, 9)
    host_parents = tuple(parents.tolist())
    rows = torch.cat([parents.new_zeros(1), parents + 1])
    on_device = sample_siblings(probs, host_parents, torch.Generator().manual_seed(2), rows, position)
    from_host = sample_siblings(probs, host_parents, torch.Generator().manual_seed(2))
    assert torch.equal(on_device, from_host) and on_device.shape == (9,)
    for siblings in children(host_parents):  # drawn without replacement
        assert len({int(on_device[s]) for s in siblings}) == len(siblings)


# --- the verify forward -----------------------------------------------------------------------------

def test_each_node_of_a_tree_forward_is_scored_as_its_own_path_alone(tree_engine):
    """The ancestor-only mask and depth positions: the target's logits at every node of one tree forward equal
    those of an uncached forward over the prompt and that node's path, and keeping a path's cache entries leaves
    the cache a chain forward over that path would."""
    target = tree_engine.target
    prompt = tree_engine.encode_prompt(PROMPTS[0])
    ids, parents = [11, 12, 13, 21, 22, 31], (-1, 0, 1, -1, 3, 0)  # branches at the anchor and under node 0
    cache = new_cache(target)
    with torch.no_grad():
        forward_logits(target, torch.tensor([prompt[:-1]]), cache)
        tree_inputs = verify_inputs(parents, len(prompt) - 1, target.device)
        tree_logits = forward_with_features(target, torch.tensor([[prompt[-1], *ids]]), cache, None, **tree_inputs)[0][0]
        for node in range(len(ids)):
            path, walk = [], node
            while walk >= 0:
                path.insert(0, ids[walk])
                walk = parents[walk]
            alone = target(torch.tensor([prompt + path])).logits[0, -1]
            torch.testing.assert_close(tree_logits[node + 1], alone, rtol=1e-4, atol=1e-4)
        keep_cache_entries(cache, len(prompt), [len(prompt) + 3, len(prompt) + 4])  # the path 21, 22
        chain = new_cache(target)
        forward_logits(target, torch.tensor([prompt + [21, 22]]), chain)
    for kept, expected in zip(cache.layers, chain.layers):
        torch.testing.assert_close(kept.keys, expected.keys, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(kept.values, expected.values, rtol=1e-4, atol=1e-4)


# --- the rule ------------------------------------------------------------------------------------------

def one_hot_rows(tokens: list[int], vocab: int = 6) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(tokens), vocab).float()


def test_greedy_walk_follows_the_targets_argmax_through_the_branches():
    ids, parents = torch.tensor([1, 2, 3, 4]), (-1, -1, 1, 1)  # anchor → 1 | 2; 2 → 3 | 4
    target = one_hot_rows([2, 5, 4, 0, 5])  # rows: anchor, node 0..3: argmax 2 after the anchor, then 4, then 5
    verdict = verify_tree(0.0, ids, one_hot_rows([1, 2, 3, 4]), parents, target, torch.Generator())
    assert verdict.path == (1, 3) and verdict.bonus_id == 5 and verdict.num_accepted == 2
    assert verdict.judged == (0, 1, 2, 3)  # node 0 turned down before 1; under node 1, 2 before 3
    assert verdict.committed.tolist() == [2, 4, 5] and verdict.kept_rows.tolist() == [0, 2, 4]


def test_greedy_walk_takes_the_first_of_equal_siblings_and_the_trace_finds_what_it_judged():
    ids, parents = torch.tensor([3, 2, 2, 1, 5]), (-1, -1, -1, 1, 1)  # anchor → 3 | 2 | 2; node 1 → 1 | 5
    target = one_hot_rows([2, 0, 5, 0, 0, 0])  # the anchor's argmax 2 (nodes 1 and 2), node 1's 5 (node 4)
    verdict = verify_tree(0.0, ids, one_hot_rows(ids.tolist()), parents, target, torch.Generator())
    assert verdict.path == (1, 4) and verdict.bonus_id == 0 and verdict.judged == (0, 1, 3, 4)
    found = judged_nodes(row_table(parents, "cpu"), verdict.kept_rows, len(verdict.judged))
    assert found.tolist() == sorted(verdict.judged)


# The counts below: 16 pairs, so 15 degrees of freedom, 37.7 the 99.9 % quantile. A walk that keeps the target's
# distribution fails with probability 0.001 whatever the count. Over 2,000 walks one whose pairs are off by Cohen's
# w = sqrt(sum (p' - p)^2 / p) >= 0.17 fails with probability >= 0.99 (noncentral chi-square, lambda = 56); the
# walk without the residual (test_the_count_fails_a_walk_that_skips_the_residual) is off by w = 0.47 (lambda = 447).
PAIR_SAMPLES = 2000


def pair_statistic(rule, samples: int = PAIR_SAMPLES) -> float:
    """Pearson's chi-square of the first two committed tokens of a sampled tree walk by `rule` (verify_tree's
    signature) against the target's exact probabilities, over a tree with siblings at both levels."""
    generator = torch.Generator().manual_seed(0)
    first = torch.tensor([0.1, 0.4, 0.3, 0.2])
    second = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    ids, parents = [2, 1, 0, 3], (-1, -1, 0, 0)  # anchor → 2 | 1; 2 → 0 | 3 (deliberately not the likeliest)
    rows = torch.stack([first, second[2], second[1], second[0], second[3]])  # the anchor's row, then each node's
    draft_ids, draft_rows = torch.tensor(ids), one_hot_rows(ids, 4)
    counts: dict[tuple[int, int], int] = {}
    for _ in range(samples):
        verdict = rule(1.0, draft_ids, draft_rows, parents, rows, generator)
        tokens = [ids[n] for n in verdict.path] + [verdict.bonus_id]
        if len(tokens) < 2:  # the bonus came at the first level: the next step draws the second token
            tokens.append(int(torch.multinomial(second[tokens[0]], 1, generator=generator)))
        counts[tuple(tokens[:2])] = counts.get(tuple(tokens[:2]), 0) + 1
    expected = {(x1, x2): samples * float(first[x1] * second[x1, x2]) for x1 in range(4) for x2 in range(4)}
    return sum((counts.get(pair, 0) - e) ** 2 / e for pair, e in expected.items())


def test_sampled_walk_draws_each_token_from_the_target():
    """Above 0 the committed tokens follow the target's own distribution whatever the tree holds."""
    assert pair_statistic(verify_tree) < 37.7  # chi-square, 15 degrees of freedom, p = 0.001


def test_siblings_drawn_from_q_keep_the_targets_distribution_under_the_residual_rule():
    """Siblings drawn from the drafter's q without replacement (a DFlash tree above 0), judged against q with the
    residual rule: the first two tokens follow the target's exact probabilities. Judged against a q they were not
    drawn from, the same count fails."""
    from engine.drafters.ddtree import sample_siblings

    first = torch.tensor([0.1, 0.4, 0.3, 0.2])
    second = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    q = torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.1, 0.1, 0.4, 0.4]])  # the drafter's, at depths 1 and 2
    parents = (-1, -1, 0, 0)  # two children under the anchor, two under the first

    def statistic(drawn_from: torch.Tensor, samples: int = PAIR_SAMPLES) -> float:
        generator = torch.Generator().manual_seed(1)
        counts: dict[tuple[int, int], int] = {}
        for _ in range(samples):
            ids = sample_siblings(drawn_from, parents, generator).tolist()  # the shape sent from the host
            rows = torch.stack([first, second[ids[0]], second[ids[1]], second[ids[2]], second[ids[3]]])
            verdict = verify_tree(1.0, torch.tensor(ids), q[[0, 0, 1, 1]], parents, rows, generator)
            tokens = [ids[n] for n in verdict.path] + [verdict.bonus_id]
            if len(tokens) < 2:
                tokens.append(int(torch.multinomial(second[tokens[0]], 1, generator=generator)))
            counts[tuple(tokens[:2])] = counts.get(tuple(tokens[:2]), 0) + 1
        expected = {(a, b): samples * float(first[a] * second[a, b]) for a in range(4) for b in range(4)}
        return sum((counts.get(pair, 0) - e) ** 2 / e for pair, e in expected.items())

    assert statistic(q) < 37.7  # chi-square, 15 degrees of freedom, p = 0.001
    # a q they were not drawn from fails by far (off by w = 1.6: its statistic is in the hundreds at 300 walks)
    assert statistic(torch.tensor([[0.05, 0.05, 0.45, 0.45], [0.45, 0.45, 0.05, 0.05]]), samples=300) > 37.7


def test_the_count_fails_a_walk_that_skips_the_residual():
    """The count above can fail: a walk that accepts a child with probability p(x) but, on rejection, samples the
    next token from p itself (not from p without the rejected siblings) is not the target's distribution."""
    from engine.sampling import Verdict

    def no_residual(temperature, draft_ids, draft_probs, parents, target_probs, generator):
        rows, path, row = children(parents), [], 0
        while True:
            chosen = next((n for n in rows[row] if float(torch.rand((), generator=generator))
                           < float(target_probs[row, draft_ids[n]])), None)
            if chosen is None:
                bonus = int(torch.multinomial(target_probs[row], 1, generator=generator))
                return Verdict(len(path), bonus, torch.zeros(len(parents)), None, path=tuple(path), judged=())
            path.append(chosen)
            row = chosen + 1

    assert pair_statistic(no_residual) > 37.7


# --- the lanes ---------------------------------------------------------------------------------------------

@functools.cache
def tree_run(engine, method: str, prompt: str, nodes: int):
    """A tree lane's run at temperature 0 (30 tokens, 5 levels deep), made once per engine, lane, prompt and budget:
    at temperature 0 a run is the same every time, and the tests below read the same runs."""
    return engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=30, tree_nodes=nodes,
                                                    drafts_per_step=5))


@pytest.mark.parametrize("nodes", [1, 5, 40])  # the default budget: tests/engine/test_identity.py
@pytest.mark.parametrize("method", TREE_LANES)
def test_tree_lanes_equal_the_baseline_at_temperature_zero(embedded_engine, method, nodes):
    """On the shipped models, whose drafts the target often accepts (random models' never are)."""
    for prompt in PROMPTS:
        baseline = baseline_of(embedded_engine, prompt, 30)
        tree = tree_run(embedded_engine, method, prompt, nodes)
        assert tree.output_ids == baseline.output_ids and tree.text == baseline.text, (method, prompt)
        assert max(s.num_verified for s in tree.steps) <= nodes
        assert all(s.parents is not None and len(s.parents) == s.num_verified for s in tree.steps if s.drafted)


@pytest.mark.parametrize("method", TREE_LANES)
def test_tree_lanes_equal_the_baseline_up_to_the_context_limit(tree_engine, method):
    baseline = baseline_of(tree_engine, PROMPTS[2], 500)  # both lanes against the one run to the context
    tree = tree_engine.generate(PROMPTS[2], GenerationConfig(method=method, max_new_tokens=500, tree_nodes=24,
                                                             drafts_per_step=7))
    assert baseline.summary.finish_reason == tree.summary.finish_reason == "context"
    assert tree.output_ids == baseline.output_ids


def test_a_tree_accepts_at_least_what_its_chain_does_on_the_same_drafter(embedded_engine):
    """The tree holds the chain's own drafts (the likeliest path) and more: at temperature 0 it commits at least as
    many tokens per step in total."""
    for chain, tree in (("dflash", "dflash_tree"), ("eagle3", "eagle3_tree")):
        tau = {chain: sum(embedded_engine.generate(p, GenerationConfig(method=chain, max_new_tokens=30,
                                                                       drafts_per_step=5)).summary.tau
                          for p in PROMPTS),
               tree: sum(tree_run(embedded_engine, tree, p, 40).summary.tau for p in PROMPTS)}
        assert tau[tree] >= tau[chain], tau


def test_tree_steps_say_their_path_and_survive_a_save(embedded_engine):
    runs = [tree_run(embedded_engine, method, prompt, 40) for method in TREE_LANES for prompt in PROMPTS]
    verdicts = set()
    for step in (step for result in runs for step in result.steps):
        if not step.drafted:
            continue
        accepted = [i for i, t in enumerate(step.drafted) if t.verdict == "accepted"]
        assert [t.id for t in step.committed[: len(accepted)]] == [step.drafted[i].id for i in accepted]
        assert all(step.parents[node] == (accepted[d - 1] if d else -1) for d, node in enumerate(accepted))
        verdicts |= {t.verdict for t in step.drafted}
        assert Step.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    assert verdicts == {"accepted", "rejected", "unverified"}  # other branches are sent, never judged
    broken = json.loads(json.dumps(runs[0].steps[0].to_dict()))
    broken["parents"] = [0] + broken["parents"][1:]  # a node its own parent
    with pytest.raises(ValueError, match="parent"):
        Step.from_dict(broken)


def test_tree_lanes_pass_the_distribution_check(tree_engine):
    """The first two new tokens over many seeds against the target's exact probabilities (temperature 0.3: the
    random target is flat at 1, too flat for bins of five samples; the rule itself is counted at 1 above)."""
    from engine.measure.lossless import distribution_check

    check = distribution_check(tree_engine, PROMPTS[1], methods=list(TREE_LANES), samples=120, temperature=0.3)
    for method, lane in check["lanes"].items():
        assert lane["dof"] >= 3 and lane["p_value"] > 0.001, (method, lane)


def test_a_dspark_checkpoint_grows_no_tree(random_engine):
    """Its Markov head drafts each token from the one before: no independent per-position distributions."""
    from engine.drafters.deepspec import DSparkDrafter

    drafter = DSparkDrafter(random_engine.drafter_models["dspark"], random_engine.target)
    with pytest.raises(Exception, match="Markov head"):
        drafter.position_probs(torch.tensor([[1, 2, 3]]), 3, 0.0)
