"""The lesson's words on speed: points 1 (the formula), 5 (the K sweep), 6 (the three bottlenecks), 7 (DFlash's one
pass) and 9 (DSpark's parts), each a takeaway for the page and a shorter one for its slide, computed from the
recordings (or a live measurement in a recording's place). Torch-free and Gradio-free."""

from __future__ import annotations

from engine.contract.methods import METHOD_REGISTRY, method_label

from ..comparison import Comparison, verify_cost
from ..settings import drafts_per_step_control
from ..theory import speedup
from ..words import TOLERANCE, above_or_below, more_or_less, span, survival, trend, versus
from .choice import rule_words
from .kinds import kinds_sentence
from .kv import kv_words

def _drafting(comparison: Comparison) -> list[str]:
    return [m for m, lane in comparison.lanes.items() if METHOD_REGISTRY[m].drafts and lane.summary is not None]


def _formula_rows(c: Comparison) -> tuple[dict, dict, list[float]]:
    """Each drafting lane's measured speedup and its formula's, and what one verify cost in baseline forwards."""
    measured, formula, costs = {}, {}, []
    for m in _drafting(c):
        s, ratio = c.lanes[m].summary, c.speedup(m)
        if ratio is None or not s.verify_s:
            continue
        measured[m], formula[m] = ratio, speedup(s.tau, s.draft_s / s.verify_s)
        cost = verify_cost(c, m)
        if cost is not None:
            costs.append(cost)
    return measured, formula, costs


def _below_formula(measured: dict, formula: dict) -> str:
    below = [m for m in measured if measured[m] < formula[m]]
    return ("every lane's measured speedup sits below its formula" if len(below) == len(measured) else
            "no lane's measured speedup sits below its formula" if not below else
            f"{', '.join(method_label(m) for m in below)} sit below the formula, the others at or above it")


def _verify_cost_words(costs: list[float]) -> str:
    """"1.11–1.38 baseline forwards (more than one)": what one verify cost, against the formula's one forward."""
    return f"{span(costs)} baseline forwards ({more_or_less(sum(costs) / len(costs), 1.0, 0.05)} one)"


def formula_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    measured, formula, costs = _formula_rows(c)
    parts = []
    for m in measured:
        s = c.lanes[m].summary
        parts.append(f"{method_label(m)} τ {s.tau:.2f}, draft/verify {s.draft_s / s.verify_s:.2f} → formula "
                     f"{formula[m]:.2f}×, measured {measured[m]:.2f}×")
    if not parts:
        return "No drafting lane has a speedup in this recording."
    heldout = heldout_formula(data)
    where = _below_formula(measured, formula)
    why = ""
    if costs:
        why = (f" The formula counts a verify as one baseline forward; here one verify cost {_verify_cost_words(costs)}"
               ", and host work, bubbles and the prefill are not in the formula at all.")
    serial, one_pass = _first_serial_and_one_pass(c)
    race = ""
    if serial in measured and one_pass in measured:
        race = (f" On this one prompt {method_label(serial)} (serial, {measured[serial]:.2f}×) is "
                f"{_race(c, serial, one_pass)} {method_label(one_pass)} (one pass, "
                f"{measured[one_pass]:.2f}×); {_fastest(c, measured)}. "
                "One prompt moves these: the K sweep (point 5) averages several.")
    return "; ".join(parts) + f". Here {where}." + why + race + heldout + _by_kind(data, 1)


def _by_kind(data: dict, number: int) -> str:
    """" By kind of text at T = 0, …": point `number`'s sentence on the held-out prompts by kind ("" without kinds).
    The page's takeaway only (with the kinds' table under it): a slide has room for neither."""
    sentence = kinds_sentence(data, number)
    return f" {sentence}" if sentence else ""


def _race(c: Comparison, a: str, b: str) -> str:
    """Where lane `a`'s speedup stands against `b`'s, in words no stronger than the runs behind them: with two or
    more timing rounds each, "ahead of" or "behind" only where their rounds' speedups do not overlap; with one,
    only where they are further apart than two figures measured once move (ONE_ROUND_NOISE)."""
    spread_a, spread_b = c.speedup_spread(a), c.speedup_spread(b)
    if spread_a is not None and spread_b is not None:
        return "ahead of" if spread_a[0] > spread_b[1] else "behind" if spread_a[1] < spread_b[0] else "level with"
    return versus(c.speedup(a), c.speedup(b), ONE_ROUND_NOISE)


def _fastest(c: Comparison, measured: dict[str, float]) -> str:
    """The fastest lane in words, or the lanes level with it (_race) when its lead is within the runs' noise."""
    best = max(measured, key=measured.get)
    level = [m for m in measured if m != best and _race(c, best, m) == "level with"]
    if not level:
        return f"the fastest lane is {method_label(best)}"
    names = [method_label(m) for m in [best, *level]]
    return f"the fastest lanes, level within what their runs vary, are {', '.join(names[:-1])} and {names[-1]}"


def formula_slide(data: dict) -> str:
    measured, formula, costs = _formula_rows(data["greedy"])
    if not measured:
        return "No drafting lane has a speedup in this recording."
    cost = f" One verify cost {_verify_cost_words(costs)}." if costs else ""
    heldout = _heldout_formula_rows(data)
    if heldout:
        num_prompts, rows = heldout
        lanes = ", ".join(f"{method_label(m)} {s:.2f}× (formula {f:.2f}×)" for m, (s, f) in rows.items())
        one = ", ".join(f"{method_label(m)} {measured[m]:.2f}×" for m in measured)
        where = _below_formula({m: s for m, (s, _) in rows.items()}, {m: f for m, (_, f) in rows.items()})
        return f"Over {num_prompts} held-out prompts: {lanes}; {where}. One prompt alone (hatched): {one}."
    lanes = ", ".join(f"{method_label(m)} {measured[m]:.2f}× (formula {formula[m]:.2f}×)" for m in measured)
    one = rule_words(str(data["greedy"].settings.get("prompt", "")), short=True)
    return f"On one prompt ({one}): {lanes}; {_below_formula(measured, formula)}.{cost}"


def _heldout_formula_rows(data: dict):
    """(held-out prompts, {lane: (measured speedup, formula)}) at temperature 0 from the temperature sweep; None
    without it."""
    sweep = data.get("temperatures", {}).get("data") if isinstance(data.get("temperatures"), dict) else None
    if not sweep or "0.0" not in sweep.get("temperatures", {}):
        return None
    rows = {m: (row["speedup"], speedup(row["tau"]["mean"], row["draft_cost"]))
            for m, row in sweep["temperatures"]["0.0"]["lanes"].items() if m in METHOD_REGISTRY}
    return (sweep["num_prompts"], rows) if rows else None


def heldout_formula(data: dict) -> str:
    """The formula's two numbers and the measured speedup over every held-out prompt at temperature 0 (the
    temperature sweep), each lane's spread over the prompts beside them, and where the one prompt's lanes
    sit in it ("" without the sweep)."""
    if "temperatures" not in data or "0.0" not in data["temperatures"]["data"]["temperatures"]:
        return ""
    sweep = data["temperatures"]["data"]
    lanes = {m: row for m, row in sweep["temperatures"]["0.0"]["lanes"].items() if m in METHOD_REGISTRY}
    parts = []
    for m, row in lanes.items():
        spread = row["speedup_by_prompt"]
        parts.append(f"{method_label(m)} τ {row['tau']['mean']:.2f}, draft/verify {row['draft_cost']:.2f} → formula "
                     f"{speedup(row['tau']['mean'], row['draft_cost']):.2f}×, measured {row['speedup']:.2f}× (one "
                     f"prompt alone: {spread['min']:.2f}× to {spread['max']:.2f}×)")
    ranked = sorted(lanes, key=lambda m: lanes[m]["speedup"], reverse=True)
    example = data["greedy"]
    outside = [m for m in lanes if (example.speedup(m) is not None and not
               lanes[m]["speedup_by_prompt"]["min"] <= example.speedup(m) <= lanes[m]["speedup_by_prompt"]["max"])]
    where = (f"; the one prompt's {', '.join(method_label(m) for m in outside)} lie outside that spread"
             if outside else "; the one prompt's lanes lie within that spread")
    return (f" Over {sweep['num_prompts']} held-out prompts at temperature 0 (the temperature sweep, point 4): "
            + "; ".join(parts) + f". The fastest there is {method_label(ranked[0])}{where}.")



# How far apart two speedups measured once each (a live size) must be to be worded as different: a figure of one round
# moves up to LIVE_SPEED_NOISE (8 %) either way between repeats (docs/benchmarks.md), so two of them move apart by up to
# 1 − 0.92 / 1.08 = 15 % of the larger; 18 % leaves room beside that for a real gap of a few percent that the recording
# calls no difference (the scheduler's 1.96× against 1.93×), which noise alone must not turn into a verdict live.
ONE_ROUND_NOISE = 0.18


def speed_tolerance(measured: dict) -> float:
    """How far apart two speedups of a measurement's data must be to be worded as different."""
    return ONE_ROUND_NOISE if measured.get("rounds") == 1 else TOLERANCE


def _sweep_rows(data: dict):
    """Per serial lane: (method, its sweep, best K, speedup there, longest K, speedup there, how the speedup moves
    past the best K: "falls to", "rises to", "holds at", or None when the best K is the longest measured, the dip
    past the best K as (K, speedup) when it falls there and comes back by more than the tolerance, else None, and
    the words for the other values of K level with the best)."""
    tolerance = speed_tolerance(data["sweeps"]["data"])
    for m, sweep in data["sweeps"]["data"]["sweeps"].items():
        best = str(sweep["best_k"])
        longest = str(max(int(k) for k in sweep["rows"]))
        at_best, at_longest = sweep["rows"][best]["speedup"], sweep["rows"][longest]["speedup"]
        moves = None if best == longest else {"falls": "falls to", "rises": "rises to", "holds": "holds at"}[
            trend(at_best, at_longest, tolerance)]
        past = sorted((int(k), row["speedup"]) for k, row in sweep["rows"].items() if int(best) < int(k) < int(longest))
        low = min(past, key=lambda row: row[1], default=None)
        dip = (low if low is not None and trend(at_best, low[1], tolerance) == "falls"
               and trend(low[1], at_longest, tolerance) == "rises" else None)
        level = [int(k) for k, row in sweep["rows"].items()
                 if k != best and trend(row["speedup"], at_best, tolerance) == "holds"]
        yield m, sweep, best, at_best, longest, at_longest, moves, dip, _level_words(sorted(level))


def _level_words(ks: list[int]) -> str:
    """" (K = 4 level with it)": the other values of K whose speedup the measurement cannot tell from the best."""
    if not ks:
        return ""
    return f" (K = {', '.join(map(str, ks))} level with it)"


def _past_best(moves: str, at_longest: float, longest: str, dip) -> str:
    """"falls to 1.20× at K = 8", or with a dip on the way "dips to 1.26× at K = 4, then is back at 1.73× at K = 8"."""
    if dip is None:
        return f"{moves} {at_longest:.2f}× at K = {longest}"
    return f"dips to {dip[1]:.2f}× at K = {dip[0]}, then is back at {at_longest:.2f}× at K = {longest}"


def sweep_takeaway(data: dict) -> str:
    parts = []
    for m, sweep, best, at_best, longest, at_longest, moves, dip, level in _sweep_rows(data):
        if moves is None:
            after = "the longest measured, so the sweep did not reach a K past which it falls"
        else:
            after = f"past it the speedup {_past_best(moves, at_longest, longest, dip)}"
        parts.append(f"{method_label(m)}'s best K is {best} at {at_best:.2f}×{level} ({after}; one draft forward "
                     f"costs {sweep['per_forward_cost']:.2f} of a verify)")
    return "; ".join(parts) + "."


def sweep_slide(data: dict) -> str:
    parts = []
    for m, _, best, at_best, longest, at_longest, moves, dip, level in _sweep_rows(data):
        after = ("the longest measured" if moves is None else f"then {_past_best(moves, at_longest, longest, dip)}")
        parts.append(f"{method_label(m)}'s best K is {best} at {at_best:.2f}×{level}, {after}")
    return "; ".join(parts) + "."


def _first_serial_and_one_pass(c: Comparison) -> tuple[str | None, str | None]:
    """The comparison's first serial drafting lane and its first one-pass lane (None where it has none)."""
    drafting = _drafting(c)
    return (next((m for m in drafting if not METHOD_REGISTRY[m].one_pass), None),
            next((m for m in drafting if METHOD_REGISTRY[m].one_pass), None))


def along_block(rates) -> str:
    """Conditional acceptance and survival along a block, each with its direction, in words."""
    known = [(k, r) for k, r in enumerate(rates, start=1) if r is not None]
    alive = survival(rates)
    if not known:
        return ""
    (k0, first), (k1, last) = known[0], known[-1]
    words = (f"its conditional acceptance (position k passing, given 1..k−1 passed) {trend(first, last)}, "
             f"{first:.2f} at position {k0} → {last:.2f} at {k1}")
    if len(alive) > 1:
        words += (f", while its survival (1..k all passing) {trend(alive[0], alive[-1])}, {alive[0]:.2f} → "
                  f"{alive[-1]:.2f} at position {len(alive)}")
    return words


def bottlenecks_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    parts = []
    if serial:
        parts.append(_drafting_share(c, serial))
    growth = _drafting_growth(data)
    if growth:
        parts.append(f"over the K sweep's prompts {growth}")
    if one_pass:
        words = along_block(c.lanes[one_pass].per_position_acceptance)
        if words:
            parts.append(f"along {method_label(one_pass)}'s block {words}")
    unordered = _unordered(data)
    if unordered:
        m, alone, than, full = unordered
        parts.append(f"drafting a block with no order inside it ({method_label(m)}'s backbone alone) gives τ "
                     f"{alone:.2f}, {than} {full:.2f} with its Markov head")
    return "; ".join(parts) + "."


def _drafting_share(c: Comparison, serial: str) -> str:
    """How much of a serial lane's time went to drafting, in words (the takeaway and the slide say it alike)."""
    s = c.lanes[serial].summary
    return f"{method_label(serial)} spends {s.draft_s / s.wall_s:.0%} of its time drafting, K forwards in a row"


def _unordered(data: dict):
    """(method, τ of its backbone alone, "higher than" / "lower than" / "level with", τ with its Markov head), or
    None without both variants."""
    ablation = data["parts"]["data"]
    m = ablation["method"]
    full, alone = ablation["rows"].get(f"{m}_verify_all"), ablation["rows"].get(f"{m}_no_markov")
    if not (full and alone):
        return None
    than = {"above": "higher than", "below": "lower than", "level with": "level with"}[
        above_or_below(alone["tau"], full["tau"])]
    return m, alone["tau"], than, full["tau"]


def bottlenecks_slide(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    parts = []
    growth = _drafting_growth(data, short=True)
    if growth:  # the slide's panels, in order: drafting against K, survival along a block, τ without order
        parts.append(f"Serial {growth}")
    elif serial:
        parts.append(_drafting_share(c, serial))
    if one_pass:
        alive = survival(c.lanes[one_pass].per_position_acceptance)
        if len(alive) > 1:
            parts.append(f"on one prompt {method_label(one_pass)}'s survival {trend(alive[0], alive[-1])} along its "
                         f"block, {alive[0]:.2f} → {alive[-1]:.2f} at position {len(alive)}")
    unordered = _unordered(data)
    if unordered:
        m, alone, than, full = unordered
        parts.append(f"{method_label(m)}'s τ is {alone:.2f} with no order in its block, {than} {full:.2f} with "
                     "a Markov head")
    return "; ".join(parts) + "."


def _drafting_growth(data: dict, short: bool = False) -> str:
    """"AR's drafting grows 2.6 → 17.0 ms a step from K = 1 to 16, while DFlash drafts 7 in one pass, 4.4 ms": the
    K sweep's serial lanes against its one-pass lanes ("" without the sweep)."""
    sweeps = data.get("sweeps", {}).get("data", {}).get("sweeps") if isinstance(data.get("sweeps"), dict) else None
    if not sweeps:
        return ""
    serial = []
    one_pass = {}
    for m, sweep in sweeps.items():
        ks = sorted(sweep["rows"], key=int)
        low, high = sweep["rows"][ks[0]]["draft_ms_per_step"], sweep["rows"][ks[-1]]["draft_ms_per_step"]
        serial.append(f"{method_label(m)} {low:.1f} → {high:.1f}")
        one_pass.update(sweep.get("others", {}))
        span_k = f"K = {ks[0]} to {ks[-1]}"
    others = " and ".join(method_label(m) for m in one_pass)
    if one_pass:
        lengths = sorted({row.get("drafts_per_step", row.get("draft_len")) for row in one_pass.values()})  # older files: draft_len
        costs = ", ".join(f"{row['draft_ms_per_step']:.1f}" for row in one_pass.values())
        others += f" draft {', '.join(map(str, lengths))} in one pass ({costs} ms)"
    if short:
        return f"drafting grows with K ({', '.join(serial)} ms, {span_k}), {others}" if others else (
            f"drafting grows with K ({', '.join(serial)} ms, {span_k})")
    return (f"drafting a step grows with K ({', '.join(serial)} ms from {span_k})"
            + (f", while {others}" if others else ""))


def overlap_on(comparison: Comparison) -> bool:
    """Whether the comparison ran with overlap: "on", or "auto" on a CUDA device."""
    overlap = comparison.settings.get("overlap", "auto")
    return overlap == "on" or (overlap == "auto" and "cuda" in comparison.device.lower())


BUBBLES_WORTH_HIDING = 0.05  # a lane whose bubbles are under this share of its time has little for overlap to hide


def one_prompt_words(data: dict) -> str:
    """Which prompt the timeline shows and by what rule (choice.rule_words: one rule for every one-prompt figure of the
    lesson), and where its lanes' speedups sit among the held-out prompts' at temperature 0 (the temperature sweep:
    their median and the lowest and highest one prompt gave); the rule alone without the sweep."""
    c: Comparison = data["greedy"]
    rule = (f"The timeline's prompt, as every one-prompt figure's here, is "
            f"{rule_words(str(c.settings.get('prompt', '')))}.")
    sweep = data.get("temperatures", {}).get("data") if isinstance(data.get("temperatures"), dict) else None
    rows = (sweep or {}).get("temperatures", {}).get("0.0", {}).get("lanes", {})
    serial, one_pass = _first_serial_and_one_pass(c)
    where = []
    for m in (serial, one_pass):
        spread, own = rows.get(m, {}).get("speedup_by_prompt"), c.speedup(m) if m else None
        if not spread or own is None:
            continue
        place = ("above every one; their median" if own > spread["max"] else
                 "below every one; their median" if own < spread["min"] else
                 f"{above_or_below(own, spread['median'], 0)} their median")
        where.append(f"{method_label(m)} {own:.2f}× ({place} {spread['median']:.2f}×; range "
                     f"{spread['min']:.2f}–{spread['max']:.2f}×)")
    if not where:
        return rule
    return f"{rule} Its speedups against the {sweep['num_prompts']} held-out prompts' one by one: {'; '.join(where)}."


def dflash_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    if serial is None or one_pass is None:
        return kv_words(data)
    k_one, k_serial = drafts_per_step(c, one_pass), drafts_per_step(c, serial)
    cost_one, cost_serial, bubbles, hide = _one_pass_costs(c, serial, one_pass)
    state = "on" if overlap_on(c) else "off"
    return (f"{method_label(one_pass)} drafts {k_one} tokens in one pass costing {cost_one:.2f} of a verify per "
            f"step, {more_or_less(cost_one, cost_serial)} {method_label(serial)}'s {k_serial} serial forwards "
            f"({cost_serial:.2f}). Bubbles (nothing running) are {bubbles:.0%} of {method_label(one_pass)}'s time "
            f"here, overlap {state}: {hide}. This recording does not show what overlap does: that takes the same "
            "comparison with overlap on and off (More settings), read on the timeline's gaps and “Where the time "
            "went”. On a CPU the overlap worker shares the cores with the model, so it can leave more gaps, not "
            "fewer; its gain is measured on a GPU, where the device computes while the host keeps the books. "
            + one_prompt_words(data) + " " + kv_words(data) + _by_kind(data, 7))


def drafts_per_step(c: Comparison, method: str):
    """The drafts per step `c` was asked for in `method`'s lane: its settings' control for how the method drafts
    (settings.drafts_per_step_control)."""
    return c.settings.get(drafts_per_step_control(method))


def _one_pass_costs(c: Comparison, serial: str, one_pass: str) -> tuple[float, float, float, str]:
    """The one-pass lane's and the serial lane's draft cost per step (of a verify), the one-pass lane's share of
    bubbles, and what that share leaves for overlap."""
    a, b = c.lanes[one_pass].summary, c.lanes[serial].summary
    bubbles = a.bubble_s / a.wall_s
    hide = "little for overlap to hide" if bubbles < BUBBLES_WORTH_HIDING else "time overlap is meant to hide"
    return a.draft_s / a.verify_s, b.draft_s / b.verify_s, bubbles, hide


def dflash_slide(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    if serial is None or one_pass is None:
        return kv_words(data, short=True)
    cost_one, cost_serial, _, _ = _one_pass_costs(c, serial, one_pass)  # the bubbles: the page's takeaway
    return (f"One prompt (the timeline): {method_label(one_pass)}'s one pass costs {cost_one:.2f} of a verify, "
            f"{method_label(serial)}'s {drafts_per_step(c, serial)} serial forwards {cost_serial:.2f}. "
            + kv_words(data, short=True))


def _parts_rows(data: dict):
    """The scheduled drafter as shipped, verifying everything and without its Markov head (None without all)."""
    parts = data["parts"]["data"]
    rows, m = parts["rows"], parts["method"]
    shipped, full, alone = rows.get(m), rows.get(f"{m}_verify_all"), rows.get(f"{m}_no_markov")
    return (shipped, full, alone) if shipped and full and alone else None


SCHEDULER_VERDICT = {"rises": "here the scheduler pays", "falls": "here the scheduler does not pay",
                     "holds": "here the scheduler makes no measurable difference"}


def parts_slide(data: dict) -> str:
    rows = _parts_rows(data)
    if rows is None:
        return ""
    shipped, full, alone = rows
    head = {"rises": "lifts", "falls": "lowers", "holds": "leaves"}[trend(alone["tau"], full["tau"])]
    return (f"The Markov head {head} τ {alone['tau']:.2f} → {full['tau']:.2f}. The scheduler runs at "
            f"{shipped['speedup']:.2f}× against {full['speedup']:.2f}× verifying everything: "
            f"{SCHEDULER_VERDICT[trend(full['speedup'], shipped['speedup'], speed_tolerance(data['parts']['data']))]}.")


def parts_takeaway(data: dict) -> str:
    rows = _parts_rows(data)
    if rows is None:
        return ""
    shipped, full, alone = rows
    head = {"rises": f"lifts τ from {alone['tau']:.2f} to {full['tau']:.2f}",
            "falls": f"lowers τ from {alone['tau']:.2f} to {full['tau']:.2f}",
            "holds": f"leaves τ where it was ({alone['tau']:.2f} alone, {full['tau']:.2f} with it)"}[
        trend(alone["tau"], full["tau"])]
    verdict = SCHEDULER_VERDICT[trend(full["speedup"], shipped["speedup"], speed_tolerance(data["parts"]["data"]))]
    saved = full["verify_ms_per_step"] - shipped["verify_ms_per_step"]
    verify = (f"verifying {shipped['verified_per_step']:.2f} tokens a step instead of "
              f"{full['verified_per_step']:.2f} {'saved' if saved >= 0 else 'took'} {abs(saved):.1f} ms "
              f"{'' if saved >= 0 else 'more '}of verify a step ({full['verify_ms_per_step']:.1f} ms verifying "
              "everything)")
    tau = {"rises": "raised", "falls": "lowered", "holds": "kept"}[trend(full["tau"], shipped["tau"])]
    return (f"The Markov head {head}. The scheduler runs at {shipped['speedup']:.2f}× against "
            f"{full['speedup']:.2f}× verifying everything: {verdict}. Its cut {tau} τ ({full['tau']:.2f} → "
            f"{shipped['tau']:.2f}), and {verify}." + _by_kind(data, 9))
