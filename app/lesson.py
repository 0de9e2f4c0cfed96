"""The lesson: the argument for parallel drafting in seven points, each shown with measured data.

Each point says what it claims in a few sentences, names the tab and the measurement that shows it, what to
look at there, and a takeaway computed from that measurement. The measurements are recorded on the embedded
models by `scripts/record_lessons.py` into assets/lessons/ (so a class sees the same numbers every time) with
the settings defined here, which "Run it live" uses too. Torch-free and Gradio-free: the Lesson tab
(app/tabs/lesson.py) draws it, the tests read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from engine.methods import BASELINE, METHOD_REGISTRY, method_label
from engine.presets import ASSETS_DIR, load_prompts

from .examples import example_prompts
from .links import Settings, default_settings
from .record import Comparison, RecordError, read_comparison
from .theory import speedup

LESSONS_DIR = ASSETS_DIR / "lessons"
FORMAT = "speclab-lesson/1"  # the sweeps, the distribution check and the variant sweep as recorded

# What each recording measures, shared by the recording script and "Run it live".
NEW_TOKENS = 64
SWEEP_KS = (1, 2, 3, 4, 6, 8, 12, 16)
SWEEP_TOKENS = 48
SWEEP_PROMPTS = 6  # the first held-out prompts: one prompt's text can hide the ceiling (see the Why tab)
LOSSLESS_SAMPLES = 200
LOSSLESS_TEMPERATURE = 1.0
PARTS_PROMPTS = 3


def lesson_prompt() -> str:
    return example_prompts()[0]


def comparison_settings(available, temperature: float) -> Settings:
    """The recorded comparisons' settings: every lane, the example prompt, 64 new tokens."""
    return replace(default_settings(available), prompt=lesson_prompt(), methods=tuple(available),
                   temperature=temperature, max_new_tokens=NEW_TOKENS, seed=0, verify_rule="rejection")


def sweep_prompts() -> list[str]:
    return load_prompts()[:SWEEP_PROMPTS]


def serial_methods(available) -> list[str]:
    return [m for m in available if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].one_pass]


def parts_method(available) -> str | None:
    """The method whose parts the lesson takes apart: the first scheduled one with variants."""
    return next((m for m in available if METHOD_REGISTRY[m].cuts and METHOD_REGISTRY[m].variants), None)


# --- the measurements, recorded or live ------------------------------------------------------------------

def measure_sweeps(engine, prompts: list[str], ks=None, max_new_tokens: int | None = None, rounds: int = 2,
                   stop=None) -> dict:
    """Every serial lane at every K (default SWEEP_KS, SWEEP_TOKENS new tokens), and the block drafters once at
    their default block (with the first lane), against the baseline on the same prompts (engine/sweep.py).
    stop (here and below): a threading.Event that ends the measurement (engine.types.Stopped)."""
    from engine.sweep import k_sweep

    ks, max_new_tokens = ks or SWEEP_KS, max_new_tokens or SWEEP_TOKENS
    sweeps = {m: k_sweep(engine, prompts, max_new_tokens, ks, m, rounds=rounds, one_pass=i == 0, stop=stop)
              for i, m in enumerate(serial_methods(engine.methods()))}
    return measurement({"sweeps": sweeps}, engine.device_name)


def measure_check(engine, samples: int = LOSSLESS_SAMPLES, stop=None) -> dict:
    """The distribution check (engine/lossless.py) on the lesson's prompt. Imported here, not at the top: the
    engine (and so torch) is loaded by the time this runs, while importing the app loads no torch."""
    from engine.lossless import distribution_check

    return measurement(distribution_check(engine, lesson_prompt(), samples=samples,
                                          temperature=LOSSLESS_TEMPERATURE, stop=stop), engine.device_name)


def measure_parts(engine, rounds: int = 2, stop=None) -> dict:
    """The scheduled drafter beside each of its variants (engine/sweep.py variant_sweep)."""
    from engine.sweep import variant_sweep

    method = parts_method(engine.methods())
    if method is None:
        raise ValueError("this engine runs no scheduled drafter with variants")
    return measurement(variant_sweep(engine, method, load_prompts()[:PARTS_PROMPTS], NEW_TOKENS, rounds=rounds,
                                     stop=stop),
                       engine.device_name)


# --- what is recorded ------------------------------------------------------------------------------------

RECORDINGS = {"greedy": "greedy.json", "sampled": "sampled.json", "sweeps": "k_sweeps.json",
              "lossless": "lossless.json", "parts": "parts.json"}
COMPARISONS = ("greedy", "sampled")  # saved comparisons; the rest are plain measurements with FORMAT


def measurement(data: dict, device: str) -> dict:
    """A measurement as it is recorded: JSON's own types (a live run reads exactly as a recorded one)."""
    from datetime import datetime, timezone

    doc = {"format": FORMAT, "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "device": device, "data": data}
    return json.loads(json.dumps(doc))


def read_measurement(text: str) -> dict:
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("data"), dict):
        raise RecordError(f"not a SpecLab lesson measurement (expected \"format\": \"{FORMAT}\")")
    return doc


@cache
def recorded() -> dict:
    """Every recording that exists in assets/lessons/, read once: comparisons as Comparison, the others as
    {"data": ..., "recorded_at": ..., "device": ...}."""
    found = {}
    for key, name in RECORDINGS.items():
        path = LESSONS_DIR / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            found[key] = read_comparison(text) if key in COMPARISONS else read_measurement(text)
    return found


def recorded_words(item) -> str:
    """"recorded 2026-12-02 on cpu (1 thread)": when and where a recording was measured."""
    if isinstance(item, Comparison):
        return f"recorded {item.recorded_at[:10]} on {item.device}"
    return f"recorded {item.get('recorded_at', '')[:10]} on {item.get('device', '')}"


# --- the takeaways: one line each, computed from what the point shows -------------------------------------

def _drafting(comparison: Comparison) -> list[str]:
    return [m for m, lane in comparison.lanes.items() if METHOD_REGISTRY[m].drafts and lane.summary is not None]


def formula_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    parts = []
    for m in _drafting(c):
        s, measured = c.lanes[m].summary, c.speedup(m)
        if measured is None or not s.verify_s:
            continue
        parts.append(f"{method_label(m)} τ {s.tau:.2f}, draft/verify {s.draft_s / s.verify_s:.2f} → formula "
                     f"{speedup(s.tau, s.draft_s / s.verify_s):.2f}×, measured {measured:.2f}×")
    return ("; ".join(parts) + ". The formula counts a verify as one baseline forward; verifying a block costs "
            "a little more, so measured sits below it.")


def rule_takeaway(data: dict) -> str:
    check = data["lossless"]["data"]
    worst = min(check["lanes"].values(), key=lambda lane: lane["p_value"])["p_value"]
    lanes = ", ".join(method_label(m) for m in check["lanes"])
    example = first_rejection(data["sampled"])
    shown = ""
    if example is not None:
        method, step, position, token = example
        shown = (f" In the recorded run at temperature {data['sampled'].settings['temperature']:g}, {method_label(method)}'s "
                 f"draft {token.text!r} at step {step} had p_target {token.target_prob:.3f} against p_draft "
                 f"{token.draft_prob:.3f}: it passed with probability {token.accept_prob:.2f}, the draw was "
                 f"{token.draw:.2f}, so it was rejected and the target wrote its own token.")
    return (f"Over {check['samples']} seeds at temperature {check['temperature']:g}, every lane ({lanes}) writes its "
            f"first tokens with the target's own odds: no chi-square test rejects it (smallest p = {worst:.2f})."
            + shown)


def first_rejection(comparison: Comparison):
    """(method, step index, position, token) of the recorded run's first rejected draft with a draw."""
    for method, lane in comparison.lanes.items():
        for step in lane.steps:
            for position, token in enumerate(step.drafted, start=1):
                if token.verdict == "rejected" and token.draw is not None:
                    return method, step.index, position, token
    return None


def ceiling_takeaway(data: dict) -> str:
    c: Comparison = data["sampled"]
    parts = []
    for m in _drafting(c):
        judged = [t for s in c.lanes[m].steps for t in s.drafted if t.tv is not None]
        if judged:
            accepted = sum(t.verdict == "accepted" for t in judged) / len(judged)
            ceiling = 1 - sum(t.tv for t in judged) / len(judged)
            noise = 2 * (ceiling * (1 - ceiling) / len(judged)) ** 0.5  # two standard errors of a count of n
            parts.append(f"{method_label(m)} accepted {accepted:.0%} of {len(judged)} judged drafts, 1 − TV "
                         f"predicts {ceiling:.0%} (± {noise:.0%} by chance)")
    return "; ".join(parts) + ". A drafter can pass no more often than its distribution overlaps the target's."


def sweep_takeaway(data: dict) -> str:
    sweeps = data["sweeps"]["data"]["sweeps"]
    parts = []
    for m, sweep in sweeps.items():
        best = str(sweep["best_k"])
        longest = str(max(int(k) for k in sweep["rows"]))
        parts.append(f"{method_label(m)}'s best K is {best} at {sweep['rows'][best]['speedup']:.2f}× "
                     f"({sweep['rows'][longest]['speedup']:.2f}× at K = {longest}; one draft forward costs "
                     f"{sweep['per_forward_cost']:.2f} of a verify)")
    return "; ".join(parts) + "."


def _first_serial_and_one_pass(c: Comparison) -> tuple[str | None, str | None]:
    """The comparison's first serial drafting lane and its first one-pass lane (None where it has none)."""
    drafting = _drafting(c)
    return (next((m for m in drafting if not METHOD_REGISTRY[m].one_pass), None),
            next((m for m in drafting if METHOD_REGISTRY[m].one_pass), None))


def bottlenecks_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    parts = []
    if serial:
        s = c.lanes[serial].summary
        parts.append(f"{method_label(serial)} spends {s.draft_s / s.wall_s:.0%} of its time drafting, K forwards "
                     f"in a row")
    if one_pass:
        rates = [r for r in c.lanes[one_pass].per_position_acceptance if r is not None]
        if rates:
            parts.append(f"{method_label(one_pass)}'s acceptance goes {rates[0]:.2f} → {min(rates):.2f} along its "
                         f"block")
    ablation = data["parts"]["data"]
    m = ablation["method"]
    full, alone = ablation["rows"].get(f"{m}_verify_all"), ablation["rows"].get(f"{m}_no_markov")
    if full and alone:
        parts.append(f"drafting a block with no order inside it ({method_label(m)}'s backbone alone) gives τ "
                     f"{alone['tau']:.2f} against {full['tau']:.2f} with its Markov head")
    return "; ".join(parts) + "."


def dflash_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    if serial is None or one_pass is None:
        return ""
    a, b = c.lanes[one_pass].summary, c.lanes[serial].summary
    k_one, k_serial = c.settings.get("block_len"), c.settings.get("draft_len")
    return (f"{method_label(one_pass)} drafts {k_one} tokens in one pass costing {a.draft_s / a.verify_s:.2f} of a "
            f"verify per step; {method_label(serial)}'s {k_serial} serial forwards cost {b.draft_s / b.verify_s:.2f}. "
            f"Bubbles (nothing running) are {a.bubble_s / a.wall_s:.0%} of {method_label(one_pass)}'s time here; "
            f"overlap (More settings) runs each step's host work under the next step's device work.")


def parts_takeaway(data: dict) -> str:
    parts = data["parts"]["data"]
    rows, m = parts["rows"], parts["method"]
    shipped, full, alone = rows.get(m), rows.get(f"{m}_verify_all"), rows.get(f"{m}_no_markov")
    if not (shipped and full and alone):
        return ""
    verdict = ("here the scheduler pays" if shipped["speedup"] > full["speedup"] else
               "on this machine the scheduler does not pay, since verifying the whole block costs hardly more than "
               "verifying part of it, so cutting saves little and loses accepted tokens")
    return (f"The Markov head lifts τ from {alone['tau']:.2f} to {full['tau']:.2f}. The scheduler verifies "
            f"{shipped['verified_per_step']:.2f} tokens a step instead of {full['verified_per_step']:.2f}, at "
            f"{shipped['speedup']:.2f}× against {full['speedup']:.2f}× verifying everything: {verdict}.")


# --- the seven points ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    number: int
    title: str
    text: str
    tab: str  # the tab that shows it: "compare", "step" or "why"
    recording: str  # which recording it shows (RECORDINGS)
    look_at: str  # what to look at there
    takeaway: Callable[[dict], str]
    needs: tuple[str, ...] = ()  # the recordings its takeaway reads


def _serial_names() -> str:
    return ", ".join(m.label for m in METHOD_REGISTRY.values() if m.drafts and not m.one_pass)


POINTS = (
    Point(1, "Speedup is τ over what a step costs",
          "Each verify step commits τ tokens on average: the accepted drafts plus the one the target writes itself. "
          "A step costs one target forward plus the drafting, so the speedup over the target alone is about "
          "τ / (1 + cost_draft / cost_target). Everything else in this lesson moves one of those two numbers.",
          "compare", "greedy", "the chart “Speedup: measured vs the formula” under the lanes, and each lane's τ chip",
          formula_takeaway, ("greedy",)),
    Point(2, "A draft passes with probability min(1, p_target / p_draft), and the output stays the target's",
          "Above temperature 0 a drafted token d passes with probability min(1, p_target(d) / p_draft(d)); at the "
          "first rejection the target draws its own token from what is left, max(p_target − p_draft, 0). Together "
          "these make every token distributed exactly as the target alone would write it, whatever the drafter "
          "proposed. So each lane writes a different text from the baseline, yet with the same odds: counting the "
          "first tokens over many seeds shows it.",
          "why", "lossless", "the bars of each lane beside the target's exact probabilities, and each lane's p-value",
          rule_takeaway, ("lossless", "sampled")),
    Point(3, "Acceptance is capped by how far the drafter is from the target",
          "A token drawn from the drafter's distribution q passes with probability Σ_x min(p(x), q(x)) = 1 − TV(p, q), "
          "where TV is the total-variation distance between the two whole distributions. No rule can accept more "
          "while staying lossless, so a drafter's acceptance is capped by how close it is to the target, position "
          "by position.",
          "compare", "sampled", "the chart “Per-position acceptance”: each lane's measured line beside its dashed "
          "1 − TV", ceiling_takeaway, ("sampled",)),
    Point(4, "A serial drafter has a best K, and near it the speedup stalls",
          f"A serial drafter ({_serial_names()}) pays one forward per drafted token, so its cost grows with K, while "
          "τ grows ever more slowly: each position must survive all the ones before it. Past some K another draft "
          "costs more than it adds. Where that K lies depends on how a draft forward's cost stands to a verify's, "
          "and on how fast acceptance decays along the draft.",
          "why", "sweeps", "each lane's measured line and its starred best K, beside its dotted formula",
          sweep_takeaway, ("sweeps",)),
    Point(5, "Three bottlenecks: serial drafting, the acceptance ceiling, no order inside a block",
          "Classic drafters hit three limits: drafting K tokens takes K forwards in a row; acceptance decays along "
          "the draft toward the ceiling of point 3; and a drafter that writes a whole block at once, to avoid the "
          "first limit, guesses each position without seeing what it put before it.",
          "compare", "greedy", "the timeline (a serial lane's run of orange draft bars before each blue verify) and "
          "the per-position acceptance chart", bottlenecks_takeaway, ("greedy", "parts")),
    Point(6, "DFlash: one parallel pass, conditioned on the target",
          "DFlash drafts the whole block in one forward of a small block-diffusion model that reads the target's "
          "own hidden states, so drafting costs about the same for 2 tokens or 16. What is left between steps is "
          "bubbles and host work, which overlap can hide under the next step's device work.",
          "compare", "greedy", "the timeline's single orange bar per DFlash step against the serial lanes' runs, "
          "and the chart “Where the time went”", dflash_takeaway, ("greedy",)),
    Point(7, "DSpark: a Markov head orders the block, a scheduler decides how much to verify",
          "DSpark keeps DFlash's parallel pass and adds a cheap Markov head that samples the block left to right, "
          "each token seeing the one before it, and a confidence head whose scheduler verifies only as much of the "
          "block as is likely to pass. Switching each part off shows what it buys.",
          "why", "parts", "the variants' per-position acceptance and the table beside it", parts_takeaway,
          ("parts",)),
)
TABS = ("lesson", "compare", "step", "why", "about")  # the tabs a link may open (?tab=)


def takeaway(point: Point, data: dict | None = None) -> str:
    """The point's takeaway from the recordings (or `data`), or why there is none."""
    data = recorded() if data is None else data
    missing = [key for key in point.needs if key not in data]
    if missing:
        return f"(not recorded yet: run scripts/record_lessons.py for {', '.join(missing)})"
    return point.takeaway(data)


assert all(p.tab in TABS and p.recording in RECORDINGS for p in POINTS) and BASELINE in METHOD_REGISTRY
