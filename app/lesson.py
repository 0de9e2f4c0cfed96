"""The lesson: the argument for parallel drafting in ten points, each shown with measured data.

Each point says what it claims in a few sentences, names the tab and the measurement that shows it, what to
look at there, and a takeaway computed from that measurement. The measurements are recorded on the embedded
models by `scripts/record_lessons.py` into assets/lessons/ (so a class sees the same numbers every time) with
the settings defined here; "Run it live" measures a smaller live size of each (LIVE_*), which its pages name.
Torch-free and Gradio-free: the Lesson tab
(app/tabs/lesson.py) draws it, the tests read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label
from engine.contract.presets import ASSETS_DIR, load_prompts

from .examples import example_prompts
from .settings import Settings, default_settings
from .comparison import Comparison, RecordError, drafter_words, read_comparison, verify_cost
from .theory import PUBLISHED_LOAD, PUBLISHED_TREES, speedup, tree_costs
from .words import above_or_below, interval_trend, interval_versus, more_or_less, span, survival, trend, versus

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
# The temperature sweep: every lane at these temperatures over the first TEMPERATURE_PROMPTS held-out prompts
# (recorded; about 2,000 judged drafts per lane at T = 1), argmax proposals beside sampled ones at T = 1; "Run it
# live" measures a small version of it (LIVE_TEMPERATURE_*).
TEMPERATURES = (0.0, 0.25, 0.5, 0.75, 1.0)
TEMPERATURE_PROMPTS = 40
TEMPERATURE_TOKENS = 64
ARGMAX_AT = (1.0,)

# The live sizes: "Run it live" (and the Why tab's own measure buttons, which share them) measures a smaller
# version of each recording, so that it ends within seconds on a 2-core machine; each page that shows a live
# measurement names its size beside the recording's (`size_words`), and its words say only what that size supports.
LIVE_LOSSLESS_SAMPLES = 40  # seeds per lane, every drafting lane (the baseline lane is the target alone)
LIVE_SWEEP_KS = (1, 2, 4, 8)  # both sides of each serial lane's best K (AR's at 3-4, Classic's at 1-2)
LIVE_SWEEP_PROMPTS = 2
LIVE_SWEEP_TOKENS = 32
LIVE_SWEEP_ROUNDS = 1
LIVE_PARTS_PROMPTS = 2
LIVE_PARTS_TOKENS = 48
LIVE_PARTS_ROUNDS = 1
LIVE_TEMPERATURES = (0.0, 1.0)  # the two ends: the target sure of itself, and sampling at its own odds
LIVE_TEMPERATURE_PROMPTS = 3  # intervals over the prompts, widened for so few (engine/measure/sweep.py)
LIVE_TEMPERATURE_TOKENS = 24
LIVE_TIMING_RUNS = 2  # a lesson comparison's runs of each lane (the Compare tab's own: app/runner.py TIMING_RUNS)
# The budget sweep: every tree lane at every node budget beside the chain it grows from (engine/measure/sweep.py
# budget_sweep), recorded on the first TREE_PROMPTS held-out prompts; live, the two ends and the default budget.
TREE_BUDGETS = (4, 8, 16, 32, 64)
TREE_PROMPTS = 16
TREE_TOKENS = 64
TREE_ROUNDS = 2
LIVE_TREE_BUDGETS = (4, 16, 64)
LIVE_TREE_PROMPTS = 2
LIVE_TREE_TOKENS = 24
LIVE_TREE_ROUNDS = 1
# Under load: every batched lane with B requests at once (engine/measure/concurrency.py), the same LOAD_REQUESTS
# held-out prompts at every B; live, two batch sizes over a few requests and the lanes the point compares.
LOAD_SIZES = (1, 2, 4, 8, 16, 32)
LOAD_REQUESTS = 64  # two a place at the largest B: the batch stays full for most of the run
LOAD_TOKENS = 64
LOAD_ROUNDS = 2
LOAD_PAIRS = 6  # adjacent runs of DSpark's scheduler and of verifying everything at the largest B: a ratio's interval
LIVE_LOAD_SIZES = (1, 8)
LIVE_LOAD_REQUESTS = 8
LIVE_LOAD_TOKENS = 16
LIVE_LOAD_ROUNDS = 1
LIVE_LOAD_LANES = ("baseline", "dflash", "dspark", "dspark_verify_all")


def lesson_prompt() -> str:
    return example_prompts()[0]


def comparison_settings(available, temperature: float) -> Settings:
    """The recorded comparisons' settings: every lane, the example prompt, 64 new tokens."""
    return replace(default_settings(available), prompt=lesson_prompt(), methods=tuple(available),
                   temperature=temperature, max_new_tokens=NEW_TOKENS, seed=0, verify_rule="rejection")


def sweep_prompts() -> list[str]:
    return load_prompts()[:SWEEP_PROMPTS]


def live_sweep_prompts() -> list[str]:
    return load_prompts()[:LIVE_SWEEP_PROMPTS]


def chain_methods(available) -> list[str]:
    """The drafting lanes the lesson's first points measure: every one but the trees (they have a point of their own)."""
    return [m for m in available if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].tree]


def serial_methods(available) -> list[str]:
    return [m for m in chain_methods(available) if not METHOD_REGISTRY[m].one_pass]


def parts_method(available) -> str | None:
    """The method whose parts the lesson takes apart: the first scheduled one with variants."""
    return next((m for m in available if METHOD_REGISTRY[m].cuts and METHOD_REGISTRY[m].variants), None)


# --- the measurements, recorded or live ------------------------------------------------------------------

def measure_sweeps(engine, prompts: list[str], ks=None, max_new_tokens: int | None = None, rounds: int = 2,
                   stop=None) -> dict:
    """Every serial lane at every K (default SWEEP_KS, SWEEP_TOKENS new tokens), and the block drafters once at
    their default block (with the first lane), against the baseline on the same prompts (engine/measure/sweep.py).
    stop (here and below): a threading.Event that ends the measurement (engine.contract.types.Stopped)."""
    from engine.measure.sweep import k_sweep

    ks, max_new_tokens = ks or SWEEP_KS, max_new_tokens or SWEEP_TOKENS
    sweeps = {m: k_sweep(engine, prompts, max_new_tokens, ks, m, rounds=rounds, one_pass=i == 0, stop=stop)
              for i, m in enumerate(serial_methods(engine.methods()))}
    return measurement({"sweeps": sweeps, "rounds": rounds}, engine.device_name)


def measure_sweeps_live(engine, prompts: list[str], stop=None) -> dict:
    """The K sweep at its live size (LIVE_SWEEP_*) on `prompts` (the lesson's: live_sweep_prompts())."""
    return measure_sweeps(engine, prompts, LIVE_SWEEP_KS, LIVE_SWEEP_TOKENS, LIVE_SWEEP_ROUNDS, stop=stop)


def measure_check(engine, samples: int = LOSSLESS_SAMPLES, methods: list[str] | None = None, stop=None) -> dict:
    """The distribution check (engine/measure/lossless.py) on the lesson's prompt, every chain lane (or `methods`).
    Imported here, not at the top: the engine (and so torch) is loaded by the time this runs, while importing the
    app loads no torch."""
    from engine.measure.lossless import distribution_check

    methods = methods or chain_methods(engine.methods())
    return measurement(distribution_check(engine, lesson_prompt(), methods=methods, samples=samples,
                                          temperature=LOSSLESS_TEMPERATURE, stop=stop), engine.device_name)


def measure_check_live(engine, stop=None) -> dict:
    """The distribution check at its live size: LIVE_LOSSLESS_SAMPLES seeds, every drafting lane."""
    return measure_check(engine, LIVE_LOSSLESS_SAMPLES, chain_methods(engine.methods()), stop=stop)


def measure_parts(engine, prompts: int = PARTS_PROMPTS, max_new_tokens: int = NEW_TOKENS, rounds: int = 2,
                  stop=None) -> dict:
    """The scheduled drafter beside each of its variants (engine/measure/sweep.py variant_sweep) on the first
    `prompts` held-out prompts."""
    from engine.measure.sweep import variant_sweep

    method = parts_method(engine.methods())
    if method is None:
        raise ValueError("this engine runs no scheduled drafter with variants")
    measured = variant_sweep(engine, method, load_prompts()[:prompts], max_new_tokens, rounds=rounds, stop=stop)
    return measurement({**measured, "rounds": rounds}, engine.device_name)


def measure_parts_live(engine, stop=None) -> dict:
    """The variants at their live size (LIVE_PARTS_*)."""
    return measure_parts(engine, LIVE_PARTS_PROMPTS, LIVE_PARTS_TOKENS, LIVE_PARTS_ROUNDS, stop=stop)


def measure_temperatures(engine, prompts: list[str] | None = None, temperatures=TEMPERATURES,
                         max_new_tokens: int = TEMPERATURE_TOKENS, argmax_at=ARGMAX_AT, stop=None) -> dict:
    """Every lane at every temperature against the baseline at the same temperature (engine/measure/sweep.py
    temperature_sweep), on `prompts` (default the first TEMPERATURE_PROMPTS held-out prompts)."""
    from engine.measure.sweep import temperature_sweep

    prompts = prompts or load_prompts()[:TEMPERATURE_PROMPTS]
    return measurement(temperature_sweep(engine, prompts, max_new_tokens, temperatures, chain_methods(engine.methods()),
                                         argmax_at=argmax_at, stop=stop), engine.device_name)


def measure_temperatures_live(engine, stop=None) -> dict:
    """The temperature sweep small enough to run in front of a class (LIVE_TEMPERATURE_*)."""
    return measure_temperatures(engine, load_prompts()[:LIVE_TEMPERATURE_PROMPTS], LIVE_TEMPERATURES,
                                LIVE_TEMPERATURE_TOKENS, argmax_at=(), stop=stop)


def measure_trees(engine, prompts: list[str] | None = None, budgets=TREE_BUDGETS, max_new_tokens: int = TREE_TOKENS,
                  rounds: int = TREE_ROUNDS, stop=None) -> dict:
    """Every tree lane at every node budget in `budgets` beside the chain it grows from, against the baseline on
    `prompts` (default the first TREE_PROMPTS held-out prompts; engine/measure/sweep.py budget_sweep)."""
    from engine.measure.sweep import budget_sweep

    prompts = prompts or load_prompts()[:TREE_PROMPTS]
    measured = budget_sweep(engine, prompts, max_new_tokens, budgets, rounds=rounds, stop=stop)
    return measurement({**measured, "rounds": rounds}, engine.device_name)


def measure_trees_live(engine, stop=None) -> dict:
    """The budget sweep at its live size (LIVE_TREE_*)."""
    return measure_trees(engine, load_prompts()[:LIVE_TREE_PROMPTS], LIVE_TREE_BUDGETS, LIVE_TREE_TOKENS,
                         LIVE_TREE_ROUNDS, stop=stop)


def measure_load(engine, prompts: list[str] | None = None, sizes=LOAD_SIZES, num_requests: int = LOAD_REQUESTS,
                 max_new_tokens: int = LOAD_TOKENS, rounds: int = LOAD_ROUNDS, lanes=None, stop=None,
                 pairs: int = LOAD_PAIRS) -> dict:
    """Every batched lane at every batch size in `sizes` over the same `num_requests` requests (default the first
    held-out prompts), beside the batched baseline and transformers' batched generate
    (engine/measure/concurrency.py), and at the largest size DSpark's scheduler against verifying everything over
    `pairs` adjacent pairs of runs."""
    from engine.measure.concurrency import BATCHED_LANES, concurrency_sweep

    prompts = prompts or load_prompts()[:num_requests]
    measured = concurrency_sweep(engine, prompts, max_new_tokens, list(sizes), tuple(lanes or BATCHED_LANES),
                                 log=lambda line: None, rounds=rounds, num_requests=num_requests, stop=stop,
                                 pairs=pairs)
    return measurement(measured, engine.device_name)


def measure_load_live(engine, stop=None) -> dict:
    """The concurrency sweep at its live size (LIVE_LOAD_*)."""
    return measure_load(engine, None, LIVE_LOAD_SIZES, LIVE_LOAD_REQUESTS, LIVE_LOAD_TOKENS, LIVE_LOAD_ROUNDS,
                        LIVE_LOAD_LANES, stop=stop, pairs=0)


# --- what is recorded ------------------------------------------------------------------------------------

RECORDINGS = {"greedy": "greedy.json", "sampled": "sampled.json", "sweeps": "k_sweeps.json",
              "lossless": "lossless.json", "parts": "parts.json", "temperatures": "temperatures.json",
              "trees": "trees.json", "load": "load.json"}
COMPARISONS = ("greedy", "sampled")  # saved comparisons; the rest are plain measurements with FORMAT


def measurement(data: dict, device: str) -> dict:
    """A measurement as it is recorded: JSON's own types (a live run reads exactly as a recorded one)."""
    from datetime import datetime, timezone

    doc = {"format": FORMAT, "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "device": device, "data": data}
    return json.loads(json.dumps(doc))


def read_measurement(text: str) -> dict:
    """A recorded measurement, every drafter's label in the lane headers' one block convention (drafter_words)."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("data"), dict):
        raise RecordError(f"not a SpecLab lesson measurement (expected \"format\": \"{FORMAT}\")")
    return _with_drafter_words(doc)


def _with_drafter_words(node):
    if isinstance(node, dict):
        return {k: drafter_words(v) if k == "drafter" and isinstance(v, str) else _with_drafter_words(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_with_drafter_words(v) for v in node]
    return node


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
    """"recorded 2026-12-02 on cpu (1 thread)": when and where a recording was measured; a measurement made live
    (`live_measurement`) says so instead, with its time and its size beside the recording's: "measured live
    2026-12-03 14:05 UTC on cpu: 40 seeds × 4 lanes (the recording: 200 seeds × 5 lanes)"."""
    if isinstance(item, Comparison):
        return f"recorded {item.recorded_at[:10]} on {item.device}"
    when = item.get("recorded_at", "")
    if item.get("live"):
        size = size_words(item)
        kind = measurement_kind(item)
        recording = recorded().get(kind) if kind else None
        beside = f" (the recording: {size_words(recording)})" if recording is not None and size_words(recording) else ""
        return (f"measured live {when[:10]} {when[11:16]} UTC on {item.get('device', '')}"
                + (f": {size}{beside}" if size else ""))
    return f"recorded {when[:10]} on {item.get('device', '')}"


def measurement_kind(item: dict) -> str | None:
    """Which of the lesson's measurements a document holds ("lossless", "sweeps", "parts", "temperatures", "trees",
    "load"), from its data's own keys."""
    data = item.get("data", {}) if isinstance(item, dict) else {}
    if "samples" in data and "lanes" in data:
        return "lossless"
    if "sweeps" in data:
        return "sweeps"
    if "temperatures" in data:
        return "temperatures"
    if "rows" in data and "method" in data:
        return "parts"
    if "budgets" in data and "lanes" in data:
        return "trees"
    if "sizes" in data and "requests" in data:
        return "load"
    return None


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def size_words(item: dict) -> str:
    """How much a measurement measured, from its own data: "40 seeds × 4 lanes", "2 serial lanes × 4 K (1, 2, 4,
    8) × 2 prompts × 1 round, 32 new tokens", … ("" for a document of no known kind)."""
    kind, data = measurement_kind(item), item.get("data", {}) if isinstance(item, dict) else {}
    rounds = f" × {_count(data['rounds'], 'round')}" if isinstance(data.get("rounds"), int) else ""
    if kind == "lossless":
        return f"{_count(data['samples'], 'seed')} × {_count(len(data['lanes']), 'lane')}"
    if kind == "sweeps":
        sweeps = list(data["sweeps"].values())
        if not sweeps:
            return ""
        ks = sorted(map(int, sweeps[0]["rows"]))
        return (f"{_count(len(sweeps), 'serial lane')} × {_count(len(ks), 'value', 'values')} of K ({', '.join(map(str, ks))}) × "
                f"{_count(sweeps[0]['num_prompts'], 'prompt')}{rounds}, {sweeps[0]['max_new_tokens']} new tokens")
    if kind == "parts":
        return (f"{_count(len(data['rows']), 'variant')} × {_count(data['num_prompts'], 'prompt')}{rounds}, "
                f"{data['max_new_tokens']} new tokens")
    if kind == "trees":
        return _trees_size(len(data["lanes"]), data["budgets"], data["num_prompts"], data.get("rounds"),
                           data["max_new_tokens"])
    if kind == "load":
        return _load_size(len(data["lanes"]), data["sizes"], data["requests"], data.get("rounds"),
                          data["max_new_tokens"])
    if kind == "temperatures":
        temperatures = sorted(map(float, data["temperatures"]))
        return (f"{_count(len(temperatures), 'temperature')} ({', '.join(f'{t:g}' for t in temperatures)}) × "
                f"{_count(data['num_prompts'], 'prompt')}, {data['max_new_tokens']} new tokens")
    return ""


def _trees_size(lanes: int, budgets, prompts: int, rounds: int | None, tokens: int) -> str:
    """"2 tree lanes × 3 budgets (4, 16, 64 nodes) × 2 prompts × 1 round, 32 new tokens"."""
    budgets = sorted(map(int, budgets))
    times = f" × {_count(rounds, 'round')}" if isinstance(rounds, int) else ""
    return (f"{_count(lanes, 'tree lane')} × {_count(len(budgets), 'budget')} ({', '.join(map(str, budgets))} nodes) × "
            f"{_count(prompts, 'prompt')}{times}, {tokens} new tokens")


def _load_size(lanes: int, sizes, requests: int, rounds: int | None, tokens: int) -> str:
    """"4 lanes × 2 batch sizes (1, 8) × 8 requests × 1 round, 16 new tokens"."""
    sizes = sorted(map(int, sizes))
    times = f" × {_count(rounds, 'round')}" if isinstance(rounds, int) else ""
    return (f"{_count(lanes, 'lane')} × {_count(len(sizes), 'batch size')} ({', '.join(map(str, sizes))}) × "
            f"{_count(requests, 'request')}{times}, {tokens} new tokens")


def live_size(point: "Point") -> str:
    """What a point's "Run it live" measures, in words, before it runs (the lesson's note says it)."""
    if point.tab == "compare":
        return (f"each lane run {times_words(LIVE_TIMING_RUNS)}, each step's fastest timing kept (the recording: "
                f"{_recorded_timing_runs(point)})")
    trees = [m for m in METHOD_REGISTRY.values() if m.tree]
    live_trees = _trees_size(len(trees), LIVE_TREE_BUDGETS, LIVE_TREE_PROMPTS, LIVE_TREE_ROUNDS, LIVE_TREE_TOKENS)
    recorded_trees = _trees_size(len(trees), TREE_BUDGETS, TREE_PROMPTS, TREE_ROUNDS, TREE_TOKENS)
    sizes = {"lossless": f"{_count(LIVE_LOSSLESS_SAMPLES, 'seed')} × every drafting lane (the recording: "
                         f"{_count(LOSSLESS_SAMPLES, 'seed')} × every lane)",
             "sweeps": f"K = {', '.join(map(str, LIVE_SWEEP_KS))} × {_count(LIVE_SWEEP_PROMPTS, 'prompt')} × "
                       f"{_count(LIVE_SWEEP_ROUNDS, 'round')}, {LIVE_SWEEP_TOKENS} new tokens (the recording: K = "
                       f"{', '.join(map(str, SWEEP_KS))} × {_count(SWEEP_PROMPTS, 'prompt')} × 2 rounds, "
                       f"{SWEEP_TOKENS} new tokens)",
             "parts": f"{_count(LIVE_PARTS_PROMPTS, 'prompt')} × {_count(LIVE_PARTS_ROUNDS, 'round')}, "
                      f"{LIVE_PARTS_TOKENS} new tokens (the recording: {_count(PARTS_PROMPTS, 'prompt')} × 2 "
                      f"rounds, {NEW_TOKENS} new tokens)",
             "temperatures": f"T = {', '.join(f'{t:g}' for t in LIVE_TEMPERATURES)} × "
                             f"{_count(LIVE_TEMPERATURE_PROMPTS, 'prompt')}, {LIVE_TEMPERATURE_TOKENS} new tokens (the "
                             f"recording: T = {', '.join(f'{t:g}' for t in TEMPERATURES)} × "
                             f"{_count(TEMPERATURE_PROMPTS, 'prompt')}, {TEMPERATURE_TOKENS} new tokens)",
             "trees": f"{live_trees} (the recording: {recorded_trees})",
             "load": _load_size(len(LIVE_LOAD_LANES), LIVE_LOAD_SIZES, LIVE_LOAD_REQUESTS, LIVE_LOAD_ROUNDS,
                                LIVE_LOAD_TOKENS) + (f" (the recording: {size_words(recorded()['load'])})"
                                                     if "load" in recorded() else "")}
    return sizes[point.recording]


def _recorded_timing_runs(point: "Point") -> str:
    item = recorded().get(point.recording)
    runs = item.timing_runs if isinstance(item, Comparison) else None
    return f"each lane run {times_words(runs)}" if runs else "not recorded here"


def times_words(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def live_measurement(doc: dict) -> dict:
    """A measurement just made on this server (the Why tab, "Run it live"), marked so no page calls it recorded."""
    return {**doc, "live": True}


# --- the takeaways: one line each, computed from what the point shows -------------------------------------

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
                f"{versus(measured[serial], measured[one_pass])} {method_label(one_pass)} (one pass, "
                f"{measured[one_pass]:.2f}×); the fastest lane is {method_label(max(measured, key=measured.get))}. "
                "One prompt moves these: the K sweep (point 5) averages several.")
    return "; ".join(parts) + f". Here {where}." + why + race + heldout


def formula_slide(data: dict) -> str:
    measured, formula, costs = _formula_rows(data["greedy"])
    if not measured:
        return "No drafting lane has a speedup in this recording."
    lanes = ", ".join(f"{method_label(m)} {measured[m]:.2f}× (formula {formula[m]:.2f}×)" for m in measured)
    where = _below_formula(measured, formula)
    cost = f" One verify cost {_verify_cost_words(costs)}." if costs else ""
    return f"Measured: {lanes}; {where}.{cost}"


def heldout_formula(data: dict) -> str:
    """The formula's two numbers and the measured speedup over every held-out prompt at temperature 0 (the
    temperature sweep), each lane's spread over the prompts beside them, and where the example prompt's lanes
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
    where = (f"; the example prompt's {', '.join(method_label(m) for m in outside)} lie outside that spread"
             if outside else "; the example prompt's lanes lie within that spread")
    return (f" Over {sweep['num_prompts']} held-out prompts at temperature 0 (the temperature sweep, point 4): "
            + "; ".join(parts) + f". The fastest there is {method_label(ranked[0])}{where}.")


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
                 f"draft {token.text!r} at step {step} had p_target {token.target_prob:.3f} against p_draft "
                 f"{token.draft_prob:.3f}: it passed with probability {token.accept_prob:.2f}, the draw was "
                 f"{token.draw:.2f}, so it was rejected and the target wrote its own token.")
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
    text = (f"Acceptance rate: {lanes}; {sum(r[5] for r in rows)} of {len(rows)} lanes within chance "
            f"(± {_whole_span([100 * r[4] for r in rows])} points) of their 1 − TV.")
    heldout = _heldout_ceiling_rows(data)
    if heldout:
        num_prompts, judged, within = heldout
        text += (f" Over {num_prompts} held-out prompts ({_whole_span(judged)} judged drafts a lane), "
                 f"{within} of {len(judged)} lanes' rates lie within the interval of their 1 − TV.")
    return text


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
ONE_ROUND_NOISE = 0.10


def speed_tolerance(measured: dict) -> float:
    """How far apart two speedups of a measurement's data must be to be worded as different."""
    from .words import TOLERANCE

    return ONE_ROUND_NOISE if measured.get("rounds") == 1 else TOLERANCE


def _sweep_rows(data: dict):
    """Per serial lane: (method, its sweep, best K, speedup there, longest K, speedup there, how the speedup moves
    past the best K: "falls to", "rises to", "holds at", or None when the best K is the longest measured)."""
    tolerance = speed_tolerance(data["sweeps"]["data"])
    for m, sweep in data["sweeps"]["data"]["sweeps"].items():
        best = str(sweep["best_k"])
        longest = str(max(int(k) for k in sweep["rows"]))
        at_best, at_longest = sweep["rows"][best]["speedup"], sweep["rows"][longest]["speedup"]
        moves = None if best == longest else {"falls": "falls to", "rises": "rises to", "holds": "holds at"}[
            trend(at_best, at_longest, tolerance)]
        yield m, sweep, best, at_best, longest, at_longest, moves


def sweep_takeaway(data: dict) -> str:
    parts = []
    for m, sweep, best, at_best, longest, at_longest, moves in _sweep_rows(data):
        if moves is None:
            after = "the longest measured, so the sweep did not reach a K past which it falls"
        else:
            after = f"past it the speedup {moves} {at_longest:.2f}× at K = {longest}"
        parts.append(f"{method_label(m)}'s best K is {best} at {at_best:.2f}× ({after}; one draft forward costs "
                     f"{sweep['per_forward_cost']:.2f} of a verify)")
    return "; ".join(parts) + "."


def sweep_slide(data: dict) -> str:
    parts = []
    for m, _, best, at_best, longest, at_longest, moves in _sweep_rows(data):
        after = ("the longest measured" if moves is None else f"then {moves} {at_longest:.2f}× at K = {longest}")
        parts.append(f"{method_label(m)}'s best K is {best} at {at_best:.2f}×, {after}")
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
    if serial:
        parts.append(_drafting_share(c, serial))
    if one_pass:
        alive = survival(c.lanes[one_pass].per_position_acceptance)
        if len(alive) > 1:
            parts.append(f"{method_label(one_pass)}'s survival {trend(alive[0], alive[-1])} along its block, "
                         f"{alive[0]:.2f} → {alive[-1]:.2f} at position {len(alive)}")
    unordered = _unordered(data)
    if unordered:
        m, alone, than, full = unordered
        parts.append(f"with no order inside its block {method_label(m)}'s τ is {alone:.2f}, {than} {full:.2f} with "
                     "its Markov head")
    return "; ".join(parts) + "."


def overlap_on(comparison: Comparison) -> bool:
    """Whether the comparison ran with overlap: "on", or "auto" on a CUDA device."""
    overlap = comparison.settings.get("overlap", "auto")
    return overlap == "on" or (overlap == "auto" and "cuda" in comparison.device.lower())


BUBBLES_WORTH_HIDING = 0.05  # a lane whose bubbles are under this share of its time has little for overlap to hide


def dflash_takeaway(data: dict) -> str:
    c: Comparison = data["greedy"]
    serial, one_pass = _first_serial_and_one_pass(c)
    if serial is None or one_pass is None:
        return ""
    k_one, k_serial = c.settings.get("drafts_per_block"), c.settings.get("serial_k")
    cost_one, cost_serial, bubbles, hide = _one_pass_costs(c, serial, one_pass)
    state = "on" if overlap_on(c) else "off"
    return (f"{method_label(one_pass)} drafts {k_one} tokens in one pass costing {cost_one:.2f} of a verify per "
            f"step, {more_or_less(cost_one, cost_serial)} {method_label(serial)}'s {k_serial} serial forwards "
            f"({cost_serial:.2f}). Bubbles (nothing running) are {bubbles:.0%} of {method_label(one_pass)}'s time "
            f"here, overlap {state}: {hide}. This recording does not show what overlap does: that takes the same "
            "comparison with overlap on and off (More settings), read on the timeline's gaps and “Where the time "
            "went”. On a CPU the overlap worker shares the cores with the model, so it can leave more gaps, not "
            "fewer; its gain is measured on a GPU, where the device computes while the host keeps the books.")


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
        return ""
    cost_one, cost_serial, bubbles, hide = _one_pass_costs(c, serial, one_pass)
    return (f"{method_label(one_pass)}'s one pass costs {cost_one:.2f} of a verify a step, "
            f"{more_or_less(cost_one, cost_serial)} {method_label(serial)}'s {c.settings.get('serial_k')} serial "
            f"forwards ({cost_serial:.2f}). Bubbles are {bubbles:.0%} of its time here: {hide}.")


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
            f"{shipped['tau']:.2f}), and {verify}.")


# --- temperature: what the sweep over temperatures shows ----------------------------------------------------

# DSpark's Table 1 (Qwen3-4B target, T = 1, block 7, GSM8K): τ of EAGLE-3, DFlash, DSpark.
PUBLISHED_T1_TAU = {"eagle3": 5.14, "dflash": 5.40, "dspark": 6.11}


def order_words(values: dict[str, float]) -> str:
    """"DSpark 3.1 > DFlash 2.9 > AR 2.5": lanes from the highest value down."""
    ranked = sorted(values, key=values.get, reverse=True)
    return " > ".join(f"{method_label(m)} {values[m]:.2f}" for m in ranked)


# τ from the lowest temperature to the highest, by its 95 % intervals: "holds" only says they overlap, which a small
# sample (a live measurement's few prompts) does whatever τ does.
TAU_MOVES = {"rises": "rises", "falls": "falls", "holds": "does not move beyond its 95 % intervals"}


def temperature_takeaway(data: dict) -> str:
    sweep = data["temperatures"]["data"]
    temperatures = sorted(sweep["temperatures"], key=float)
    low, high = sweep["temperatures"][temperatures[0]], sweep["temperatures"][temperatures[-1]]
    lanes = [m for m in low["lanes"] if m in METHOD_REGISTRY]
    t0, t1 = float(temperatures[0]), float(temperatures[-1])
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
    return f"{entropy}. {taus}. At T = {t1:g}: {overlap}.{paper}"


def temperature_slide(data: dict) -> str:
    sweep = data["temperatures"]["data"]
    temperatures = sorted(sweep["temperatures"], key=float)
    low, high = sweep["temperatures"][temperatures[0]], sweep["temperatures"][temperatures[-1]]
    lanes = [m for m in low["lanes"] if m in METHOD_REGISTRY]
    t0, t1 = float(temperatures[0]), float(temperatures[-1])
    moves = {}
    for m in lanes:
        moves.setdefault(TAU_MOVES[interval_trend(low["lanes"][m]["tau"], high["lanes"][m]["tau"])], []).append(
            method_label(m))
    taus = ", ".join(f"{how} for {', '.join(names)}" for how, names in moves.items())
    overlap = ", ".join(f"{method_label(m)} {high['lanes'][m]['expected_acceptance']['mean']:.0%} (1 − TV "
                        f"{high['lanes'][m]['one_minus_tv']['mean']:.0%})" for m in lanes)
    return (f"From T = {t0:g} to {t1:g} the target's entropy goes {low['target_entropy']['mean']:.2f} → "
            f"{high['target_entropy']['mean']:.2f} nats and τ {taus}. Expected acceptance at T = {t1:g}: {overlap}.")


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
LOAD_LANES_WORDED = ("dflash", "dspark_verify_all", "eagle3", "classic")
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
    if "dspark" in high and "dspark_verify_all" in high:
        ours, everything = high["dspark"], high["dspark_verify_all"]
        text += (f" At B = {b1} DSpark's scheduler verifies {ours['verified_per_request']:.1f} drafts a request a step "
                 f"against {everything['verified_per_request']:.1f} verifying everything (τ {ours['tau']:.2f} against "
                 f"{everything['tau']:.2f}), and runs {_scheduler_stands(sweep, ours, everything, tolerance)}")
        alone, all_alone = low["dspark"], low["dspark_verify_all"]
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
    lanes = [lane for lane in ("dflash", "dspark_verify_all") if lane in low]  # those that draft every step
    head = "; ".join(f"{LOAD_LANE_NAMES.get(lane, method_label(lane))} {low[lane]['speedup']:.2f}× → "
                     f"{high[lane]['speedup']:.2f}× (τ {low[lane]['tau']:.2f} → {high[lane]['tau']:.2f})"
                     for lane in lanes)
    text = f"B = {b0} → {b1}: {head}."
    if "dspark" in high and "dspark_verify_all" in high:
        paired = sweep.get("scheduler_vs_all")
        ratio = (f"{paired['mean']:.2f} ({paired['low']:.2f}–{paired['high']:.2f})" if paired else
                 f"{_rate(high['dspark']) / _rate(high['dspark_verify_all']):.2f}")
        text += (f" At B = {b1} the scheduler verifies {high['dspark']['verified_per_request']:.1f} a request: "
                 f"{ratio} times verifying everything's speed.")
    return text


# --- the points ------------------------------------------------------------------------------------

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
    chart: str = ""  # the element id of the chart it names: Show me scrolls it into view and outlines it
    slide: Callable[[dict], str] | None = None  # the takeaway's key numbers in a sentence or two, for its slide
    claim: str = ""  # the title in one line of a slide at 1024×768, where the title is longer

    @property
    def slide_claim(self) -> str:
        return self.claim or self.title


def _serial_names() -> str:
    return ", ".join(m.label for m in METHOD_REGISTRY.values() if m.drafts and not m.one_pass and not m.tree)


POINTS = (
    Point(1, "Speedup is τ over what a step costs",
          "Each verify step commits τ tokens on average: the accepted drafts plus the one the target writes itself. "
          "A step costs one target forward plus the drafting, so the speedup over the target alone is about "
          "τ / (1 + cost_draft / cost_target). Everything else in this lesson moves one of those two numbers.",
          "compare", "greedy", "the chart “Speedup: measured vs the formula” under the lanes, and each lane's τ chip",
          formula_takeaway, ("greedy",), "formula-vs-measured", formula_slide),
    Point(2, "A draft passes with probability min(1, p_target / p_draft), and the output stays the target's",
          "Above temperature 0 a drafted token d passes with probability min(1, p_target(d) / p_draft(d)); at the "
          "first rejection the target draws its own token from what is left, max(p_target − p_draft, 0). Together "
          "these make every token distributed exactly as the target alone would write it, whatever the drafter "
          "proposed. So each lane writes a different text from the baseline, yet with the same odds: counting the "
          "first tokens over many seeds shows it.",
          "why", "lossless", "the bars of each lane beside the target's exact probabilities, and each lane's p-value",
          rule_takeaway, ("lossless", "sampled"), "why-check-plot", rule_slide,
          "Drafts pass with min(1, p_target / p_draft): the odds stay the target's"),
    Point(3, "Acceptance is capped by how far the drafter is from the target",
          "A token drawn from the drafter's distribution q passes with probability Σ_x min(p(x), q(x)) = 1 − TV(p, q), "
          "where TV is the total-variation distance between the two whole distributions. No rule can accept more "
          "while staying lossless, so a drafter's acceptance is capped by how close it is to the target, position "
          "by position.",
          "compare", "sampled", "the chart “Per position: conditional acceptance and survival”: each lane's solid "
          "conditional acceptance beside its dashed 1 − TV", ceiling_takeaway, ("sampled",), "acceptance", ceiling_slide),
    Point(4, "Above temperature 0, acceptance is the overlap of two distributions, and temperature moves both",
          "At temperature T the target samples from softmax(logits / T): the higher T, the flatter its distribution. "
          "A draft x drawn from the drafter's q passes with probability min(1, p(x) / q(x)), whose mean is the "
          "overlap 1 − TV(p, q) of the two whole distributions, so above 0 a drafter pays for all of its "
          "distribution, not only its likeliest token. Each feature drafter here has a second checkpoint, trained "
          "against the target's whole distribution at T = 1, which the engine drafts with above 0 (its lane header "
          "says so).",
          "why", "temperatures", "the charts “τ against temperature” and “Acceptance is the overlap 1 − TV”, and the "
          "target's entropy under each temperature", temperature_takeaway, ("temperatures",), "why-temperatures-plot",
          temperature_slide, "Above T = 0, acceptance is the overlap of two distributions"),
    Point(5, "A serial drafter has a best K, and near it the speedup stalls",
          f"A serial drafter ({_serial_names()}) pays one forward per drafted token, so its cost grows with K, while "
          "τ grows ever more slowly: each position must survive all the ones before it. Past some K another draft "
          "costs more than it adds. Where that K lies depends on how a draft forward's cost stands to a verify's, "
          "and on how fast survival (every draft up to position k passing) shrinks along the draft.",
          "why", "sweeps", "each lane's measured line and its starred best K, beside its dotted formula",
          sweep_takeaway, ("sweeps",), "why-sweep", sweep_slide),
    Point(6, "Three bottlenecks: serial drafting, the acceptance ceiling, no order inside a block",
          "Classic drafters hit three limits: drafting K tokens takes K forwards in a row; survival (every draft up "
          "to position k passing) can only shrink along the draft, each position's acceptance capped by the ceiling "
          "of point 3; and a drafter that writes a whole block at once, to avoid the "
          "first limit, guesses each position without seeing what it put before it.",
          "compare", "greedy", "the timeline (a serial lane's run of orange draft bars before each blue verify) and "
          "the per-position chart (conditional acceptance and survival)", bottlenecks_takeaway, ("greedy", "parts"),
          "timeline", bottlenecks_slide),
    Point(7, "DFlash: one parallel pass, conditioned on the target",
          "DFlash drafts the whole block in one forward of a small block-diffusion model that reads the target's "
          "own hidden states, so drafting costs about the same for 2 tokens or 16. What is left between steps is "
          "bubbles and host work, which overlap is meant to hide under the next step's device work where the "
          "device computes apart from the host (a GPU).",
          "compare", "greedy", "the timeline's single orange bar per DFlash step against the serial lanes' runs, "
          "and the chart “Where the time went”", dflash_takeaway, ("greedy",), "timeline", dflash_slide),
    Point(8, "One pass can afford many candidates",
          "A chain verifies one guess per position; a tree verifies several at once: the target reads every node in "
          "one forward, each node seeing only its ancestors, and keeps the longest path from the root that it agrees "
          "with. A one-pass drafter already has a distribution for every position of its block, so the likeliest "
          "prefixes under a node budget make a tree for no more draft forwards than its chain (DDTree over DFlash). "
          "A serial drafter pays one more draft forward for each level of its tree (EAGLE-2's dynamic tree over AR). "
          "Either way a bigger tree raises τ, but every verified node adds to the verify: past some budget it "
          "stops paying.",
          "why", "trees", "the chart “Trees against their chains” (τ and speedup by node budget, each chain a dashed "
          "line) and, under it, what a verified node and a draft forward cost here", trees_takeaway, ("trees",),
          "why-trees-plot", trees_slide),
    Point(9, "DSpark: a Markov head orders the block, a scheduler decides how much to verify",
          "DSpark keeps DFlash's parallel pass and adds a cheap Markov head that samples the block left to right, "
          "each token seeing the one before it, and a confidence head whose scheduler verifies only as much of the "
          "block as is likely to pass. Switching each part off shows what it buys.",
          "why", "parts", "the variants' per-position acceptance and the table beside it", parts_takeaway,
          ("parts",), "why-parts-plot", parts_slide),
    Point(10, "Under load, every verified token is paid by the batch",
          "A server decodes many requests together, and as one finishes the next waiting one takes its place, so "
          "the batch stays full. One forward then serves the whole batch, so the target alone "
          "gets cheaper per token as the batch grows, while a verify reads every request's drafts: each token "
          "verified for one request takes room another request's token could have had. Acceptance does not change "
          "with the batch, so τ stays where it was while the speedup shrinks. A scheduler that verifies less "
          "when the batch is big can win back part of it: DSpark's measures, at each batch size, how many tokens "
          "a second a step that drafts commits and how many the target alone does, drafts only while drafting "
          "pays, and cuts each block from the batch's verify cost. The takeaway says whether it wins here. On "
          "the Compare tab, “Requests at once” runs your own prompt among "
          "others.",
          "why", "load", "the chart “Under load” (speedup and τ against requests at once, the published curves "
          "dashed grey)", load_takeaway, ("load",), "why-load-plot", load_slide,
          "Under load, each verified token costs the batch"),
)
TABS = ("lesson", "compare", "step", "why", "about")  # the tabs a link may open (?tab=)


def takeaway(point: Point, data: dict | None = None, slide: bool = False) -> str:
    """The point's takeaway from the recordings (or `data`), or why there is none; slide: its slide's short one."""
    data = recorded() if data is None else data
    missing = [key for key in point.needs if key not in data]
    if missing:
        return f"(not recorded yet: run scripts/record_lessons.py for {', '.join(missing)})"
    return (point.slide if slide else point.takeaway)(data)


assert all(p.tab in TABS and p.recording in RECORDINGS and p.chart and p.slide for p in POINTS) and BASELINE in METHOD_REGISTRY
