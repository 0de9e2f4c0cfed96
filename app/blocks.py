"""The block control's start on a page: a one-pass drafter drafts at the block it was trained on, read from its
checkpoint's config by the engine (`max_drafts`: a block-16 drafter drafts 15), unless the visitor asks for less.

The slider is shared by every one-pass lane and stops at the longest block a loaded drafter can draft; a lane whose
drafter was trained on a shorter block drafts its own (the run's end says so). Where the block sweep is recorded for
the drafters this page loads (assets/lessons/blocks.json: every one-pass lane at each block, at temperatures 0 and 1),
the slider starts at the block that measured fastest for them at the run's temperature: above 0 a long block
wastes more, since fewer of its tokens survive. Otherwise it starts at the trained block, and a page whose drafters
have no trained block at the settings' default."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from engine.contract.methods import METHOD_REGISTRY
from engine.contract.types import MAX_DRAFTS
from engine.measure.lesson import one_pass_methods

def sweep_data(recording: Mapping | None) -> dict | None:
    """The block sweep's data from its recording as the lesson reads it (app.lesson.recorded()["blocks"]), or None
    where there is none or it holds no temperatures."""
    data = recording.get("data") if isinstance(recording, Mapping) else None
    return data if isinstance(data, dict) and isinstance(data.get("temperatures"), dict) else None


def trained_block(methods: Sequence[str], caps: Mapping[str, int | None]) -> int | None:
    """The most drafts per block any loaded one-pass drafter was trained for (None: none has a trained block)."""
    blocks = [caps[m] for m in methods if METHOD_REGISTRY[m].one_pass and METHOD_REGISTRY[m].drafts and caps.get(m)]
    return min(MAX_DRAFTS, max(blocks)) if blocks else None


def sweep_temperature(temperature: float) -> str:
    """The recorded temperature a run's falls under: "0.0" (greedy), else "1.0" (sampling)."""
    return "0.0" if temperature == 0 else "1.0"


def recorded_best(methods: Sequence[str], caps: Mapping[str, int | None], sweep: Mapping | None, temperature: float,
                  labels: Mapping[str, str]) -> int | None:
    """The slider's value that measured fastest for this page's one-pass lanes at the run's temperature, in the block
    sweep's data (`sweep`: {"temperatures": {"0.0": {lane: k_sweep row}}}): each lane drafts min(value, its trained
    block), and a value scores the geometric mean of the lanes' recorded speedups there. None where the sweep is
    missing or does not hold every such lane with the drafter `labels` names (the label its runs give at this
    temperature): another checkpoint's sweep says nothing of this one."""
    lanes = one_pass_methods(methods)
    measured = ((sweep or {}).get("temperatures") or {}).get(sweep_temperature(temperature)) or {}
    if not lanes or any(m not in measured or m not in labels or measured[m].get("drafter") != labels[m]
                        for m in lanes):
        return None
    speedups = {m: {int(k): row["speedup"] for k, row in measured[m]["rows"].items()} for m in lanes}
    top = trained_block(lanes, caps) or MAX_DRAFTS
    scores = {}
    for value in sorted(set().union(*speedups.values())):
        drafted = [speedups[m].get(min(value, caps.get(m) or value)) for m in lanes]
        if value <= top and None not in drafted and min(drafted) > 0:
            scores[value] = math.exp(sum(map(math.log, drafted)) / len(drafted))
    return max(scores, key=scores.get) if scores else None


def block_default(methods: Sequence[str], caps: Mapping[str, int | None], asked: int, temperature: float = 0.0,
                  sweep: Mapping | None = None, labels: Mapping[str, str] | None = None) -> int:
    """The block slider's starting value at `temperature`: the recorded fastest block for the loaded drafters
    (recorded_best), else their trained block, else `asked` (the settings' default)."""
    best = recorded_best(methods, caps, sweep, temperature, labels or {})
    if best is not None:
        return best
    trained = trained_block(methods, caps)
    return asked if trained is None else trained


def follow_temperature(temperature: float, block: int, starts: Mapping[str, int]) -> int | None:
    """Where the slider goes when the visitor moves the temperature: from the start of one temperature (`starts`:
    {"0.0": greedy's, "1.0": sampling's}) to the other's; None (it stays) once the visitor has set it elsewhere."""
    here, there = sweep_temperature(temperature), "1.0" if temperature == 0 else "0.0"
    if starts[here] != starts[there] and block == starts[there]:
        return starts[here]
    return None
