"""The temperature sweep: every lane's τ and acceptance against the baseline at each temperature, with
intervals over prompts, and the scheduled drafter's predicted survival against the realised one."""

import math

import pytest

from engine.measure.sweep import acceptance_row, ratio_interval, temperature_sweep

PROMPTS = ["def add(a, b):", "class Point:"]


def test_the_ratio_interval_is_the_ratio_of_sums_and_widens_with_spread_between_prompts():
    mean, low, high = ratio_interval([3, 4, 5], [5, 5, 5])
    assert mean == pytest.approx(0.8) and low < 0.8 < high
    _, steady_low, steady_high = ratio_interval([4, 4, 4], [5, 5, 5])
    assert steady_low == steady_high == pytest.approx(0.8)  # no spread between prompts: no width
    assert all(math.isnan(x) for x in ratio_interval([0, 0], [0, 0]))


@pytest.fixture(scope="module")
def sweep(random_engine):
    return temperature_sweep(random_engine, PROMPTS, 16, temperatures=(0.0, 1.0), argmax_at=(1.0,))


def test_every_drafting_lane_is_measured_at_every_temperature_with_its_judged_drafts(sweep, random_engine):
    drafting = [m for m in random_engine.methods() if m != "baseline"]
    for temperature, argmax in (("0.0", set()), ("1.0", {f"{m}_argmax" for m in drafting})):
        lanes = sweep["temperatures"][temperature]["lanes"]
        assert set(drafting) | {"dspark_verify_all"} | argmax == set(lanes)
        for row in lanes.values():
            assert row["judged"] > 0
            for name in ("expected_acceptance", "verdict_rate", "one_minus_tv", "tau"):
                assert row[name]["low"] <= row[name]["mean"] <= row[name]["high"]


def test_at_temperature_zero_the_expected_acceptance_is_the_verdict_rate(sweep):
    for row in sweep["temperatures"]["0.0"]["lanes"].values():  # greedy: accept_prob is 1 or 0, the verdict
        assert row["expected_acceptance"]["mean"] == pytest.approx(row["verdict_rate"]["mean"], abs=1e-4)


def test_the_target_is_sure_of_itself_at_zero_and_not_above(sweep):
    assert sweep["temperatures"]["0.0"]["target_entropy"]["mean"] == 0
    assert sweep["temperatures"]["1.0"]["target_entropy"]["mean"] > 0.5


def test_the_verify_all_lane_records_survival_per_position_from_one(sweep):
    survival = sweep["temperatures"]["1.0"]["lanes"]["dspark_verify_all"]["survival"]
    assert sorted(survival) == list(range(1, len(survival) + 1))
    predicted = [survival[k]["predicted"] for k in sorted(survival)]
    assert predicted == sorted(predicted, reverse=True)  # a product of confidences never grows


def test_acceptance_row_counts_only_judged_tokens(random_engine):
    from engine.contract.types import GenerationConfig

    result = random_engine.generate(PROMPTS[0], GenerationConfig(method="dflash", max_new_tokens=16, temperature=1.0))
    judged = sum(1 for s in result.steps for t in s.drafted if t.accept_prob is not None)
    drafted = sum(len(s.drafted) for s in result.steps)
    assert acceptance_row([result])["judged"] == judged < drafted


def test_each_lane_splits_tau_and_speedup_by_kind_as_its_whole_row_does(random_engine):
    from engine.measure.sweep import kind_rows

    prompts = [*PROMPTS, "import os\n"]
    split = temperature_sweep(random_engine, prompts, 12, temperatures=(0.0,), methods=["dflash"],
                              kinds=["free code", "prose-like", "free code"])
    lane = split["temperatures"]["0.0"]["lanes"]["dflash"]
    assert set(lane["by_kind"]) == {"free code", "prose-like"}
    assert [lane["by_kind"][k]["prompts"] for k in ("free code", "prose-like")] == [2, 1]
    for cell in lane["by_kind"].values():
        for name in ("tau", "speedup"):
            assert cell[name]["low"] <= cell[name]["mean"] <= cell[name]["high"]
    one = temperature_sweep(random_engine, prompts, 12, temperatures=(0.0,), methods=["dflash"], kinds=["x"] * 3)
    whole = one["temperatures"]["0.0"]["lanes"]["dflash"]
    assert whole["by_kind"]["x"]["tau"]["mean"] == pytest.approx(whole["tau"]["mean"], abs=1e-3)  # one kind: the whole
    assert "by_kind" not in temperature_sweep(random_engine, PROMPTS, 8, temperatures=(0.0,),
                                              methods=["dflash"])["temperatures"]["0.0"]["lanes"]["dflash"]
    with pytest.raises(Exception, match="2 kinds for 3 prompts"):
        temperature_sweep(random_engine, prompts, 8, temperatures=(0.0,), methods=["dflash"], kinds=["a", "b"])
    assert kind_rows([], [], []) == {}


def test_kind_rows_compute_each_kind_from_its_own_prompts():
    from types import SimpleNamespace

    from engine.measure.sweep import kind_rows

    def run(wall, committed_per_step):
        steps = [SimpleNamespace(committed=[0] * c) for c in committed_per_step]
        return SimpleNamespace(steps=steps, summary=SimpleNamespace(wall_s=wall, num_steps=len(steps)))

    lane = [run(1.0, [4, 4]), run(2.0, [1, 1]), run(1.0, [4, 2])]
    baseline = [run(3.0, [1] * 8), run(2.0, [1] * 2), run(3.0, [1] * 6)]
    rows = kind_rows(lane, baseline, ["a", "b", "a"])
    assert rows["a"]["prompts"] == 2 and rows["a"]["tau"]["mean"] == pytest.approx(14 / 4)
    assert rows["a"]["speedup"]["mean"] == pytest.approx(6 / 2) and rows["b"]["speedup"]["mean"] == pytest.approx(1)
    assert rows["b"]["tau"] == {"mean": 1.0, "low": 1.0, "high": 1.0}  # one prompt: no interval to widen


def test_kind_rows_pair_each_lane_with_the_others_prompt_by_prompt():
    """"vs": a lane's speed over another's within a kind, from their summed wall times on the same prompts, with an
    interval that is zero-width where every prompt gives the same ratio and wide where the ratios disagree."""
    from types import SimpleNamespace

    from engine.measure.sweep import kind_rows

    def run(wall):
        return SimpleNamespace(steps=[], summary=SimpleNamespace(wall_s=wall, num_steps=1))

    lane = [run(1.0), run(2.0), run(1.0), run(1.0)]
    steady = [run(2.0), run(4.0), run(9.0), run(1.0)]  # twice as slow on kind "a", alike and then nine times on "b"
    rows = kind_rows(lane, [run(3.0)] * 4, ["a", "a", "b", "b"], {"eagle3": steady})
    assert rows["a"]["vs"]["eagle3"] == {"mean": 2.0, "low": 2.0, "high": 2.0}
    assert rows["b"]["vs"]["eagle3"]["mean"] == pytest.approx(10 / 2)
    assert rows["b"]["vs"]["eagle3"]["low"] < 1 < rows["b"]["vs"]["eagle3"]["high"]  # two prompts that disagree
    assert kind_rows(lane, lane, ["a"] * 4)["a"]["vs"] == {}


def test_a_sweep_pairs_every_lane_with_each_serial_lane_within_a_kind(random_engine):
    split = temperature_sweep(random_engine, [*PROMPTS, "import os\n"], 8, temperatures=(0.0,),
                              methods=["eagle3", "dflash"], kinds=["a", "b", "a"])
    lanes = split["temperatures"]["0.0"]["lanes"]
    assert set(lanes["dflash"]["by_kind"]["a"]["vs"]) == {"eagle3"}
    assert lanes["eagle3"]["by_kind"]["a"]["vs"] == {}  # never paired with itself
    cell = lanes["dflash"]["by_kind"]["a"]["vs"]["eagle3"]
    assert cell["low"] <= cell["mean"] <= cell["high"]
