"""The one prompt the lesson's one-prompt figures show (the timeline, the hatched bars, the × marks), chosen by a rule:
of the first CHOICE_PROMPTS held-out prompts, run by every drafting lane at temperature 0 against the target alone,
the one whose speedups sit nearest each lane's median over them (the least sum over lanes of |log(speedup / the
lane's median)|). `measure_prompt_choice` makes that measurement; recorded into assets/lessons/prompt.json before the
comparisons, its prompt would be the one they are recorded on. No recording job writes it today
(scripts/record_lessons.py says why: the prompt it chose on the shipped family is longer than a slide's lanes show
whole), so the lesson shows the Compare tab's first example prompt, a rule fixed before any measurement.
Torch-free and Gradio-free; the words say which rule chose the prompt a comparison was recorded on.
"""

from __future__ import annotations

import json
import math

from engine.contract.methods import BASELINE
from engine.contract.presets import ASSETS_DIR, load_prompts
from engine.measure.lesson import FORMAT, measurement

from ..examples import example_prompts

CHOICE_FILE = ASSETS_DIR / "lessons" / "prompt.json"
CHOICE_PROMPTS = 12  # the first held-out prompts
CHOICE_ROUNDS = 2  # each lane's fastest of this many runs a prompt


def choose(speedups: list[dict[str, float]]) -> int:
    """The index of the prompt whose lanes' speedups ({lane: speedup} a prompt) sit nearest each lane's median."""
    lanes = [m for m in speedups[0] if all(m in row for row in speedups)]
    medians = {m: sorted(row[m] for row in speedups)[len(speedups) // 2] for m in lanes}
    return min(range(len(speedups)),
               key=lambda i: sum(abs(math.log(speedups[i][m] / medians[m])) for m in lanes))


def measure_prompt_choice(engine, settings, prompts: list[str] | None = None, rounds: int = CHOICE_ROUNDS,
                          stop=None) -> dict:
    """Every lane of `settings` (the lesson's comparison settings at temperature 0: the baseline and drafting chains,
    comparison_settings) on each of `prompts` (default the first CHOICE_PROMPTS held-out prompts), each lane's fastest
    of `rounds` runs; the prompts' speedups and the one `choose` picks, as a lesson measurement."""
    prompts = prompts or load_prompts()[:CHOICE_PROMPTS]
    lanes = settings.methods
    rows = []
    for prompt in prompts:
        walls = {}
        for m in lanes:
            config = settings.config(m)
            walls[m] = min(engine.generate(prompt, config, stop).summary.wall_s for _ in range(rounds))
        rows.append({m: round(walls[BASELINE] / walls[m], 3) for m in lanes if m != BASELINE})
    chosen = choose(rows)
    return measurement({"prompts": len(prompts), "speedups": rows, "chosen": chosen, "prompt": prompts[chosen],
                        "max_new_tokens": settings.max_new_tokens, "rounds": rounds}, engine.device_name)


def recorded_choice() -> dict | None:
    """The recorded choice (assets/lessons/prompt.json), read each time (a recording run writes it, then records the
    comparisons on its prompt); None where there is none or it does not read."""
    try:
        doc = json.loads(CHOICE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    data = doc.get("data") if isinstance(doc, dict) and doc.get("format") == FORMAT else None
    return doc if isinstance(data, dict) and isinstance(data.get("prompt"), str) else None


def chosen_prompt() -> str:
    """The prompt the lesson's comparisons are recorded on: the recorded choice's, else the first example prompt."""
    choice = recorded_choice()
    return choice["data"]["prompt"] if choice else example_prompts()[0]


def rule_words(prompt: str, short: bool = False) -> str:
    """By which rule `prompt` (a comparison's) was chosen: "held-out prompt 7 of 12, the one whose speedups sit nearest
    every lane's median over them" or "the Compare tab's first example prompt, fixed before any measurement";
    short: a few words, for a chart's title."""
    choice = recorded_choice()
    if choice and choice["data"]["prompt"] == prompt:
        data = choice["data"]
        if short:
            return "the median held-out prompt"
        return (f"held-out prompt {data['chosen'] + 1} of the first {data['prompts']}, the one whose speedups sit "
                "nearest every lane's median over them")
    if prompt == example_prompts()[0]:
        return "the first example prompt" if short else "the Compare tab's first example prompt, fixed before any " \
                                                        "measurement"
    return "a prompt of its own" if short else "a prompt no lesson rule chose"
