"""Every direction or comparison a lesson takeaway states is chosen from the numbers it describes: fed rising
numbers it says they rise, fed falling ones that they fall (made-up recordings, tests/lesson_data.py)."""

from __future__ import annotations

import copy
import re

import pytest

from app import lesson, words
from app.lesson import POINTS

from lesson_data import baseline, comparison, lane


def test_the_words_follow_the_numbers():
    assert words.trend(0.6, 0.8) == "rises" and words.trend(0.8, 0.6) == "falls" and words.trend(0.8, 0.801) == "holds"
    assert words.versus(2.0, 1.5) == "ahead of" and words.versus(1.5, 2.0) == "behind"
    assert words.more_or_less(1.2, 1.0) == "more than" and words.more_or_less(0.9, 1.0) == "less than"
    assert words.survival([0.5, 1.0, 0.5, None, 1.0]) == [0.5, 0.5, 0.25]


def _race(ar_verify_ms: float, dflash_verify_ms: float, base_verify_ms: float = 10.0):
    """AR and DFlash against a baseline: AR keeps 3 drafts of 4 a step, DFlash 3 of 7, each with its verify time."""
    return {"greedy": comparison({"baseline": baseline(verify_ms=base_verify_ms),
                                  "eagle3": lane([(4, 3)] * 10, 2.0, ar_verify_ms),
                                  "dflash": lane([(7, 3)] * 10, 1.0, dflash_verify_ms)})}


def test_point_1_says_which_lane_is_ahead_and_what_a_verify_cost_from_the_numbers():
    ar_ahead = lesson.formula_takeaway(_race(ar_verify_ms=11.0, dflash_verify_ms=20.0))
    assert "AR (serial, " in ar_ahead and "is ahead of DFlash" in ar_ahead and "fastest lane is AR" in ar_ahead
    dflash_ahead = lesson.formula_takeaway(_race(ar_verify_ms=20.0, dflash_verify_ms=11.0))
    assert "is behind DFlash" in dflash_ahead and "fastest lane is DFlash" in dflash_ahead
    dearer = lesson.formula_takeaway(_race(ar_verify_ms=12.0, dflash_verify_ms=13.0))
    assert "(more than one)" in dearer and "1.20–1.30 baseline forwards" in dearer
    cheaper = lesson.formula_takeaway(_race(ar_verify_ms=8.0, dflash_verify_ms=8.5))
    assert "(less than one)" in cheaper and "more than one" not in cheaper


def _block(pattern, verify_ms: float = 10.0, gap_ms: float = 0.0):
    data = copy.deepcopy(lesson.recorded())
    data["greedy"] = comparison({"baseline": baseline(), "eagle3": lane([(4, 3)] * 10, 4.0, 10.0),
                                 "dflash": lane(pattern, 1.0, verify_ms, gap_ms)})
    return data


def test_point_5_names_conditional_acceptance_and_survival_and_their_directions():
    rising = lesson.bottlenecks_takeaway(_block([(3, 0), (3, 3)] * 5))  # 0.5, then 1.0 and 1.0 given that
    assert "conditional acceptance (position k passing, given 1..k−1 passed) rises, 0.50 at position 1 → 1.00" in rising
    assert "survival (1..k all passing) holds, 0.50 → 0.50" in rising
    falling = lesson.bottlenecks_takeaway(_block([(3, 3), (3, 2), (3, 1), (3, 0)] * 3))  # 3/4, 2/3, 1/2
    assert "conditional acceptance (position k passing, given 1..k−1 passed) falls, 0.75 at position 1 → 0.50" in falling
    assert "survival (1..k all passing) falls, 0.75 → 0.25" in falling
    assert "decays" not in rising + falling


def test_point_5_says_whether_the_markov_head_raises_tau_from_the_numbers():
    data = _block([(3, 3)] * 4)
    rows = data["parts"]["data"]["rows"]
    rows["dspark_no_markov"]["tau"], rows["dspark_verify_all"]["tau"] = 1.5, 4.0
    assert "gives τ 1.50, lower than 4.00 with its Markov head" in lesson.bottlenecks_takeaway(data)
    rows["dspark_no_markov"]["tau"] = 5.0
    assert "gives τ 5.00, higher than 4.00 with its Markov head" in lesson.bottlenecks_takeaway(data)


def test_point_6_compares_draft_costs_and_says_what_the_bubbles_leave_to_hide():
    cheap = lesson.dflash_takeaway(_block([(7, 3)] * 10))  # DFlash drafts for 1 ms against AR's 4
    assert "costing 0.10 of a verify per step, less than AR's 4 serial forwards (0.40)" in cheap
    assert "little for overlap to hide" in cheap and "overlap off" in cheap
    gappy = lesson.dflash_takeaway(_block([(7, 3)] * 10, verify_ms=1.0, gap_ms=5.0))
    assert "costing 1.00 of a verify per step, more than AR's" in gappy
    assert "time overlap is meant to hide" in gappy
    for text in (cheap, gappy):  # the claim is not made, the measurement that would show it is named
        assert "overlap on and off" in text and "GPU" in text and "hides" not in text


def test_point_3_says_whether_acceptance_is_within_chance_of_its_ceiling():
    within = {"sampled": comparison({"baseline": baseline(), "eagle3": lane([(1, 1), (1, 0)] * 50, 1.0, 10.0, tv=0.5)},
                                    temperature=1.0)}
    assert "acceptance rate is 50% of 100 judged drafts, 1 − TV predicts 50%" in lesson.ceiling_takeaway(within)
    assert "within chance of it" in lesson.ceiling_takeaway(within) and "1 of 1 lanes do" in lesson.ceiling_takeaway(within)
    above = {"sampled": comparison({"baseline": baseline(), "eagle3": lane([(1, 1)] * 100, 1.0, 10.0, tv=0.5)},
                                   temperature=1.0)}
    assert "above it by more than chance" in lesson.ceiling_takeaway(above) and "0 of 1 lanes do" in lesson.ceiling_takeaway(above)


def test_point_3_counts_the_judged_drafts_the_lane_chip_counts():
    from engine.contract.summary import acceptance_rate

    sampled = lesson.recorded()["sampled"]
    text = lesson.takeaway(POINTS[2])
    for method, result in sampled.lanes.items():
        if method != "baseline":  # one definition: the chip's acceptance rate is the lesson's
            assert f"acceptance rate is {acceptance_rate(result.steps):.0%}" in text.split(";")[
                [m for m in sampled.lanes if m != "baseline"].index(method)]


def test_point_9_says_whether_the_scheduler_pays_from_the_numbers():
    data = copy.deepcopy(lesson.recorded())
    rows = data["parts"]["data"]["rows"]
    rows["dspark"]["speedup"], rows["dspark_verify_all"]["speedup"] = 2.0, 2.5
    assert "here the scheduler does not pay" in lesson.parts_takeaway(data)
    rows["dspark"]["speedup"] = 3.0
    text = lesson.parts_takeaway(data)
    assert "here the scheduler pays" in text and "does not pay" not in text
    rows["dspark"]["verify_ms_per_step"], rows["dspark_verify_all"]["verify_ms_per_step"] = 20.0, 25.0
    assert "saved 5.0 ms of verify a step" in lesson.parts_takeaway(data)
    rows["dspark"]["verify_ms_per_step"] = 26.0
    assert "took 1.0 ms more of verify a step" in lesson.parts_takeaway(data)
    rows["dspark_no_markov"]["tau"], rows["dspark_verify_all"]["tau"] = 4.5, 4.0
    assert "The Markov head lowers τ from 4.50 to 4.00" in lesson.parts_takeaway(data)


def test_point_4_says_where_the_speedup_goes_past_the_best_k():
    data = copy.deepcopy(lesson.recorded())
    sweep = next(iter(data["sweeps"]["data"]["sweeps"].values()))
    sweep["rows"]["16"]["speedup"], sweep["rows"][str(sweep["best_k"])]["speedup"] = 1.0, 2.0
    assert "past it the speedup falls to 1.00× at K = 16" in lesson.sweep_takeaway(data)
    sweep["best_k"] = 16
    assert "the longest measured" in lesson.sweep_takeaway(data)


@pytest.mark.parametrize("p_value, words", [(0.5, "no chi-square test rejects it"), (0.001, "test rejects the target's odds for AR")])
def test_point_2_says_whether_a_lane_fails_the_distribution_check(p_value, words):
    data = copy.deepcopy(lesson.recorded())
    data["lossless"]["data"]["lanes"]["eagle3"]["p_value"] = p_value
    assert words in lesson.rule_takeaway(data)


def test_the_sweep_table_says_which_way_conditional_acceptance_and_survival_go():
    from app.tabs.why import sweeps_table

    data = copy.deepcopy(lesson.recorded()["sweeps"])
    sweep = next(iter(data["data"]["sweeps"].values()))
    sweep["acceptance"] = [0.6, 0.7, 0.9]
    assert "its conditional acceptance (position k passing, given 1..k−1 passed) rises, 0.60" in sweeps_table(data)
    sweep["acceptance"] = [0.9, 0.7, 0.6]
    assert "its conditional acceptance (position k passing, given 1..k−1 passed) falls, 0.90" in sweeps_table(data)
    assert "survival (1..k all passing) falls, 0.90 → 0.38" in sweeps_table(data)


def test_no_caption_or_point_says_acceptance_decays():
    from app.tabs import compare, why

    texts = [p.text for p in POINTS] + [why.SWEEP_CAPTION, why.MACHINE_CAPTION, compare.CHARTS_CAPTION,
                                         compare.TIMELINE_CAPTION]
    assert not any("acceptance decays" in t for t in texts)
    assert "costs more" not in compare.CHARTS_CAPTION  # what a verify cost is the chart's subtitle, from its numbers


# --- the slides' takeaways: the key numbers in a sentence or two, worded by the same choosers -------------

NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def test_every_slide_takeaway_is_short_and_its_numbers_are_the_full_takeaways():
    for point in POINTS:
        short, full = lesson.takeaway(point, slide=True), lesson.takeaway(point)
        assert len(short) <= 300 and short.count(". ") <= 2, (point.number, short)
        assert set(NUMBER.findall(short)) <= set(NUMBER.findall(full)), point.number


def test_slide_1_says_where_the_measurements_sit_and_what_a_verify_cost_from_the_numbers():
    dearer = lesson.formula_slide(_race(ar_verify_ms=12.0, dflash_verify_ms=13.0))
    assert "every lane's measured speedup sits below its formula" in dearer
    assert "One verify cost 1.20–1.30 baseline forwards (more than one)" in dearer
    cheaper = lesson.formula_slide(_race(ar_verify_ms=8.0, dflash_verify_ms=8.5))
    assert "(less than one)" in cheaper and "more than one" not in cheaper


@pytest.mark.parametrize("p_value, words", [(0.5, "no chi-square test rejects them"),
                                            (0.001, "the chi-square test rejects the target's odds for AR")])
def test_slide_2_says_whether_a_lane_fails_the_distribution_check(p_value, words):
    data = copy.deepcopy(lesson.recorded())
    data["lossless"]["data"]["lanes"]["eagle3"]["p_value"] = p_value
    assert words in lesson.rule_slide(data)


def test_slide_3_counts_the_lanes_within_chance_of_their_ceiling():
    within = {"sampled": comparison({"baseline": baseline(), "eagle3": lane([(1, 1), (1, 0)] * 50, 1.0, 10.0, tv=0.5)},
                                    temperature=1.0)}
    assert "AR 50% (1 − TV 50%); 1 of 1 within chance" in lesson.ceiling_slide(within)
    above = {"sampled": comparison({"baseline": baseline(), "eagle3": lane([(1, 1)] * 100, 1.0, 10.0, tv=0.5)},
                                   temperature=1.0)}
    assert "AR 100% (1 − TV 50%); 0 of 1 within chance" in lesson.ceiling_slide(above)


def test_slide_4_words_each_lanes_tau_from_its_own_direction():
    from test_lesson_temperature import sweep_of

    text = lesson.temperature_slide({"temperatures": {"data": sweep_of({"eagle3": (3.0, 2.0), "dflash": (2.0, 3.0)})}})
    assert "τ falls for AR, rises for DFlash" in text
    text = lesson.temperature_slide({"temperatures": {"data": sweep_of({"eagle3": (2.0, 3.0), "dflash": (3.0, 2.0)})}})
    assert "τ rises for AR, falls for DFlash" in text


def test_slide_5_says_where_the_speedup_goes_past_the_best_k():
    data = copy.deepcopy(lesson.recorded())
    sweep = next(iter(data["sweeps"]["data"]["sweeps"].values()))
    best = str(sweep["best_k"])
    sweep["rows"]["16"]["speedup"], sweep["rows"][best]["speedup"] = 1.0, 2.0
    assert f"best K is {best} at 2.00×, then falls to 1.00× at K = 16" in lesson.sweep_slide(data)
    sweep["rows"]["16"]["speedup"] = 3.0
    for k in sweep["rows"]:
        if int(best) < int(k) < 16:
            sweep["rows"][k]["speedup"] = 2.0 + (int(k) - int(best)) / 16  # rising all the way: no dip to name
    assert "then rises to 3.00× at K = 16" in lesson.sweep_slide(data)
    sweep["best_k"] = 16
    assert "best K is 16 at 3.00×, the longest measured" in lesson.sweep_slide(data)


def test_slide_6_words_survival_and_the_markov_head_from_the_numbers():
    falling = _block([(3, 3), (3, 2), (3, 1), (3, 0)] * 3)
    assert "DFlash's survival falls along its block, 0.75 → 0.25" in lesson.bottlenecks_slide(falling)
    assert "DFlash's survival holds along its block" in lesson.bottlenecks_slide(_block([(3, 3)] * 4))
    rows = falling["parts"]["data"]["rows"]
    rows["dspark_no_markov"]["tau"], rows["dspark_verify_all"]["tau"] = 1.5, 4.0
    assert "DSpark's τ is 1.50 with no order in its block, lower than 4.00 with a Markov head" in \
        lesson.bottlenecks_slide(falling)
    rows["dspark_no_markov"]["tau"] = 5.0
    assert "DSpark's τ is 5.00 with no order in its block, higher than 4.00 with a Markov head" in \
        lesson.bottlenecks_slide(falling)


def test_slide_7_compares_one_prompts_draft_costs_and_says_they_are_one_prompts():
    cheap = lesson.dflash_slide(_block([(7, 3)] * 10))
    assert cheap.startswith("One prompt (the timeline): ")
    assert "DFlash's one pass costs 0.10 of a verify, AR's 4 serial forwards 0.40." in cheap
    gappy = lesson.dflash_slide(_block([(7, 3)] * 10, verify_ms=1.0, gap_ms=5.0))
    assert "DFlash's one pass costs 1.00 of a verify, AR's 4 serial forwards 0.40." in gappy


def test_slide_9_says_whether_the_markov_head_and_the_scheduler_pay():
    data = copy.deepcopy(lesson.recorded())
    rows = data["parts"]["data"]["rows"]
    rows["dspark"]["speedup"], rows["dspark_verify_all"]["speedup"] = 2.0, 2.5
    rows["dspark_no_markov"]["tau"], rows["dspark_verify_all"]["tau"] = 1.5, 4.0
    assert "lifts τ 1.50 → 4.00" in lesson.parts_slide(data)
    assert "here the scheduler does not pay" in lesson.parts_slide(data)
    rows["dspark"]["speedup"], rows["dspark_no_markov"]["tau"] = 3.0, 4.5
    text = lesson.parts_slide(data)
    assert "lowers τ 4.50 → 4.00" in text and "here the scheduler pays" in text and "does not pay" not in text


def test_the_rejected_drafts_probabilities_are_printed_so_their_arithmetic_holds():
    words = lesson.rule_takeaway(lesson.recorded())
    found = re.search(r"p_target ([\d.]+) against p_draft ([\d.]+): it passed with probability ([\d.]+)", words)
    target, draft, passed = map(float, found.groups())
    assert target > 0 and draft > 0
    assert min(1.0, target / draft) == pytest.approx(passed, rel=0.1)  # 0.000 / 0.001 would print "0.05" beside 0


@pytest.mark.parametrize("prompt, prose", [
    ("Write a short story about a robot who learns to paint.", True),
    ("What is the capital of France and why is it famous?", True),
    ("import os\n\n\ndef list_files(path):", False), ("def f(x):", False), ("class Point:", False),
    ("for i in range(10):\n    print(i)", False), ("hello", False)])
def test_a_prose_prompt_gets_one_line_on_what_the_models_were_trained_on(prompt, prose):
    from app.words import prose_note

    from app.examples import example_prompts
    from engine.contract.presets import load_prompts

    assert ("trained only on Python source" in prose_note(prompt)) == prose
    assert not any(prose_note(p) for p in example_prompts() + load_prompts())  # code is never told it is prose


def test_a_dip_past_the_best_k_is_named_not_skipped():
    """A live sweep's one round (K = 1, 2, 4, 8) that zig-zags: the words name the dip instead of "holds at"."""
    data = copy.deepcopy(lesson.recorded())
    sweeps = data["sweeps"]["data"]
    sweeps["rounds"] = 1
    sweep = next(iter(sweeps["sweeps"].values()))
    sweep["rows"] = {k: {**sweep["rows"]["1"], "speedup": v} for k, v in
                     {"1": 1.24, "2": 1.79, "4": 1.26, "8": 1.73}.items()}
    sweep["best_k"] = 2
    words = lesson.sweep_slide(data)
    assert "best K is 2 at 1.79× (K = 8 level with it), then dips to 1.26× at K = 4, then is back at 1.73× at K = 8" \
        in words
    assert "holds at" not in words.split(";")[0]
    assert "dips to 1.26× at K = 4" in lesson.sweep_takeaway(data)



def test_the_values_of_k_level_with_the_best_are_named_beside_it():
    """One run per K moves a speedup by up to about 8 % either way: a K within 15 % of the best is named level with it."""
    data = copy.deepcopy(lesson.recorded())
    data["sweeps"]["data"]["rounds"] = 1
    sweep = next(iter(data["sweeps"]["data"]["sweeps"].values()))
    sweep["rows"] = {k: {**sweep["rows"]["1"], "speedup": v} for k, v in
                     {"1": 1.24, "2": 1.79, "4": 1.26, "8": 1.73}.items()}
    sweep["best_k"] = 2
    assert "best K is 2 at 1.79× (K = 8 level with it)" in lesson.sweep_slide(data)
    data["sweeps"]["data"]["rounds"] = 2  # two rounds: a 3 % gap reads as a difference
    assert "level with it" not in lesson.sweep_slide(data).split(";")[0]


def _rounds(data: dict, speedups: dict[str, list[float]]) -> dict:
    """The recording's comparison with each lane's timing rounds at `speedups` over a baseline round of 100 tokens/s
    (a live comparison's rounds: app/run/runner.py), each lane's headline then their median."""
    from dataclasses import replace

    c = data["greedy"]
    rounds = len(next(iter(speedups.values())))
    lanes = {m: replace(lane, run_rates=tuple((100.0 * s, 100.0 * s) for s in speedups[m]) if m in speedups
                        else ((100.0, 100.0),) * rounds) for m, lane in c.lanes.items()}
    return {**data, "greedy": replace(c, lanes=lanes)}


def test_point_1_names_a_lane_ahead_only_where_its_rounds_lie_apart_from_the_others():
    """A live comparison times each lane in two rounds, each speedup moving up to LIVE_SPEED_NOISE between them: AR
    and DFlash read "ahead"/"behind" only where their rounds do not overlap, and the fastest lane is named alone only
    where its rounds lie above every other's; a single round reads level within ONE_ROUND_NOISE."""
    data = lesson.recorded()
    noise = lesson.LIVE_SPEED_NOISE
    overlapping = _rounds(data, {"eagle3": [2.3 * (1 - noise), 2.3 * (1 + noise)],
                                 "dflash": [2.2 * (1 - noise), 2.2 * (1 + noise)],
                                 "dspark": [1.5, 1.6], "classic": [1.2, 1.3]})
    words = lesson.formula_takeaway(overlapping)
    assert "is level with DFlash" in words and "fastest lanes, level within what their runs vary, are AR and DFlash" \
        in words, words
    apart = _rounds(data, {"eagle3": [2.0, 2.1], "dflash": [2.5, 2.6], "dspark": [1.5, 1.6], "classic": [1.2, 1.3]})
    words = lesson.formula_takeaway(apart)
    assert "is behind DFlash" in words and "the fastest lane is DFlash" in words, words
    once = _race(ar_verify_ms=11.0, dflash_verify_ms=11.0)  # timed once: AR 40/13, DFlash 40/12 baseline forwards
    c = once["greedy"]
    assert 1 < c.speedup("dflash") / c.speedup("eagle3") < 1 + lesson.ONE_ROUND_NOISE
    assert "is level with DFlash" in lesson.formula_takeaway(once)
    assert "is behind DFlash" in lesson.formula_takeaway(_race(ar_verify_ms=14.0, dflash_verify_ms=9.0))
