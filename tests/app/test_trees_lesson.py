"""Lesson point 8, draft trees: the recording is made with the settings "Run it live" and the Why panel name, its
takeaway's words are chosen from the numbers (fed numbers that favour the DFlash tree it names that tree, fed numbers
that favour the AR tree it names the other, and says why from what a draft forward costs in verified nodes), and the
Why panel draws the recording: each tree's τ and speedup by budget, each chain flat beside it, the verify line, the
published figures."""

from __future__ import annotations

import copy

import pytest

from app import lesson
from app.draw.charts import budget_figure, tree_costs_figure, tree_published_figure
from app.lesson import POINTS
from app.theory import PUBLISHED_TREES, tree_costs, verify_line
from engine.contract.methods import METHOD_REGISTRY

TREES = [m for m, entry in METHOD_REGISTRY.items() if entry.tree]


def trees_point():
    return next(p for p in POINTS if p.recording == "trees")


def row(speedup: float, tau: float, verified: float, verify_ms: float, draft_ms: float) -> dict:
    return {"speedup": speedup, "tau": tau, "draft_cost": draft_ms / verify_ms, "draft_ms_per_step": draft_ms,
            "verify_ms_per_step": verify_ms, "verified_per_step": verified}


def sweep(dflash_best: float, ar_best: float, ar_forward_ms: float = 2.0, rounds: int = 2) -> dict:
    """A made-up budget sweep: verify costs 10 ms + 0.5 ms a node; the DFlash tree pays one 4 ms forward a step, the
    AR tree four forwards of `ar_forward_ms`; each tree's speedup peaks at 16 nodes (`*_best`)."""
    def lane(chain: str, best: float, forwards: float, forward_ms: float, chain_speedup: float) -> dict:
        shape = {4: 0.85, 8: 0.95, 16: 1.0, 32: 0.9, 64: 0.7}
        taus = {4: 2.5, 8: 3.0, 16: 3.5, 32: 3.8, 64: 4.0}
        return {"chain": chain, "drafter": chain, "drafts_per_step": 4, "best_budget": 16,
                "draft_forwards_per_step": forwards,
                "rows": {str(b): row(round(best * shape[b], 3), taus[b], b, 10 + 0.5 * b, forwards * forward_ms)
                         for b in shape},
                "chain_row": row(chain_speedup, 2.4, 4, 12.0, forwards * forward_ms)}

    data = {"budgets": [4, 8, 16, 32, 64], "device": "cpu (test)", "max_new_tokens": 64, "num_prompts": 8,
            "rounds": rounds, "lanes": {"eagle3_tree": lane("eagle3", ar_best, 4.0, ar_forward_ms, 1.3),
                                        "dflash_tree": lane("dflash", dflash_best, 1.0, 4.0, 1.4)}}
    return {"trees": lesson.measurement(data, "cpu (test)")}


def test_the_recording_is_made_with_the_settings_run_it_live_scales_down():
    recorded = lesson.recorded()["trees"]["data"]
    assert sorted(map(int, recorded["budgets"])) == list(lesson.TREE_BUDGETS)
    assert recorded["num_prompts"] == lesson.TREE_PROMPTS and recorded["max_new_tokens"] == lesson.TREE_TOKENS
    assert recorded["rounds"] == lesson.TREE_ROUNDS
    assert sorted(recorded["lanes"]) == sorted(TREES)
    for tree, lane in recorded["lanes"].items():
        assert lane["chain"] == METHOD_REGISTRY[tree].grows_from
        assert sorted(map(int, lane["rows"])) == list(lesson.TREE_BUDGETS)
        assert str(lane["best_budget"]) == max(lane["rows"], key=lambda b: lane["rows"][b]["speedup"])
    assert set(lesson.LIVE_TREE_BUDGETS) <= set(lesson.TREE_BUDGETS)  # live: a subset, ends and default included
    assert (min(lesson.LIVE_TREE_BUDGETS), max(lesson.LIVE_TREE_BUDGETS)) == (min(lesson.TREE_BUDGETS),
                                                                              max(lesson.TREE_BUDGETS))
    assert lesson.size_words(lesson.recorded()["trees"]) in lesson.live_size(trees_point())


def test_the_takeaway_names_the_tree_that_wins_and_why_from_the_numbers():
    dflash_wins = sweep(dflash_best=2.0, ar_best=1.5)
    text = lesson.trees_takeaway(dflash_wins)
    assert ("DFlash tree wins here (2.00× against 1.50×): it drafts for less (4.0 ms of drafting a step against "
            "8.0 ms") in text
    assert "A verified node costs 0.50 ms of verify here" in text
    assert "DFlash tree's draft forward costs 4.00 ms, 8.0 verified nodes' worth, 1.0 of them a step" in text
    assert "AR tree's draft forward costs 2.00 ms, 4.0 verified nodes' worth, 4.0 of them a step" in text
    ar_wins = sweep(dflash_best=1.5, ar_best=2.0, ar_forward_ms=0.5)
    other = lesson.trees_takeaway(ar_wins)
    assert ("AR tree wins here (2.00× against 1.50×): it drafts for less (2.0 ms of drafting a step against "
            "4.0 ms") in other
    assert "DFlash tree wins" not in other and "AR tree wins" not in text
    # the AR tree ahead although its drafting costs more a step: its τ must be what pays, and the words say so
    costly = copy.deepcopy(ar_wins)
    for r in costly["trees"]["data"]["lanes"]["eagle3_tree"]["rows"].values():
        r["draft_ms_per_step"], r["tau"] = 8.0, r["tau"] + 1.0
    assert "its higher τ (τ 4.50 against 3.50) pays for its costlier drafting" in lesson.trees_takeaway(costly)
    level = sweep(dflash_best=2.0, ar_best=1.99)
    assert "The two trees run level at their best budgets" in lesson.trees_takeaway(level)
    assert lesson.trees_slide(dflash_wins).startswith("DFlash tree wins: 2.00× at 16 nodes")
    assert lesson.trees_slide(ar_wins).startswith("AR tree wins: 2.00× at 16 nodes")


def test_tau_and_the_peak_are_worded_from_the_numbers():
    data = sweep(dflash_best=2.0, ar_best=1.5)
    text = lesson.trees_takeaway(data)
    assert "DFlash tree's τ rises from 2.50 at 4 nodes to 4.00 at 64" in text
    assert "its speedup peaks at 2.00× at 16 nodes, then falls to 1.40× at 64" in text
    assert "here both trees show the same shape" in text
    lane = data["trees"]["data"]["lanes"]["dflash_tree"]
    lane["rows"]["64"]["speedup"], lane["best_budget"] = 2.5, 64  # still rising at the largest budget
    for r in lane["rows"].values():
        r["tau"] = 3.0  # and τ flat
    text = lesson.trees_takeaway(data)
    assert "DFlash tree's τ holds from 3.00" in text
    assert "is highest at the largest budget measured, 2.50× at 64" in text
    assert "here AR tree shows the same shape" in text


def test_the_verify_line_is_the_least_squares_line():
    assert verify_line([(0, 10.0), (10, 15.0), (20, 20.0)]) == pytest.approx((10.0, 0.5))
    assert verify_line([(4, 10.0), (4, 12.0)]) == (11.0, 0.0)  # one node count: no slope to read
    costs = tree_costs(sweep(2.0, 1.5)["trees"]["data"])
    assert costs["verify"] == pytest.approx((10.0, 0.5))
    assert costs["lanes"]["eagle3_tree"]["forward_nodes"] == pytest.approx(4.0)


def test_the_why_panel_draws_the_recording():
    from app.tabs.why import trees_outputs

    recorded = lesson.recorded()["trees"]
    budget, costs, published, table = trees_outputs(recorded)
    data = recorded["data"]
    for tree, lane in data["lanes"].items():
        budgets = sorted(lane["rows"], key=int)
        for key in ("tau", "speedup"):
            measured = [t for t in budget.data if t.name == f"{METHOD_REGISTRY[tree].label}, by budget"
                        and list(t.y) == [lane["rows"][b][key] for b in budgets]]
            assert len(measured) == 1, (tree, key)
            flat = lane["chain_row"][key]
            assert any(list(t.y) == [flat, flat] and t.line.dash == "dash" for t in budget.data), (tree, key)
    base_ms, node_ms = tree_costs(data)["verify"]
    assert f"{base_ms:.1f} ms + {node_ms:.2f} ms a node" in table
    assert any(t.name and t.name.startswith("least-squares line") for t in costs.data)
    bars = published.data[0]
    for p in PUBLISHED_TREES:
        assert p.tree_speedup in bars.x and p.chain_speedup in bars.x and p.setting in " ".join(bars.y)
    assert "★" in table and lesson.recorded_words(recorded)[1:] in table


def test_the_charts_keep_each_lanes_one_colour():
    from app.draw.theme import lane_style

    data = lesson.recorded()["trees"]["data"]
    for fig in (budget_figure(data), tree_costs_figure(data)):
        for tree in TREES:
            traces = [t for t in fig.data if t.name and t.name.startswith(METHOD_REGISTRY[tree].label + ",")
                      or t.name == METHOD_REGISTRY[tree].label]
            assert traces and all(t.marker.color == lane_style(tree)[0] for t in traces), tree
    assert len({lane_style(m)[0] for m in METHOD_REGISTRY}) == len(METHOD_REGISTRY)  # no two lanes share a colour
    assert tree_published_figure(data, PUBLISHED_TREES).data[0].marker.pattern.shape[-1] == "/"


def test_a_tree_is_ahead_of_its_chain_only_where_the_prompts_interval_says_so():
    """With each lane's time on every prompt recorded, "ahead of" and "behind" need the 95 % interval of the tree's
    speed over the chain's (prompt by prompt) to exclude 1; a gap the prompts do not carry reads as level."""
    data = sweep(dflash_best=2.0, ar_best=1.5)
    lane = data["trees"]["data"]["lanes"]["dflash_tree"]
    chain, best = lane["chain_row"], lane["rows"]["16"]

    def words(chain_walls, tree_walls) -> str:
        chain["wall_by_prompt"], best["wall_by_prompt"] = chain_walls, tree_walls
        return lesson.trees_takeaway(data)

    steady = words([1.0, 1.2, 0.9, 1.1], [0.8, 0.95, 0.72, 0.9])  # faster on every prompt
    assert "ahead of the chain's 1.40× (prompt by prompt, 1.25 times the chain's speed, 95 % interval" in steady
    noisy = words([1.0, 1.2, 0.9, 1.1], [0.7, 1.3, 0.6, 1.2])  # faster overall, slower on two prompts
    assert "level with the chain's 1.40× (prompt by prompt, 1.11 times the chain's speed" in noisy
    slower = words([1.0, 1.2, 0.9, 1.1], [1.2, 1.45, 1.1, 1.3])
    assert "behind the chain's 1.40×" in slower
    del chain["wall_by_prompt"]  # a recording without per-prompt times: the speedups and the tolerance decide
    assert "ahead of the chain's 1.40×" in lesson.trees_takeaway(data)
