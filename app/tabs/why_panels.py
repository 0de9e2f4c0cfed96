"""The Why tab's measured panels: each measurement's table and charts (`*_outputs`, from its recording or a live
measurement), the panels' captions, and the panels drawn once for the same measurements (`panel_outputs`), shared by
every visitor. The tab's layout and handlers are app/tabs/why.py.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from engine.contract.methods import BASELINE, DSPARK, METHOD_REGISTRY, method_label

from .. import lesson
from ..draw.charts import (budget_figure, load_figure, lossless_figure, machine_vs_gpu_figure, parts_figure, styled,
                           sweeps_figure, temperature_acceptance_figure, temperature_tau_figure, tree_costs_figure,
                           tree_published_figure, variant_label)
from ..examples import example_choices
from ..glossary import meaning
from ..lesson.block_sweep import blocks_markdown
from ..theory import DDTREE_BUDGETS, PUBLISHED, PUBLISHED_LOAD, PUBLISHED_TREES, tree_costs
from .why_long import long_outputs


def _sentence(words: str) -> str:
    """Words opening a sentence: the first letter capital, the rest as written (str.capitalize would lower "UTC" and
    "K")."""
    return words[:1].upper() + words[1:]


HELDOUT = "heldout"  # the sweep's prompt choice: the lesson's held-out prompts


def sweep_prompt_choices() -> list[tuple[str, str]]:
    return [(f"the first {lesson.LIVE_SWEEP_PROMPTS} held-out prompts (the lesson's recording: "
             f"{lesson.SWEEP_PROMPTS})", HELDOUT), *example_choices()]


def sweeps_table(recorded: dict) -> str:
    """Each serial lane's measured speedup and τ at every K, its best K, and where the numbers come from."""
    sweeps = recorded["data"]["sweeps"]
    first = next(iter(sweeps.values()))
    ks = sorted(first["rows"], key=int)
    lines = ["| lane | " + " | ".join(f"K={k}" for k in ks) + " | best K |", "|---|" + "---|" * (len(ks) + 1)]
    for m, sweep in sweeps.items():
        rows = sweep["rows"]
        lines.append(f"| {method_label(m)} speedup | " + " | ".join(f"{rows[k]['speedup']:.2f}×" for k in ks)
                     + f" | **{sweep['best_k']}** |")
        lines.append(f"| {method_label(m)} τ | " + " | ".join(f"{rows[k]['tau']:.2f}" for k in ks) + " | |")
    costs = "; ".join(f"{method_label(m)} ({s['drafter']}): one draft forward costs {s['per_forward_cost']:.2f} of a "
                      f"verify; along the draft {lesson.along_block(s['acceptance'])} (conditional acceptance by "
                      f"position: {', '.join(f'{p:.2f}' for p in s['acceptance'])})"
                      for m, s in sweeps.items())
    return (f"{_sentence(lesson.recorded_words(recorded))}; {first['num_prompts']} prompt(s), {first['max_new_tokens']} "
            f"new tokens, temperature 0, every output equal to the baseline's.{_one_round_note(recorded)} {costs}.\n\n"
            + "\n".join(lines))


def _one_round_note(measured: dict) -> str:
    """What one run per configuration (a live measurement) lets a reader take from its speedups."""
    if lesson.speed_tolerance(measured["data"]) == lesson.ONE_ROUND_NOISE:
        return (f" Each configuration ran once, so speedups closer than about {lesson.ONE_ROUND_NOISE:.0%} read "
                "as level: the machine's noise moves them that much.")
    return ""


def sweeps_machine_figure(recorded: dict):
    """Each lane's draft cost and speedup here (serial lanes at their best K) beside the published GPU figures."""
    here = {}
    for m, sweep in recorded["data"]["sweeps"].items():
        best = str(sweep["best_k"])
        here[f"{method_label(m)} (K={best}) · {sweep['drafter']}"] = sweep["rows"][best]
        for other, row in sweep["others"].items():
            here[f"{method_label(other)} · {row['drafter']}"] = row
    return machine_vs_gpu_figure(here, PUBLISHED)


def sweep_outputs(recorded: dict, projector: bool = False) -> tuple:
    return (styled(sweeps_figure(recorded["data"]["sweeps"]), projector), sweeps_table(recorded),
            styled(sweeps_machine_figure(recorded), projector))


def check_table(recorded: dict) -> str:
    check = recorded["data"]
    rows = "\n".join(f"| {method_label(m)} | {lane['statistic']:.1f} | {lane['dof']} | {lane['p_value']:.2f} |"
                      for m, lane in check["lanes"].items())
    return (f"{_sentence(lesson.recorded_words(recorded))}: {check['samples']} seeds per lane at temperature "
            f"{check['temperature']:g}, {check['verify_rule']} rule; {lesson.resolution_words(check)}. Each run "
            "writes three tokens, the second "
            "from a speculative step that drafts it and verifies it. A p-value is the chance of counts at least "
            "this far from the target's probabilities if the lane samples exactly as the target does: only a "
            "very small one (below 0.001, say) would say it does not.\n\n"
            "| lane | χ² | degrees of freedom | p-value |\n|---|---|---|---|\n" + rows)


def check_outputs(recorded: dict, projector: bool = False) -> tuple:
    return styled(lossless_figure(recorded["data"]), projector), check_table(recorded)


def parts_table(recorded: dict) -> str:
    parts = recorded["data"]
    rows = "\n".join(
        f"| {variant_label(parts['method'], name)} | {row['speedup']:.2f}× | {row['tau']:.2f} | "
        f"{row['verified_per_step']:.1f} | {row['verify_ms_per_step']:.1f} | {row['draft_ms_per_step']:.1f} |"
        for name, row in parts["rows"].items())
    return (f"{_sentence(lesson.recorded_words(recorded))}; {parts['num_prompts']} held-out prompts, "
            f"{parts['max_new_tokens']} new tokens, temperature 0, every output equal to the baseline's."
            f"{_one_round_note(recorded)}\n\n"
            "| variant | speedup | τ | tokens verified per step | verify ms per step | draft ms per step |\n"
            "|---|---|---|---|---|---|\n" + rows)


def parts_outputs(recorded: dict, projector: bool = False) -> tuple:
    return styled(parts_figure(recorded["data"]), projector), parts_table(recorded)


def trees_table(recorded: dict) -> str:
    """Every tree lane's speedup, τ, nodes verified and verify and draft time a step at every budget, its chain's
    beside it; what a verified node and a draft forward cost; where the numbers come from, ours and published."""
    sweep = recorded["data"]
    costs = tree_costs(sweep)
    base_ms, node_ms = costs["verify"]
    lines = ["| lane | nodes | speedup | τ | verified a step | verify ms a step | draft ms a step |",
             "|---|---|---|---|---|---|---|"]
    for tree, lane in sweep["lanes"].items():
        chain = lane["chain_row"]
        lines.append(f"| {method_label(lane['chain'])} (chain, K = {lane['drafts_per_step']}) | – | "
                     f"{chain['speedup']:.2f}× | {chain['tau']:.2f} | {chain['verified_per_step']:.1f} | "
                     f"{chain['verify_ms_per_step']:.1f} | {chain['draft_ms_per_step']:.1f} |")
        for budget in sorted(lane["rows"], key=int):
            row = lane["rows"][budget]
            best = " ★" if int(budget) == int(lane["best_budget"]) else ""
            lines.append(f"| {method_label(tree)} | {budget}{best} | {row['speedup']:.2f}× | {row['tau']:.2f} | "
                         f"{row['verified_per_step']:.1f} | {row['verify_ms_per_step']:.1f} | "
                         f"{row['draft_ms_per_step']:.1f} |")
    forwards = "; ".join(f"{method_label(t)}: {c['forwards']:.1f} draft forwards a step, each {c['forward_ms']:.2f} ms "
                         f"= {c['forward_nodes']:.1f} verified nodes' worth" for t, c in costs["lanes"].items())
    published = "; ".join(f"{p.setting}: {method_label(p.chain)} {p.chain_speedup}× (τ {p.chain_tau}) → DDTree "
                          f"{p.tree_speedup}× (τ {p.tree_tau})" for p in PUBLISHED_TREES)
    return (f"{_sentence(lesson.recorded_words(recorded))}; {sweep['num_prompts']} held-out prompts, "
            f"{sweep['max_new_tokens']} new tokens, temperature 0, every output equal to the baseline's."
            f"{_one_round_note(recorded)} Verify time a step against verified nodes, one least-squares line through "
            f"every tree budget: {base_ms:.1f} ms + {node_ms:.2f} ms a node. {forwards}.\n\n" + "\n".join(lines)
            + f"\n\nPublished ({PUBLISHED_TREES[0].source}, Ringel & Romano, arXiv 2604.12989; DDTree at its best "
            f"budget of {DDTREE_BUDGETS[0]} to {DDTREE_BUDGETS[1]} nodes): {published}. On MATH-500 its τ rises "
            "with the budget while its speedup peaks at an intermediate budget, once the verify's cost dominates.")


def trees_outputs(recorded: dict, projector: bool = False) -> tuple:
    data = recorded["data"]
    return (styled(budget_figure(data), projector), styled(tree_costs_figure(data), projector),
            styled(tree_published_figure(data, PUBLISHED_TREES), projector), trees_table(recorded))


def load_table(recorded: dict) -> str:
    """Every batched lane's speedup, τ and drafts verified a request at every batch size, the target alone's and
    transformers' batched generate's tokens/s, and where the numbers come from, ours and published."""
    sweep = recorded["data"]
    lanes = [lane for lane in sweep["lanes"] if lane != BASELINE]
    names = [method_label(DSPARK) + ", verifying everything" if lane == "dspark_verify_all" else method_label(lane)
             for lane in lanes]
    sizes = sorted(sweep["rows"], key=int)
    rows = [sweep["rows"][size] for size in sizes]
    lines = ["| lane: speedup (τ, drafts verified a request) | " + " | ".join(f"B = {size}" for size in sizes) + " |",
             "|---" * (len(sizes) + 1) + "|"]
    for lane, name in zip(lanes, names):
        lines.append(f"| {name} | " + " | ".join(
            f"{row['lanes'][lane]['speedup']:.2f}× ({row['lanes'][lane]['tau']:.2f}, "
            f"{row['lanes'][lane]['verified_per_request']:.1f})" for row in rows) + " |")
    lines.append("| the target alone, tokens/s (all requests) | " + " | ".join(
        f"{row['lanes'][BASELINE]['tokens_per_s']:.0f}" for row in rows) + " |")
    if all("hf_generate" in row for row in rows):  # a live measurement leaves it out
        lines.append("| transformers' batched generate, tokens/s | " + " | ".join(
            f"{row['hf_generate']['tokens_per_s']:.0f}" for row in rows) + " |")
    published = "; ".join(f"{p.setting} ({p.source}): " + ", ".join(f"{x}× at {c}" for c, x in p.speedups)
                          for p in PUBLISHED_LOAD)
    identical = ("every request's output equal to its own single-request greedy run" if sweep["identical_outputs"]
                 else "**some request's output differs from its single-request greedy run**")
    batching = ("at most B at once, the next joining as one finishes; each speedup over the target alone while all B "
                "places were taken" if sweep.get("batching") == "continuous"
                else "cut into batches of B decoded one after another")  # how measurements before the refill ran
    paired = sweep.get("scheduler_vs_all")
    pairs = (f"\n\nDSpark's scheduler against DSpark verifying everything at B = {paired['size']}, in "
             f"{paired['pairs']} pairs of runs one after the other: {paired['mean']:.2f} times its speed (95 % "
             f"interval {paired['low']:.2f}–{paired['high']:.2f}; the pairs "
             + ", ".join(f"{r:.2f}" for r in paired["ratios"]) + ")." if paired else "")
    return (f"{_sentence(lesson.recorded_words(recorded))}; the same {sweep['requests']} held-out prompts at every "
            f"batch size, {batching}, {sweep['max_new_tokens']} new tokens each, temperature 0, "
            f"{identical}.{_one_round_note(recorded)}\n\n" + "\n".join(lines) + pairs
            + f"\n\nPublished, on GPUs: {published}.")


def load_outputs(recorded: dict, projector: bool = False) -> tuple:
    return styled(load_figure(recorded["data"], PUBLISHED_LOAD), projector), load_table(recorded)


def temperature_table(recorded: dict) -> str:
    """Two tables, a row per temperature with the target's entropy: every lane's τ, then its expected acceptance
    beside its 1 − TV, each with its 95 % interval over the prompts."""
    sweep = recorded["data"]
    temperatures = sorted(sweep["temperatures"], key=float)
    lanes = [m for m in sweep["temperatures"][temperatures[0]]["lanes"] if m in METHOD_REGISTRY]

    def interval(cell: dict, percent: bool = False) -> str:
        f = (lambda x: f"{x:.0%}") if percent else (lambda x: f"{x:.2f}")
        return f"{f(cell['mean'])} ({f(cell['low'])}–{f(cell['high'])})"

    def table(cell) -> list[str]:
        rows = ["| T | H (nats) | " + " | ".join(method_label(m) for m in lanes) + " |",
                "|---|---|" + "---|" * len(lanes)]
        for t in temperatures:
            at = sweep["temperatures"][t]
            rows.append(f"| {float(t):g} | {at['target_entropy']['mean']:.2f} | "
                        + " | ".join(cell(float(t), at["lanes"][m]) for m in lanes) + " |")
        return rows

    taus = table(lambda t, row: interval(row["tau"]))
    overlap = table(lambda t, row: (f"{interval(row['expected_acceptance'], True)} / {row['one_minus_tv']['mean']:.0%}"
                                    if t > 0 else f"{row['verdict_rate']['mean']:.0%} (greedy)"))
    judged = min(sweep["temperatures"][temperatures[-1]]["lanes"][m]["judged"] for m in lanes)
    return (f"{_sentence(lesson.recorded_words(recorded))}; {sweep['num_prompts']} held-out prompt(s), "
            f"{sweep['max_new_tokens']} new tokens, the {sweep['verify_rule']} rule, each lane against the baseline at "
            f"the same temperature; at least {judged:,} judged drafts per lane at T = {float(temperatures[-1]):g}; "
            f"95 % intervals over the prompts; H: the target's mean entropy per token.\n\n**τ**\n\n"
            + "\n".join(taus) + "\n\n**Expected acceptance / 1 − TV** (at T = 0 the rule is greedy: the share "
            "accepted)\n\n" + "\n".join(overlap))


def temperature_outputs(recorded: dict, projector: bool = False) -> tuple:
    data = recorded["data"]
    return (styled(temperature_tau_figure(data), projector), styled(temperature_acceptance_figure(data), projector),
            temperature_table(recorded))


SWEEP_CAPTION = ("**Measure it here: the best K.** The K sweep runs every serial lane at K = "
                 f"{', '.join(map(str, lesson.LIVE_SWEEP_KS))} here, once each on {lesson.LIVE_SWEEP_PROMPTS} prompts "
                 f"(the lesson's recording: K = {', '.join(map(str, lesson.SWEEP_KS))}, the faster of two runs on "
                 f"{lesson.SWEEP_PROMPTS} prompts), and the block drafters once, at their default block; every "
                 "output checked against the baseline's, and draws each lane's measured speedup (solid, its best K "
                 "starred) beside the formula fed with that lane's own measured acceptance and cost (dotted). One "
                 "prompt can move the optimum: on a repetitive text (the example prompts) acceptance can stay high at "
                 "every position, so longer drafts keep paying; where survival (every draft up to k passing) falls "
                 "faster along the draft, the optimum settles where one more draft forward costs more than the next "
                 "position's survival adds. The table says, from the sweep's own numbers, which way each lane's "
                 "conditional acceptance and survival go.")
MACHINE_CAPTION = ("**This machine against a datacenter GPU.** Left: drafting cost over verify cost; right: speedup. "
                   "Orange-red bars are measured by the sweep on this machine; blue bars are published H200/B200 "
                   "figures (sources on hover and below), their cost implied by their τ and speedup through the "
                   "formula. Compare the bars, not a rule of thumb: what decides the best K is how a draft "
                   "forward's cost stands to a verify's here, and how fast survival falls along the block. "
                   f"{meaning('published')} The other words in the names (anchor, Markov head) are explained on "
                   "the About tab.")
CHECK_CAPTION = ("**Lossless above temperature 0, counted.** At temperature > 0 every lane writes a different text "
                 "from the baseline, since each run draws its own sample; what speculative decoding keeps is the "
                 f"odds. The check runs each lane over many seeds ({lesson.LIVE_LOSSLESS_SAMPLES} per drafting lane when measured "
                 f"here, {lesson.LOSSLESS_SAMPLES} per lane in the recording) and counts its first two tokens: x1 from the "
                 "target's prefill, x2 from a speculative step that drafts one token and accepts it with probability "
                 "min(1, p_target / p_draft), else draws from what is left. The counts are set beside the target's "
                 "own exact probabilities p(x1) · p(x2 | x1), with a chi-square test.")
TEMPERATURE_CAPTION = ("**Temperature: acceptance is the overlap of two distributions.** Every lane at temperatures "
                       f"{', '.join(f'{t:g}' for t in lesson.TEMPERATURES)} over the held-out prompts, each against "
                       "the baseline at the same temperature (measured live: T = "
                       f"{', '.join(f'{t:g}' for t in lesson.LIVE_TEMPERATURES)} over "
                       f"{lesson.LIVE_TEMPERATURE_PROMPTS} prompts, {lesson.LIVE_TEMPERATURE_TOKENS} new tokens, with "
                       "intervals as wide as so few prompts allow). A draft x drawn from the drafter's q passes with "
                       "probability min(1, p(x)/q(x)), whose mean is the overlap 1 − TV(p, q): above 0 what matters "
                       "is the drafters' whole distribution, not only its likeliest token. Under each temperature, "
                       "the target's mean entropy per token: how unsure of itself it is.")
PARTS_CAPTION = ("**What each part of the scheduled drafter buys.** The same checkpoint run as shipped, verifying "
                 "the whole block (its scheduler off), with the static cut, and without its Markov head (the "
                 "parallel backbone drafting every position alone), against the baseline on the same held-out "
                 f"prompts (measured live: {lesson.LIVE_PARTS_PROMPTS} prompts, {lesson.LIVE_PARTS_TOKENS} new tokens, "
                 f"each once; the recording: {lesson.PARTS_PROMPTS} prompts, {lesson.NEW_TOKENS} new tokens, the "
                 "faster of two runs).")
TREES_CAPTION = ("**Draft trees: many candidates, one verify.** Each tree lane at node budgets "
                 f"{', '.join(map(str, lesson.TREE_BUDGETS))} beside the chain it grows from, against the baseline on "
                 f"the same {lesson.TREE_PROMPTS} held-out prompts (the faster of {lesson.TREE_ROUNDS} runs; measured "
                 f"live: {', '.join(map(str, lesson.LIVE_TREE_BUDGETS))} nodes on {lesson.LIVE_TREE_PROMPTS} prompts, "
                 f"{lesson.LIVE_TREE_TOKENS} new tokens, each once). The DFlash tree takes the likeliest prefixes of "
                 "one parallel pass (DDTree, arXiv 2604.12989): one draft forward whatever the budget. The AR tree "
                 "grows one level per draft forward (EAGLE-2's dynamic tree, arXiv 2406.16858). The target verifies "
                 "each tree in one forward. Look at τ and speedup against the budget, each chain a dashed line; then "
                 "at what the verify pays for each node it checks, and at what one draft forward costs in verified "
                 "nodes: where a bigger tree stops paying on this machine.")
LOAD_CAPTION = ("**Under load: many requests at once.** Every lane decodes the same "
                f"{lesson.LOAD_REQUESTS} held-out prompts, B = {', '.join(map(str, lesson.LOAD_SIZES))} at once, "
                f"each finished one replaced by the next as a server does (the faster of {lesson.LOAD_ROUNDS} runs; "
                "measured live: B = "
                f"{', '.join(map(str, lesson.LIVE_LOAD_SIZES))} over {lesson.LIVE_LOAD_REQUESTS} prompts, "
                f"{lesson.LIVE_LOAD_TOKENS} new tokens, once). One target forward verifies every request of a batch, "
                "each row its anchor and drafts; the speedup is over the target alone decoding the same requests. "
                "DSpark's scheduler picks how much of every block to verify from the batch's measured verify cost, "
                "and drafts only while a step that drafts commits more tokens a second than the target alone at "
                "that batch size; beside it, DSpark verifying everything. Look at the speedup against B and at τ "
                "beside it.")
NOT_RECORDED = "Not recorded here: press the button to measure it on this machine."


class DrawnPanels:
    """The measured panels drawn lately, by the measurements they were drawn from (the very objects) and the
    layout: every visitor opening a lesson link is shown the same recordings, and drawing them (ten plotly
    figures) was most of what such a visit cost the server. Bounded; the drawn figures are shared, so no caller
    changes them (Gradio only reads them)."""

    def __init__(self, capacity: int = 8):
        self.capacity = capacity
        self.drawn: OrderedDict = OrderedDict()  # key -> (the measurements, kept so their ids stay theirs; outputs)
        self.lock = threading.Lock()

    def get(self, recordings: dict, projector: bool, draw) -> tuple:
        key = (projector, tuple(sorted((name, id(item)) for name, item in recordings.items())))
        with self.lock:
            entry = self.drawn.get(key)
        if entry is not None:
            return entry[1]
        outputs = draw(recordings, projector)
        with self.lock:
            self.drawn[key] = (tuple(recordings.values()), outputs)
            while len(self.drawn) > self.capacity:
                self.drawn.popitem(last=False)
        return outputs


DRAWN_PANELS = DrawnPanels()


def panel_outputs(recordings: dict, projector: bool = False) -> tuple:
    """The measured panels for the recordings that exist ({"sweeps": ..., "lossless": ..., "parts": ...,
    "temperatures": ...}); projector: their charts laid out for a room. Drawn once for the same measurements
    (DrawnPanels)."""
    return DRAWN_PANELS.get(recordings, projector, draw_panels)


def draw_panels(recordings: dict, projector: bool = False) -> tuple:
    sweep = (sweep_outputs(recordings["sweeps"], projector) if "sweeps" in recordings
             else (None, NOT_RECORDED, None))
    if "blocks" in recordings:  # the one-pass lanes by block under the serial lanes' K sweep (recorded only)
        blocks = blocks_markdown(recordings["blocks"], recordings.get("sweeps"),
                                 lesson.recorded_words(recordings["blocks"]))
        sweep = (sweep[0], f"{sweep[1]}\n\n{blocks}" if blocks else sweep[1], sweep[2])
    check = check_outputs(recordings["lossless"], projector) if "lossless" in recordings else (None, NOT_RECORDED)
    parts = parts_outputs(recordings["parts"], projector) if "parts" in recordings else (None, NOT_RECORDED)
    temperatures = (temperature_outputs(recordings["temperatures"], projector) if "temperatures" in recordings
                    else (None, None, NOT_RECORDED))
    trees = (trees_outputs(recordings["trees"], projector) if "trees" in recordings
             else (None, None, None, NOT_RECORDED))
    load = load_outputs(recordings["load"], projector) if "load" in recordings else (None, NOT_RECORDED)
    return *sweep, *check, *parts, *temperatures, *trees, *load, *long_outputs(recordings.get("long"), projector)
