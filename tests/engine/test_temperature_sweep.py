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
