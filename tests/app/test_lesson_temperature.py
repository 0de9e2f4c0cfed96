"""The lesson's temperature point: its words chosen from the numbers (rising data gets rising words, falling
data falling ones). Its live measurement on a tiny engine: tests/app/test_live_sizes.py."""

import pytest

from app import lesson


def cell(mean: float, half: float = 0.05) -> dict:
    return {"mean": mean, "low": mean - half, "high": mean + half}


def sweep_of(taus: dict[str, tuple[float, float]], entropy=(0.0, 2.5)) -> dict:
    """A two-temperature sweep with the given τ per lane at T = 0 and T = 1."""
    def at(i: int) -> dict:
        lanes = {m: {"tau": cell(pair[i]), "expected_acceptance": cell(0.5), "one_minus_tv": cell(0.52),
                     "judged": 2400} for m, pair in taus.items()}
        return {"lanes": lanes, "target_entropy": cell(entropy[i])}
    return {"temperatures": {"0.0": at(0), "1.0": at(1)}}


@pytest.mark.parametrize("taus, words", [((2.0, 3.0), "rises (2.00 → 3.00)"), ((3.0, 2.0), "falls (3.00 → 2.00)"),
                                         ((2.50, 2.52), "does not move beyond its 95 % intervals (2.50 → 2.52)")])
def test_each_lanes_tau_is_worded_from_its_own_direction(taus, words):
    text = lesson.temperature_takeaway({"temperatures": {"data": sweep_of({"dflash": taus})}})
    assert f"DFlash's τ {words}" in text


def test_the_order_beside_the_papers_is_the_measured_one():
    data = {"temperatures": {"data": sweep_of({"eagle3": (3.0, 2.9), "dflash": (3.0, 2.4), "dspark": (3.0, 2.0)})}}
    text = lesson.temperature_takeaway(data)
    assert "the order of τ here is AR 2.90 > DFlash 2.40 > DSpark 2.00" in text
    assert "DSpark 6.11 > DFlash 5.40 > AR 5.14" in text
    flipped = {"temperatures": {"data": sweep_of({"eagle3": (3.0, 2.0), "dflash": (3.0, 2.4), "dspark": (3.0, 2.9)})}}
    assert "the order of τ here is DSpark 2.90 > DFlash 2.40 > AR 2.00" in lesson.temperature_takeaway(flipped)


def test_the_entropy_and_the_overlap_are_the_recordings_numbers():
    text = lesson.temperature_takeaway({"temperatures": {"data": sweep_of({"dflash": (3.0, 2.0)}, entropy=(0.0, 1.75))}})
    assert "goes 0.00 → 1.75 nats" in text and "50% expected against 1 − TV 52% over 2,400 judged drafts" in text


def heldout_row(rate: float, ceiling: float, speedup: float = 2.0, spread=(1.5, 2.5)) -> dict:
    return {"tau": cell(3.0), "expected_acceptance": cell(ceiling, 0.02), "verdict_rate": cell(rate, 0.02),
            "one_minus_tv": cell(ceiling, 0.02), "judged": 2500, "speedup": speedup, "draft_cost": 0.3,
            "speedup_by_prompt": {"min": spread[0], "median": speedup, "max": spread[1]}}


def test_the_ceiling_over_the_held_out_prompts_says_which_rates_lie_within_1_minus_tv():
    sweep = {"temperatures": {"1.0": {"lanes": {"eagle3": heldout_row(0.41, 0.42), "dflash": heldout_row(0.60, 0.42)},
                                      "target_entropy": cell(2.0)}}, "num_prompts": 65}
    text = lesson.heldout_ceiling({"temperatures": {"data": sweep}})
    assert "Over 65 held-out prompts at T = 1" in text and "over 2,500 judged drafts" in text
    assert "1 of 2 measured rates lie within the interval of their 1 − TV" in text
    assert "DFlash expected 42% (40%–44%), measured 60% (58%–62%)" in text
    assert lesson.heldout_ceiling({}) == ""


def test_the_formula_over_the_held_out_prompts_places_the_one_prompt_in_their_spread():
    from types import SimpleNamespace

    sweep = {"temperatures": {"0.0": {"lanes": {"eagle3": heldout_row(0.5, 0.5, 1.7, (1.2, 2.0)),
                                                "dflash": heldout_row(0.5, 0.5, 2.2, (1.6, 2.9))},
                                      "target_entropy": cell(0.0)}}, "num_prompts": 65}
    inside = {"temperatures": {"data": sweep}, "greedy": SimpleNamespace(speedup=lambda m: {"eagle3": 1.9, "dflash": 2.5}[m])}
    assert "the one prompt's lanes lie within that spread" in lesson.heldout_formula(inside)
    assert "The fastest there is DFlash" in lesson.heldout_formula(inside)
    outside = {**inside, "greedy": SimpleNamespace(speedup=lambda m: {"eagle3": 2.66, "dflash": 2.5}[m])}
    assert "the one prompt's AR lie outside that spread" in lesson.heldout_formula(outside)
