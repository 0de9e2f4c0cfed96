"""The lesson's words on acceptance: points 2 (the rejection rule keeps the target's odds) and 3 (1 − TV caps
acceptance), each a takeaway for the page and a shorter one for its slide. Torch-free and Gradio-free."""

from __future__ import annotations

from engine.contract.methods import METHOD_REGISTRY, method_label

from ..comparison import Comparison
from ..words import above_or_below, probability
from .speed import _drafting

REJECT_BELOW_P = 0.01  # a lane's distribution check fails below this p-value


def rule_takeaway(data: dict) -> str:
    check = data["lossless"]["data"]
    worst = min(check["lanes"].values(), key=lambda lane: lane["p_value"])["p_value"]
    lanes = ", ".join(method_label(m) for m in check["lanes"])
    example = first_rejection(data["sampled"])
    shown = ""
    if example is not None:
        method, step, position, token = example
        shown = (f" In the recorded run at temperature {data['sampled'].settings['temperature']:g}, {method_label(method)}'s "
                 f"draft {token.text!r} at step {step} had p_target {probability(token.target_prob)} against p_draft "
                 f"{probability(token.draft_prob)}: it passed with probability {probability(token.accept_prob)}, the "
                 f"draw was {probability(token.draw)}, so it was rejected and the target wrote its own token.")
    rejected = _rejected(check)
    if rejected:
        verdict = (f"the chi-square test rejects the target's odds for {', '.join(map(method_label, rejected))} "
                   f"(p below {REJECT_BELOW_P:g}; smallest p = {worst:.2g}): a lane that writes other odds than the "
                   "target's is a bug, or a 1-in-100 chance: run the check again")
    elif _too_small(check):
        verdict = (f"no chi-square test rejects the target's odds for any lane ({lanes}) at p below "
                   f"{REJECT_BELOW_P:g} (smallest p = {worst:.2f}): no evidence of a difference at this size. So few "
                   f"seeds only notice a large one: {resolution_words(check)}")
    else:
        verdict = (f"every lane ({lanes}) writes its first tokens with the target's own odds: no chi-square test "
                   f"rejects it at p below {REJECT_BELOW_P:g} (smallest p = {worst:.2f}); "
                   f"{resolution_words(check)}")
    return f"Over {check['samples']} seeds at temperature {check['temperature']:g}, {verdict}." + shown


# A distribution check whose likeliest pair's share is known only to more than this (half its 95 % interval) is
# too small to say the lanes write the target's odds, only that it found no difference.
RESOLVES = 0.10


def _resolution(check: dict) -> float | None:
    """Half the 95 % interval of a lane's share of the likeliest pair, were it sampling the target's odds exactly:
    how far off a lane's share must be before this many seeds can tell (None without pairs)."""
    probs = check.get("target_probs") or []
    if not probs or not check.get("samples"):
        return None
    p = probs[0]
    return 1.96 * (p * (1 - p) / check["samples"]) ** 0.5


def _too_small(check: dict) -> bool:
    resolution = _resolution(check)
    return resolution is None or resolution > RESOLVES


def resolution_words(check: dict) -> str:
    """"at 40 seeds a lane's share of its likeliest pair (the target's 43%) is known to ± 15 points (95 %)"."""
    resolution = _resolution(check)
    if resolution is None:
        return "the check counted no pair"
    return (f"at {check['samples']} seeds a lane's share of the likeliest pair (the target's "
            f"{check['target_probs'][0]:.0%}) is known to ± {100 * resolution:.0f} points (95 %)")


def _rejected(check: dict) -> list[str]:
    """The lanes whose distribution check fails (p below REJECT_BELOW_P)."""
    return [m for m, lane in check["lanes"].items() if lane["p_value"] < REJECT_BELOW_P]


def rule_slide(data: dict) -> str:
    check = data["lossless"]["data"]
    worst = min(lane["p_value"] for lane in check["lanes"].values())
    rejected = _rejected(check)
    head = f"Over {check['samples']} seeds at temperature {check['temperature']:g}"
    if rejected:
        return (f"{head}, the chi-square test rejects the target's odds for {', '.join(map(method_label, rejected))} "
                f"(p = {worst:.2g}, below {REJECT_BELOW_P:g}): a bug, or a 1-in-100 chance.")
    if _too_small(check):
        return (f"{head}, no chi-square test rejects the target's odds (smallest p = {worst:.2f}): no evidence of a "
                f"difference at this size, where a share is known to ± {100 * _resolution(check):.0f} points."
                if _resolution(check) is not None else f"{head}, the check counted no pair.")
    return (f"{head}, every lane's first tokens follow the target's own odds: no chi-square test rejects them "
            f"(smallest p = {worst:.2f}).")


def first_rejection(comparison: Comparison):
    """(method, step index, position, token) of the recorded run's first rejected draft with a draw."""
    for method, lane in comparison.lanes.items():
        for step in lane.steps:
            for position, token in enumerate(step.drafted, start=1):
                if token.verdict == "rejected" and token.draw is not None:
                    return method, step.index, position, token
    return None


def judged_drafts(lane) -> list:
    """The drafts the rule decided on, each with its 1 − TV: sent to the target, up to the first rejection."""
    return [t for s in lane.steps for t in s.drafted[:s.num_judged] if t.tv is not None]


def _ceiling_rows(c: Comparison) -> list[tuple]:
    """(method, judged drafts, acceptance rate, 1 − TV, chance, within chance) of each lane that judged a draft."""
    rows = []
    for m in _drafting(c):
        judged = judged_drafts(c.lanes[m])
        if judged:
            passed = sum(t.verdict == "accepted" for t in judged) / len(judged)
            ceiling = 1 - sum(t.tv for t in judged) / len(judged)
            noise = 2 * (ceiling * (1 - ceiling) / len(judged)) ** 0.5  # two standard errors of a count of n
            rows.append((m, len(judged), passed, ceiling, noise, abs(passed - ceiling) <= noise))
    return rows


def ceiling_takeaway(data: dict) -> str:
    parts, agree = [], 0
    for m, n, passed, ceiling, noise, within in _ceiling_rows(data["sampled"]):
        agree += within
        where = "within chance of it" if within else f"{above_or_below(passed, ceiling, 0)} it by more than chance"
        parts.append(f"{method_label(m)}'s acceptance rate is {passed:.0%} of {n} judged drafts, 1 − TV "
                     f"predicts {ceiling:.0%} (± {noise:.0%} by chance): {where}")
    if not parts:
        return "No drafting lane judged a draft in this recording."
    return ("; ".join(parts) + f". Under the rejection rule a draft passes with probability 1 − TV on average, so "
            f"the two should agree up to chance: {agree} of {len(parts)} lanes do here." + heldout_ceiling(data))


def ceiling_slide(data: dict) -> str:
    rows = _ceiling_rows(data["sampled"])
    if not rows:
        return "No drafting lane judged a draft in this recording."
    lanes = ", ".join(f"{method_label(m)} {passed:.0%} (1 − TV {ceiling:.0%})" for m, _, passed, ceiling, _, _ in rows)
    one = (f"{lanes}; {sum(r[5] for r in rows)} of {len(rows)} within chance "
           f"(± {_whole_span([100 * r[4] for r in rows])} points) of their 1 − TV")
    heldout = _heldout_ceiling_rows(data)
    if not heldout:
        return f"Acceptance rate on one prompt: {one}."
    num_prompts, judged, within = heldout
    return (f"Over {num_prompts} held-out prompts ({_whole_span(judged)} judged drafts a lane) {within} of "
            f"{len(judged)} lanes' rates lie within their 1 − TV's interval. One prompt (×): {one}.")


def _whole_span(values) -> str:
    """"13" for one whole number, "12–13" for several; thousands separated."""
    low, high = round(min(values)), round(max(values))
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _heldout_ceiling_rows(data: dict):
    """(held-out prompts, judged drafts per lane, lanes whose measured rate lies within 1 − TV's interval) at the
    temperature sweep's highest temperature; None without the sweep."""
    if "temperatures" not in data:
        return None
    sweep = data["temperatures"]["data"]
    top = sweep["temperatures"][max(sweep["temperatures"], key=float)]
    lanes = [row for m, row in top["lanes"].items() if m in METHOD_REGISTRY]
    within = sum(row["one_minus_tv"]["low"] <= row["verdict_rate"]["mean"] <= row["one_minus_tv"]["high"]
                 for row in lanes)
    return sweep["num_prompts"], [row["judged"] for row in lanes], within


def _percent_interval(cell: dict) -> str:
    return f"{cell['mean']:.0%} ({cell['low']:.0%}–{cell['high']:.0%})"


def heldout_ceiling(data: dict) -> str:
    """The same claim over every held-out prompt at the temperature sweep's highest temperature: per lane, the
    expected acceptance (the mean of min(1, p/q)) and the measured verdict rate against 1 − TV, with 95 %
    intervals, and whether each measured rate lies within 1 − TV's interval ("" without the sweep)."""
    if "temperatures" not in data:
        return ""
    sweep = data["temperatures"]["data"]
    top = max(sweep["temperatures"], key=float)
    lanes = {m: row for m, row in sweep["temperatures"][top]["lanes"].items() if m in METHOD_REGISTRY}
    parts, within = [], 0
    for m, row in lanes.items():
        rate, ceiling = row["verdict_rate"], row["one_minus_tv"]
        inside = ceiling["low"] <= rate["mean"] <= ceiling["high"]
        within += inside
        parts.append(f"{method_label(m)} expected {_percent_interval(row['expected_acceptance'])}, measured "
                     f"{_percent_interval(rate)}, 1 − TV {_percent_interval(ceiling)} over {row['judged']:,} judged drafts")
    return (f" Over {sweep['num_prompts']} held-out prompts at T = {float(top):g}: " + "; ".join(parts)
            + f". {within} of {len(lanes)} measured rates lie within the interval of their 1 − TV.")


# Speedups from one run per configuration (a live measurement's one round) move by up to about this much
# (relative) from run to run on a shared machine (docs/benchmarks.md): closer than this, they read as level.


def ceiling_claim(data: dict) -> str:
    """Point 3's slide title, chosen from what its chart shows: how many lanes' measured acceptance over the held-out
    prompts lies within the interval of their 1 − TV."""
    heldout = _heldout_ceiling_rows(data)
    if heldout is None:
        return "Acceptance is capped by how far the drafter is from the target"
    num_prompts, judged, within = heldout
    if within == len(judged):
        return f"Acceptance is the overlap 1 − TV: {within} of {len(judged)} lanes, {num_prompts} prompts"
    return f"Acceptance against 1 − TV: {within} of {len(judged)} lanes within its interval"

