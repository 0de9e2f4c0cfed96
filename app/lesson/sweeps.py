"""The lesson's words on the sweeps over a setting: points 4 (temperature), 8 (trees by node budget) and 10 (requests
at once), each a takeaway for the page and a shorter one for its slide. Torch-free and Gradio-free."""

from __future__ import annotations

from engine.contract.methods import BASELINE, CLASSIC, DFLASH, DSPARK, EAGLE3, METHOD_REGISTRY, method_label

from ..theory import PUBLISHED_LOAD, PUBLISHED_TREES, tree_costs
from ..words import above_or_below, interval_trend, interval_versus, more_or_less, trend, versus
from .speed import speed_tolerance

# --- temperature: what the sweep over temperatures shows ----------------------------------------------------

# DSpark's Table 1 (Qwen3-4B target, T = 1, block 7, GSM8K): τ of EAGLE-3, DFlash, DSpark.
PUBLISHED_T1_TAU = {EAGLE3: 5.14, DFLASH: 5.40, DSPARK: 6.11}


def order_words(values: dict[str, float]) -> str:
    """"DSpark 3.1 > DFlash 2.9 > AR 2.5": lanes from the highest value down."""
    ranked = sorted(values, key=values.get, reverse=True)
    return " > ".join(f"{method_label(m)} {values[m]:.2f}" for m in ranked)


# τ from the lowest temperature to the highest, by its 95 % intervals: "holds" only says they overlap, which a small
# sample (a live measurement's few prompts) does whatever τ does.
TAU_MOVES = {"rises": "rises", "falls": "falls", "holds": "does not move beyond its 95 % intervals"}


def _temperature_ends(data: dict) -> tuple[dict, dict, list[str], float, float]:
    """The temperature sweep at its lowest and highest temperatures, its lanes (the registry's methods), and those
    two temperatures."""
    sweep = data["temperatures"]["data"]
    temperatures = sorted(sweep["temperatures"], key=float)
    low, high = sweep["temperatures"][temperatures[0]], sweep["temperatures"][temperatures[-1]]
    lanes = [m for m in low["lanes"] if m in METHOD_REGISTRY]
    return low, high, lanes, float(temperatures[0]), float(temperatures[-1])


def _speedup_words(low: dict, high: dict, lanes: list[str]) -> str:
    """"AR 1.98 → 1.48×, DFlash 2.11 → 1.51×": each lane's speedup over the target alone at the same temperature, at
    the sweep's two ends ("" where a recording has none)."""
    return ", ".join(f"{method_label(m)} {low['lanes'][m]['speedup']:.2f} → {high['lanes'][m]['speedup']:.2f}×"
                     for m in lanes if "speedup" in low["lanes"][m] and "speedup" in high["lanes"][m])


def _tau_moves(data: dict) -> dict[str, list[str]]:
    """How each lane's τ moves from the sweep's lowest temperature to its highest (TAU_MOVES), lanes by move."""
    low, high, lanes, _, _ = _temperature_ends(data)
    moves: dict[str, list[str]] = {}
    for m in lanes:
        moves.setdefault(TAU_MOVES[interval_trend(low["lanes"][m]["tau"], high["lanes"][m]["tau"])], []).append(
            method_label(m))
    return moves


def _too_few_words(data: dict, short: bool = False) -> str:
    """On a live sweep whose τ does not move beyond its intervals where the recording's does: why the live run
    cannot show it (its few prompts: intervals so many times the recording's), and what the recording shows; ""
    otherwise. short: the slide's words."""
    from . import recorded  # the package reads the recordings; this module only words them

    item, record = data["temperatures"], recorded().get("temperatures")
    if not item.get("live") or record is None or item is record:
        return ""
    live, shown = _tau_moves(data), _tau_moves({"temperatures": record})
    held = TAU_MOVES["holds"]
    hidden = set(live.get(held, ())) - set(shown.get(held, ()))  # lanes whose τ moved over the recording's prompts only
    if not hidden or item["data"]["num_prompts"] >= record["data"]["num_prompts"]:
        return ""
    moved = "; ".join(f"{how} for {', '.join(names)}" for how, names in shown.items() if how != held)
    wide = _interval_widths(data) / _interval_widths({"temperatures": record})
    if short:
        return (f"cannot be seen to move on {_count_prompts(item)} (intervals {wide:.0f}× the recording's; over its "
                f"{record['data']['num_prompts']}, τ {moved})")
    return (f" This live run's {_count_prompts(item)} are too few to show τ move beyond its intervals, which are "
            f"{wide:.0f}× as wide as the recording's: over the recording's {_count_prompts(record)}, τ {moved}.")


def _interval_widths(data: dict) -> float:
    """The mean width of τ's 95 % intervals over the lanes at the sweep's highest temperature."""
    _, high, lanes, _, _ = _temperature_ends(data)
    return sum(high["lanes"][m]["tau"]["high"] - high["lanes"][m]["tau"]["low"] for m in lanes) / len(lanes)


def _count_prompts(item: dict) -> str:
    n = item["data"]["num_prompts"]
    return f"{n} prompt{'' if n == 1 else 's'}"


def temperature_takeaway(data: dict) -> str:
    low, high, lanes, t0, t1 = _temperature_ends(data)
    entropy = (f"From T = {t0:g} to {t1:g} the target's mean entropy per token goes "
               f"{low['target_entropy']['mean']:.2f} → {high['target_entropy']['mean']:.2f} nats")
    taus = "; ".join(f"{method_label(m)}'s τ {TAU_MOVES[interval_trend(low['lanes'][m]['tau'], high['lanes'][m]['tau'])]} "
                     f"({low['lanes'][m]['tau']['mean']:.2f} → {high['lanes'][m]['tau']['mean']:.2f})" for m in lanes)
    overlap = "; ".join(
        f"{method_label(m)} {high['lanes'][m]['expected_acceptance']['mean']:.0%} expected against 1 − TV "
        f"{high['lanes'][m]['one_minus_tv']['mean']:.0%} over {high['lanes'][m]['judged']:,} judged drafts"
        for m in lanes)
    published = {m: v for m, v in PUBLISHED_T1_TAU.items() if m in lanes}
    ours = {m: high["lanes"][m]["tau"]["mean"] for m in published}
    paper = (f" At T = {t1:g} the order of τ here is {order_words(ours)}; DSpark's paper (Qwen3-4B on GSM8K, T = 1) "
             f"has {order_words(published)}, with a target far surer of itself than this tiny one."
             if published and t1 == 1.0 else "")
    speed = _speedup_words(low, high, lanes)
    speed = f" Speedup over the target alone at the same temperature, T = {t0:g} → {t1:g}: {speed}." if speed else ""
    return (f"{entropy}. {taus}.{speed} At T = {t1:g}: {overlap}; expected acceptance {_apart_words(high, lanes)}."
            f"{paper}{_too_few_words(data)}")


def temperature_slide(data: dict) -> str:
    low, high, lanes, t0, t1 = _temperature_ends(data)
    taus = ", ".join(f"{how} for {', '.join(names)}" for how, names in _tau_moves(data).items())
    too_few = _too_few_words(data, short=True)  # a live run too small to show τ move: says so in τ's place
    speed = _speedup_words(low, high, lanes)
    if speed and data["temperatures"].get("live"):  # a few prompts run once: how far one prompt alone went
        spread = [row["speedup_by_prompt"] for end in (low, high) for m in lanes
                  if isinstance(row := end["lanes"][m], dict) and row.get("speedup_by_prompt")]
        n = data["temperatures"]["data"]["num_prompts"]
        if spread:
            speed += (f" (each of {n} prompts run once; one prompt alone gave "
                      f"{min(s['min'] for s in spread):.2f}–{max(s['max'] for s in spread):.2f}×)")
    expected = [100 * high["lanes"][m]["expected_acceptance"]["mean"] for m in lanes]
    return (f"From T = {t0:g} to {t1:g}, τ {too_few or taus}" + (f", and the speedup goes {speed}" if speed else "")
            + f". Expected acceptance at T = {t1:g} is {round(min(expected))}–{round(max(expected))}%, "
            f"{_apart_words(high, lanes)}.")


def _apart_words(high: dict, lanes: list[str]) -> str:
    """"within 2 points of each lane's 1 − TV": the largest gap, in whole percentage points, between a lane's expected
    acceptance and its 1 − TV at the sweep's highest temperature (the slide and the full takeaway say the same)."""
    apart = max(abs(round(100 * high["lanes"][m]["expected_acceptance"]["mean"])
                    - round(100 * high["lanes"][m]["one_minus_tv"]["mean"])) for m in lanes)
    return f"within {apart} point{'' if apart == 1 else 's'} of each lane's 1 − TV"


# --- trees: what the budget sweep shows ----------------------------------------------------------------------

def _tree_rows(data: dict) -> tuple[dict, dict]:
    """The budget sweep and, per tree lane: its chain, its smallest, best and largest budgets with their rows, the
    chain's row, and what one of its draft forwards costs (theory.tree_costs), with the verify line's ms a node."""
    sweep = data["trees"]["data"]
    costs = tree_costs(sweep)
    rows = {}
    for tree, lane in sweep["lanes"].items():
        budgets = sorted(lane["rows"], key=int)
        best = str(lane["best_budget"])
        rows[tree] = {"chain": lane["chain"], "chain_row": lane["chain_row"], "best": int(best),
                      "at_best": lane["rows"][best], "low": int(budgets[0]), "at_low": lane["rows"][budgets[0]],
                      "high": int(budgets[-1]), "at_high": lane["rows"][budgets[-1]], **costs["lanes"][tree]}
    return sweep, {"rows": rows, "node_ms": costs["verify"][1]}


TAU_BY_BUDGET = {"rises": "rises", "falls": "falls", "holds": "holds"}


def _peak_words(r: dict, tolerance: float) -> str:
    """Where a tree lane's speedup is highest along the budgets, and what it does past there, in words."""
    best = f"{r['at_best']['speedup']:.2f}× at {r['best']} nodes"
    if r["best"] == r["high"]:
        return f"is highest at the largest budget measured, {best}"
    after = trend(r["at_best"]["speedup"], r["at_high"]["speedup"], tolerance)
    if after == "falls":
        return f"peaks at {best}, then falls to {r['at_high']['speedup']:.2f}× at {r['high']}"
    return f"is highest at {best}, and within the noise of it at {r['high']} ({r['at_high']['speedup']:.2f}×)"


def _tree_winner(rows: dict, tolerance: float) -> tuple[str, str | None, str]:
    """The tree lane with the highest speedup at its best budget, the runner-up (None with one lane), and how the
    two stand ("ahead of" or "level with")."""
    ranked = sorted(rows, key=lambda t: rows[t]["at_best"]["speedup"], reverse=True)
    if len(ranked) < 2:
        return ranked[0], None, "ahead of"
    first, second = rows[ranked[0]]["at_best"]["speedup"], rows[ranked[1]]["at_best"]["speedup"]
    return ranked[0], ranked[1], "level with" if versus(first, second, tolerance) == "level with" else "ahead of"


def _why_it_wins(w: dict, l: dict, node_ms: float) -> str:
    """Why the winning tree lane beats the other, from their drafting a step (in ms and in verified nodes' worth)
    and τ at their best budgets."""
    draft_w, draft_l = w["at_best"]["draft_ms_per_step"], l["at_best"]["draft_ms_per_step"]
    tau_w, tau_l = w["at_best"]["tau"], l["at_best"]["tau"]
    drafts = f"{draft_w:.1f} ms of drafting a step against {draft_l:.1f} ms"
    if node_ms > 0:
        drafts += f", {draft_w / node_ms:.0f} verified nodes' worth against {draft_l / node_ms:.0f}"
    taus = f"τ {tau_w:.2f} against {tau_l:.2f}"
    cheaper, higher = more_or_less(draft_w, draft_l), above_or_below(tau_w, tau_l)
    if cheaper == "less than":
        return (f"it drafts for less ({drafts}) and commits {'more' if higher == 'above' else 'about as many'} "
                f"tokens a step ({taus})" if higher != "below" else
                f"its cheaper drafting ({drafts}) outweighs the other's higher τ ({taus})")
    if higher == "above":
        costlier = "its costlier" if cheaper == "more than" else "its"
        return f"its higher τ ({taus}) pays for {costlier} drafting ({drafts})"
    return (f"its verify costs less a step ({w['at_best']['verify_ms_per_step']:.1f} ms against "
            f"{l['at_best']['verify_ms_per_step']:.1f} ms; {drafts}, {taus})")


def _forward_words(tree: str, r: dict) -> str:
    return (f"{method_label(tree)}'s draft forward costs {r['forward_ms']:.2f} ms, {r['forward_nodes']:.1f} verified "
            f"nodes' worth, {r['forwards']:.1f} of them a step")


def _published_tree_words(rows: dict) -> str:
    """DDTree's published figures, and whether the shape it reports (τ rising with the budget, speedup peaking at an
    intermediate budget) is the shape here."""
    p = PUBLISHED_TREES[0]
    same = [t for t, r in rows.items() if trend(r["at_low"]["tau"], r["at_high"]["tau"]) == "rises"
            and r["low"] < r["best"] < r["high"]]
    who = ("both trees show" if len(same) == len(rows) > 1 else
           f"{' and '.join(method_label(t) for t in same)} {'shows' if len(same) == 1 else 'show'}")
    here = f"; here {who} the same shape" if same else "; no tree here shows that shape"
    return (f" DDTree's paper reports, on a GPU, τ rising with the budget while speedup peaks at an intermediate "
            f"budget{here}. On {p.setting}, it reports DFlash at {p.chain_speedup:.2f}× (τ {p.chain_tau:.2f}) and "
            f"DDTree at {p.tree_speedup:.2f}× (τ {p.tree_tau:.2f}), at its best budget.")


def _against_chain(r: dict, tolerance: float) -> str:
    """Where a tree lane's best budget stands against its chain, in words: from the two lanes' times prompt by prompt
    where the recording has them (ahead or behind only when the 95 % interval of the time ratio excludes 1), else
    from the two speedups and the measurement's tolerance."""
    from engine.measure.sweep import ratio_interval

    chain = r["chain_row"]
    tree_walls, chain_walls = r["at_best"].get("wall_by_prompt"), chain.get("wall_by_prompt")
    if not tree_walls or not chain_walls or len(tree_walls) != len(chain_walls) or len(tree_walls) < 2:
        return f"{versus(r['at_best']['speedup'], chain['speedup'], tolerance)} the chain's {chain['speedup']:.2f}×"
    ratio, low, high = ratio_interval(chain_walls, tree_walls)  # the tree's speed over the chain's, per prompt
    words = "ahead of" if low > 1 else "behind" if high < 1 else "level with"
    return (f"{words} the chain's {chain['speedup']:.2f}× (prompt by prompt, {ratio:.2f} times the chain's speed, "
            f"95 % interval {low:.2f}–{high:.2f} over {len(tree_walls)} prompts)")


def trees_takeaway(data: dict) -> str:
    sweep, measured = _tree_rows(data)
    rows, tolerance = measured["rows"], speed_tolerance(sweep)
    parts = []
    for tree, r in rows.items():
        chain = r["chain_row"]
        parts.append(f"{method_label(tree)}'s τ {trend(r['at_low']['tau'], r['at_high']['tau'])} from "
                     f"{r['at_low']['tau']:.2f} at {r['low']} nodes to {r['at_high']['tau']:.2f} at {r['high']} "
                     f"({method_label(r['chain'])}'s chain: {chain['tau']:.2f}); its speedup "
                     f"{_peak_words(r, tolerance)}, {_against_chain(r, tolerance)}")
    text = "; ".join(parts) + "."
    winner, other, stands = _tree_winner(rows, tolerance)
    forwards = "; ".join(_forward_words(t, r) for t, r in rows.items())
    if other is not None:
        w, l = rows[winner], rows[other]
        if stands == "level with":
            text += (f" The two trees run level at their best budgets ({method_label(winner)} "
                     f"{w['at_best']['speedup']:.2f}×, "
                     f"{method_label(other)} {l['at_best']['speedup']:.2f}×).")
        else:
            text += (f" {method_label(winner)} wins here ({w['at_best']['speedup']:.2f}× against "
                     f"{l['at_best']['speedup']:.2f}×): {_why_it_wins(w, l, measured['node_ms'])}.")
    text += (f" A verified node costs {measured['node_ms']:.2f} ms of verify here (the line through every budget); "
             f"{forwards}.")
    return text + _published_tree_words(rows)


def trees_slide(data: dict) -> str:
    sweep, measured = _tree_rows(data)
    rows, tolerance = measured["rows"], speed_tolerance(sweep)
    winner, other, stands = _tree_winner(rows, tolerance)
    w = rows[winner]
    at_best = f"{w['at_best']['speedup']:.2f}× at {w['best']} nodes"
    head = (f"{method_label(winner)} wins: {at_best}" if stands != "level with"
            else f"The trees run level: {method_label(winner)} {at_best}")
    if other is not None:
        head += f", {method_label(other)} {rows[other]['at_best']['speedup']:.2f}× at {rows[other]['best']}"
    chains = ", ".join(f"{method_label(r['chain'])} {r['chain_row']['speedup']:.2f}×" for r in rows.values())
    forwards = ", ".join(f"{method_label(t)} {r['forward_nodes']:.1f} ({r['forwards']:.1f} a step)"
                         for t, r in rows.items())
    return f"{head} (chains: {chains}). One draft forward in verified nodes' worth: {forwards}."


# --- load: what the concurrency sweep shows ---------------------------------------------------------------

# in this order, those the measurement has: each drafts every step (DSpark's scheduler, which may not, is worded apart)
LOAD_LANES_WORDED = (DFLASH, "dspark_verify_all", EAGLE3, CLASSIC)
LOAD_SPEEDUP_WORDS = {"dspark_verify_all": "DSpark's speedup verifying everything"}
LOAD_LANE_NAMES = {"dspark_verify_all": "DSpark verifying everything"}


def _load_rows(data: dict) -> tuple[dict, int, int, dict, dict]:
    """The sweep, its smallest and largest batch sizes and their rows."""
    sweep = data["load"]["data"]
    sizes = sorted(map(int, sweep["rows"]))
    return sweep, sizes[0], sizes[-1], sweep["rows"][str(sizes[0])]["lanes"], sweep["rows"][str(sizes[-1])]["lanes"]


def _rate(lane: dict) -> float:
    """A load lane's tokens per second while all B places were taken (what its speedup compares), or over the whole
    run for a measurement made before the steady state was recorded."""
    return lane.get("steady_tokens_per_s") or lane["tokens_per_s"]


def _moves(first: float, last: float, tolerance: float, unit: str = "×") -> str:
    """"falls from 2.18× to 0.62×", "rises from …", or "holds at 1.02×"."""
    direction = trend(first, last, tolerance)
    if direction == "holds":
        return f"holds at {last:.2f}{unit}"
    return f"{direction} from {first:.2f}{unit} to {last:.2f}{unit}"


def _slower_from(sweep: dict, lane: str, tolerance: float) -> int | None:
    """The smallest batch size at which `lane` is slower than the target alone (by more than `tolerance`), and stays
    so at every larger one."""
    sizes = sorted(map(int, sweep["rows"]))
    slower = [b for b in sizes if sweep["rows"][str(b)]["lanes"][lane]["speedup"] < 1 - tolerance]
    return slower[0] if slower and slower == sizes[sizes.index(slower[0]):] else None


def load_takeaway(data: dict) -> str:
    sweep, b0, b1, low, high = _load_rows(data)
    tolerance = speed_tolerance(sweep)
    lanes = [lane for lane in LOAD_LANES_WORDED if lane in low]
    parts = []
    for lane in lanes:
        change = (high[lane]["tau"] - low[lane]["tau"]) / low[lane]["tau"]
        if abs(change) < 0.005:  # each request accepts what it accepts alone, whatever the batch
            tau = f"τ unchanged at {high[lane]['tau']:.2f}"
        elif abs(change) <= 0.10:
            tau = f"τ within {abs(change) * 100:.0f} % ({low[lane]['tau']:.2f} → {high[lane]['tau']:.2f})"
        else:
            tau = f"τ {_moves(low[lane]['tau'], high[lane]['tau'], 0.10, '')}"
        slower = _slower_from(sweep, lane, tolerance)
        speedup = LOAD_SPEEDUP_WORDS.get(lane, f"{method_label(lane)}'s speedup")
        parts.append(f"{speedup} {_moves(low[lane]['speedup'], high[lane]['speedup'], tolerance)}, "
                     f"{tau}" + (f", slower than the target alone from B = {slower}" if slower else ""))
    base_low, base_high = _rate(low[BASELINE]), _rate(high[BASELINE])
    text = (f"From {b0} request{'s' if b0 > 1 else ''} at once to {b1}: " + "; ".join(parts) + ". "
            f"The target alone writes {base_low:.0f} tokens/s at B = {b0} and {base_high:.0f} at B = {b1}: a batch "
            f"{'shares' if base_high > base_low else 'does not share'} each forward among its requests, and a verify "
            f"of B × (1 + ℓ) tokens costs the whole batch for every drafted token it reads.")
    if DSPARK in high and "dspark_verify_all" in high:
        ours, everything = high[DSPARK], high["dspark_verify_all"]
        text += (f" At B = {b1} DSpark's scheduler verifies {ours['verified_per_request']:.1f} drafts a request a step "
                 f"against {everything['verified_per_request']:.1f} verifying everything (τ {ours['tau']:.2f} against "
                 f"{everything['tau']:.2f}), and runs {_scheduler_stands(sweep, ours, everything, tolerance)}")
        alone, all_alone = low[DSPARK], low["dspark_verify_all"]
        text += (f"; at B = {b0}, {versus(_rate(alone), _rate(all_alone), tolerance)} it "
                 f"({alone['speedup']:.2f}× against {all_alone['speedup']:.2f}×).")
    published = "; ".join(f"{p.setting}: {' → '.join(f'{x:.2f}× at {c}' for c, x in p.speedups)}"
                          for p in PUBLISHED_LOAD if len(p.speedups) > 1)
    return text + f" Published on GPUs ({published}): speedup falls with concurrency there too."


def _scheduler_stands(sweep: dict, ours: dict, everything: dict, tolerance: float) -> str:
    """Where DSpark's scheduler stands against verifying everything at the largest batch: from the paired runs and
    their interval where recorded (engine/measure/concurrency.py, scheduler_versus_all), else from the sweep's two
    figures."""
    paired = sweep.get("scheduler_vs_all")
    if paired:
        return (f"{interval_versus(paired)} it ({paired['mean']:.2f} times its speed, 95 % interval "
                f"{paired['low']:.2f}–{paired['high']:.2f} over {paired['pairs']} pairs of runs side by side)")
    ratio = _rate(ours) / _rate(everything)
    return f"{versus(_rate(ours), _rate(everything), tolerance)} it ({ratio:.2f} times its speed)"


def load_slide(data: dict) -> str:
    sweep, b0, b1, low, high = _load_rows(data)
    lanes = [lane for lane in (DFLASH, "dspark_verify_all") if lane in low]  # those that draft every step
    head = "; ".join(f"{LOAD_LANE_NAMES.get(lane, method_label(lane))} {low[lane]['speedup']:.2f}× → "
                     f"{high[lane]['speedup']:.2f}× (τ {low[lane]['tau']:.2f} → {high[lane]['tau']:.2f})"
                     for lane in lanes)
    text = f"B = {b0} → {b1}: {head}."
    if DSPARK in high and "dspark_verify_all" in high:
        paired = sweep.get("scheduler_vs_all")
        ratio = (f"{paired['mean']:.2f} ({paired['low']:.2f}–{paired['high']:.2f})" if paired else
                 f"{_rate(high[DSPARK]) / _rate(high['dspark_verify_all']):.2f}")
        text += (f" At B = {b1} the scheduler verifies {high[DSPARK]['verified_per_request']:.1f} a request: "
                 f"{ratio} times verifying everything's speed.")
    return text
