"""The lesson: the argument for parallel drafting in eleven points, each shown with measured data.

Each point says what it claims in a few sentences, names the tab and the measurement that shows it, what to
look at there, and a takeaway computed from that measurement. The measurements are recorded on the embedded
models by `scripts/record_lessons.py` into assets/lessons/ (so a class sees the same numbers every time) with
the settings defined here; "Run it live" measures a smaller live size of each (LIVE_*), which its pages name.
The engine makes every measurement by its own recipe (engine/measure/lesson.py); this package sizes them, reads
the recordings and words what they show: the points here, their words by kind in `speed` (points 1, 5, 6, 7, 9),
`acceptance` (2, 3), `sweeps` (4, 8, 10) and `long` (11). Torch-free and Gradio-free: the Lesson tab
(app/tabs/lesson.py) draws it, the tests read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from engine.contract.methods import BASELINE, DFLASH, DSPARK, METHOD_REGISTRY
from engine.contract.presets import ASSETS_DIR, HELDOUT_PROMPTS, load_prompts
from engine.measure import lesson as recipes
from engine.measure.decide import read_prompt_file
from engine.measure.lesson import FORMAT, chain_methods, measurement, parts_method, serial_methods  # noqa: F401
from engine.process import run_on

from ..settings import Settings, default_settings
from ..comparison import Comparison, RecordError, drafter_words, read_comparison
from .acceptance import *  # noqa: F401,F403  (the points' words, one module a kind of point)
from .speed import *  # noqa: F401,F403
from .sweeps import *  # noqa: F401,F403
from .acceptance import ceiling_claim, ceiling_slide, ceiling_takeaway, rule_slide, rule_takeaway
from .speed import (bottlenecks_slide, bottlenecks_takeaway, dflash_slide, dflash_takeaway, formula_slide,
                    formula_takeaway, parts_slide, parts_takeaway, sweep_slide, sweep_takeaway)
from .sweeps import load_slide, load_takeaway, temperature_slide, temperature_takeaway, trees_slide, trees_takeaway
from .stamps import recorded_stamps, stamp_of, stamp_words
from .kinds import KIND_POINTS, kinds_markdown, kinds_sentence  # noqa: F401  (points 1, 7, 9 by kind)
from .choice import chosen_prompt, measure_prompt_choice  # noqa: F401  (the one prompt's rule, and its recording)
from .long import (LIVE_LONG_LANES, LIVE_LONG_PROMPTS, LIVE_LONG_TOKENS, LONG_PROMPTS, PAPERS, long_claim_from,
                   long_slide, long_takeaway)
from .long import measure_long, measure_long_live  # noqa: F401  (the recording's recipe and its live size)

LESSONS_DIR = ASSETS_DIR / "lessons"

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
LIVE_TIMING_RUNS = 2  # a lesson comparison's runs of each lane (the Compare tab's own: app/run/runner.py TIMING_RUNS)
# The block sweep: every one-pass lane at each block length of BLOCK_LADDER up to the block its drafter was trained
# on, at temperatures 0 and 1 (engine/measure/lesson.py blocks), over the first BLOCK_PROMPTS held-out prompts: where
# a one-pass lane's speed peaks, beside where a serial lane's does, and the block the Compare tab starts at for a
# run's temperature (app/blocks.py).
BLOCK_LADDER = (1, 2, 3, 4, 6, 8, 12, 16)
BLOCK_TEMPERATURES = (0.0, 1.0)
BLOCK_PROMPTS = 16
BLOCK_TOKENS = 64
BLOCK_ROUNDS = 2
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
LIVE_LOAD_LANES = (BASELINE, DFLASH, DSPARK, "dspark_verify_all")
# How far a speedup measured once at a live size moves between repeats, relative, either way, on a shared 2-core
# machine (the live K sweep's: all within 3.3 % at load 2.5, 43 of 48 within 8 % at load 3-5; docs/benchmarks.md "Run
# it live"): the live words call two speedups different only beyond twice it (speed.ONE_ROUND_NOISE), and the tests
# feed each word chooser its live size with every figure moved this far either way (tests/app/test_live_sizes.py).
LIVE_SPEED_NOISE = 0.08


def lesson_prompt() -> str:
    """The one prompt the lesson's comparisons are recorded on, by its rule (choice.py): the recorded choice's, else the
    first example prompt."""
    return chosen_prompt()


def comparison_settings(available, temperature: float) -> Settings:
    """The recorded comparisons' settings: every chain lane (the trees have their own point, 8), the lesson's prompt,
    64 new tokens."""
    chains = tuple(m for m in available if not METHOD_REGISTRY[m].tree)
    return replace(default_settings(available), prompt=lesson_prompt(), methods=chains,
                   temperature=temperature, max_new_tokens=NEW_TOKENS, seed=0, verify_rule="rejection")


def sweep_prompts() -> list[str]:
    return load_prompts()[:SWEEP_PROMPTS]


def live_sweep_prompts() -> list[str]:
    return load_prompts()[:LIVE_SWEEP_PROMPTS]


# --- the measurements, recorded or live ------------------------------------------------------------------
# Each sends one of the engine's recipes (engine/measure/lesson.py) with this lesson's sizes to where the models are
# (engine/process.py run_on): the engine's own process runs no app code. stop (here and below): a threading.Event
# that ends the measurement (engine.contract.types.Stopped).

def measure_sweeps(engine, prompts: list[str], ks=None, max_new_tokens: int | None = None, rounds: int = 2,
                   stop=None) -> dict:
    """Every serial lane at every K (default SWEEP_KS, SWEEP_TOKENS new tokens), and the block drafters once at
    their default block, against the baseline on the same prompts."""
    return run_on(engine, recipes.sweeps, prompts, tuple(ks or SWEEP_KS), max_new_tokens or SWEEP_TOKENS, rounds,
                  stop=stop)


def measure_sweeps_live(engine, prompts: list[str], stop=None) -> dict:
    """The K sweep at its live size (LIVE_SWEEP_*) on `prompts` (the lesson's: live_sweep_prompts())."""
    return measure_sweeps(engine, prompts, LIVE_SWEEP_KS, LIVE_SWEEP_TOKENS, LIVE_SWEEP_ROUNDS, stop=stop)


def measure_blocks(engine, stop=None) -> dict:
    """The block sweep of every one-pass lane at BLOCK_TEMPERATURES (recorded only: minutes on one core)."""
    return run_on(engine, recipes.blocks, load_prompts()[:BLOCK_PROMPTS], BLOCK_LADDER, BLOCK_TOKENS, BLOCK_ROUNDS,
                  BLOCK_TEMPERATURES, stop=stop)


def measure_check(engine, samples: int = LOSSLESS_SAMPLES, methods: list[str] | None = None, stop=None) -> dict:
    """The distribution check on the lesson's prompt, every chain lane (or `methods`)."""
    return run_on(engine, recipes.check, lesson_prompt(), samples, LOSSLESS_TEMPERATURE, methods, stop=stop)


def measure_check_live(engine, stop=None) -> dict:
    """The distribution check at its live size: LIVE_LOSSLESS_SAMPLES seeds, every drafting lane."""
    return measure_check(engine, LIVE_LOSSLESS_SAMPLES, stop=stop)


def measure_parts(engine, prompts: int = PARTS_PROMPTS, max_new_tokens: int = NEW_TOKENS, rounds: int = 2,
                  stop=None) -> dict:
    """The scheduled drafter beside each of its variants on the first `prompts` held-out prompts."""
    return run_on(engine, recipes.parts, load_prompts()[:prompts], max_new_tokens, rounds, stop=stop)


def measure_parts_live(engine, stop=None) -> dict:
    """The variants at their live size (LIVE_PARTS_*)."""
    return measure_parts(engine, LIVE_PARTS_PROMPTS, LIVE_PARTS_TOKENS, LIVE_PARTS_ROUNDS, stop=stop)


def measure_temperatures(engine, prompts: list[str] | None = None, temperatures=TEMPERATURES,
                         max_new_tokens: int = TEMPERATURE_TOKENS, argmax_at=ARGMAX_AT, stop=None) -> dict:
    """Every lane at every temperature against the baseline at the same temperature, on `prompts` (default the
    first TEMPERATURE_PROMPTS held-out prompts, split by their kind of text too)."""
    kinds = None
    if not prompts:  # the held-out file read once: the prompts and their kinds
        rows = read_prompt_file(HELDOUT_PROMPTS)[:TEMPERATURE_PROMPTS]
        prompts, kinds = [row["prompt"] for row in rows], heldout_kinds(rows)
    return run_on(engine, recipes.temperatures, prompts, tuple(temperatures), max_new_tokens, tuple(argmax_at),
                  stop=stop, kinds=kinds)


def heldout_kinds(rows: list[dict] | None = None) -> list[str] | None:
    """Each held-out prompt's kind of text (its "kind" label, scripts/label_prompts.py), or None where one lacks it;
    of `rows` where given (read_prompt_file's), else of the whole held-out file."""
    kinds = [row.get("kind") for row in (read_prompt_file(HELDOUT_PROMPTS) if rows is None else rows)]
    return None if None in kinds else kinds


def measure_temperatures_live(engine, stop=None) -> dict:
    """The temperature sweep small enough to run in front of a class (LIVE_TEMPERATURE_*)."""
    return measure_temperatures(engine, load_prompts()[:LIVE_TEMPERATURE_PROMPTS], LIVE_TEMPERATURES,
                                LIVE_TEMPERATURE_TOKENS, argmax_at=(), stop=stop)


def measure_trees(engine, prompts: list[str] | None = None, budgets=TREE_BUDGETS, max_new_tokens: int = TREE_TOKENS,
                  rounds: int = TREE_ROUNDS, stop=None) -> dict:
    """Every tree lane at every node budget in `budgets` beside the chain it grows from, against the baseline on
    `prompts` (default the first TREE_PROMPTS held-out prompts)."""
    prompts = prompts or load_prompts()[:TREE_PROMPTS]
    return run_on(engine, recipes.trees, prompts, tuple(budgets), max_new_tokens, rounds, stop=stop)


def measure_trees_live(engine, stop=None) -> dict:
    """The budget sweep at its live size (LIVE_TREE_*)."""
    return measure_trees(engine, load_prompts()[:LIVE_TREE_PROMPTS], LIVE_TREE_BUDGETS, LIVE_TREE_TOKENS,
                         LIVE_TREE_ROUNDS, stop=stop)


def measure_load(engine, prompts: list[str] | None = None, sizes=LOAD_SIZES, num_requests: int = LOAD_REQUESTS,
                 max_new_tokens: int = LOAD_TOKENS, rounds: int = LOAD_ROUNDS, lanes=None, stop=None,
                 pairs: int = LOAD_PAIRS, references: bool = True) -> dict:
    """Every batched lane at every batch size in `sizes` over the same `num_requests` requests (default the first
    held-out prompts), and at the largest size DSpark's scheduler against verifying everything over `pairs`
    adjacent pairs of runs; references: also transformers' batched generate (the Why tab's table shows it)."""
    prompts = prompts or load_prompts()[:num_requests]
    return run_on(engine, recipes.load, prompts, tuple(sizes), num_requests, max_new_tokens, rounds,
                  None if lanes is None else tuple(lanes), pairs, stop=stop, references=references)


def measure_load_live(engine, stop=None) -> dict:
    """The concurrency sweep at its live size (LIVE_LOAD_*), without transformers' generate beside it (half the
    time; the Why tab's table then leaves its row out)."""
    return measure_load(engine, None, LIVE_LOAD_SIZES, LIVE_LOAD_REQUESTS, LIVE_LOAD_TOKENS, LIVE_LOAD_ROUNDS,
                        LIVE_LOAD_LANES, stop=stop, pairs=0, references=False)


# --- what is recorded ------------------------------------------------------------------------------------

RECORDINGS = {"greedy": "greedy.json", "sampled": "sampled.json", "sweeps": "k_sweeps.json",
              "lossless": "lossless.json", "parts": "parts.json", "temperatures": "temperatures.json",
              "trees": "trees.json", "load": "load.json", "long": "long.json", "blocks": "blocks.json"}
COMPARISONS = ("greedy", "sampled")  # saved comparisons; the rest are plain measurements with FORMAT


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
    """"recorded 2026-12-06 on build 3f2a91c0d1, cpu, 1 thread": when, on which engine build and where a recording was
    measured, from its own provenance block (stamps.stamp_words: one without says so); a measurement made live
    (`live_measurement`) says so instead, with its time and its size beside the recording's: "measured live
    2026-12-03 14:05 UTC on cpu: 40 seeds × 4 lanes (the recording: 200 seeds × 5 lanes)"."""
    if isinstance(item, Comparison):
        key = next((k for k, v in recorded().items() if v is item), None)
        block = stamp_of(item) or (recorded_stamps().get(key) if key else None)
        return stamp_words(block, item.recorded_at, item.device)
    when = item.get("recorded_at", "")
    if item.get("live"):
        size = size_words(item)
        kind = measurement_kind(item)
        recording = recorded().get(kind) if kind else None
        beside = f" (the recording: {size_words(recording)})" if recording is not None and size_words(recording) else ""
        return (f"measured live {when[:10]} {when[11:16]} UTC on {item.get('device', '')}"
                + (f": {size}{beside}" if size else ""))
    return stamp_words(stamp_of(item), when, item.get("device", ""))


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
    if "bin" in data and "lanes" in data:
        return "long"
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
    if kind == "long":
        return _long_size(len(data["lanes"]), data["prompts"], data.get("context", 0), data.get("max_new_tokens"))
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


def _long_size(lanes: int, prompts: int, context: int, tokens: int | None = None) -> str:
    """"5 lanes × 16 prompts, each to the 512-position context", or with `tokens`: "…, 280 new tokens each"."""
    return (f"{_count(lanes, 'lane')} × {_count(prompts, 'prompt')}, "
            + (f"{tokens} new tokens each" if tokens else f"each to the {context}-position context"))


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
             "long": _long_size(len(LIVE_LONG_LANES), LIVE_LONG_PROMPTS, 0, LIVE_LONG_TOKENS) + (
                 f" (the recording: {size_words(recorded()['long'])})" if "long" in recorded() else
                 f" (the recording: every feature drafter × {LONG_PROMPTS} prompts)"),
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
    claim_from: Callable[[dict], str] | None = None  # the slide's title chosen from the numbers its chart shows

    @property
    def slide_claim(self) -> str:
        return self.claim or self.title


def slide_claim(point: Point, data: dict | None = None) -> str:
    """The title of the point's slide: chosen from `data` (default the recordings) where the point words it from its
    numbers, else its one-line claim."""
    return point.claim_from(recorded() if data is None else data) if point.claim_from else point.slide_claim


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
          "conditional acceptance beside its dashed 1 − TV", ceiling_takeaway, ("sampled",), "acceptance", ceiling_slide,
          claim_from=ceiling_claim),
    Point(4, "Above temperature 0, acceptance is the overlap of two distributions, and temperature moves both",
          "At temperature T the target samples from softmax(logits / T): the higher T, the flatter its distribution. "
          "A draft x drawn from the drafter's q passes with probability min(1, p(x) / q(x)), whose mean is the "
          "overlap 1 − TV(p, q) of the two whole distributions, so above 0 a drafter pays for all of its "
          "distribution, not only its likeliest token. EAGLE-3 and DFlash here have a second checkpoint, trained "
          "against the target's whole distribution at T = 1, which the engine drafts with above 0; DSpark's one "
          "checkpoint was trained on the target's greedy and sampled outputs together and scores its drafts with a "
          "confidence calibrated at T = 1 above 0 (each lane header says which).",
          "why", "temperatures", "the charts “τ and speedup against temperature” and “Acceptance is the overlap "
          "1 − TV”, and the target's entropy under each temperature", temperature_takeaway, ("temperatures",), "why-temperatures-plot",
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
    Point(11, "Long outputs: a drafter past the length it was trained on",
          "A drafter is trained on short stretches of text (256 tokens here) and then asked to draft far past them. "
          "Generating to the target's whole context shows where each feature drafter's τ goes once its view of the "
          "context is longer than anything it saw in training. Two answers: cut the drafter's view to the length it "
          "was trained on (a drafter window, as serving engines do; the target still reads everything), or let it "
          "tune itself as it goes: after each verify, a small training step on a copy of the drafter, on the tokens "
          "the target just wrote, which cost time of their own (“train” on the timeline). Either way the output is "
          "still the target's. " + PAPERS,
          "why", "long", "the chart “Acceptance by output position”: each drafter's solid line before and after the "
          "dash-dot mark where its trained window ends, beside its dashed window and dotted self-tuning lines",
          long_takeaway, ("long",), "why-long-plot", long_slide, "Past its trained length a drafter falls",
          claim_from=long_claim_from),
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
