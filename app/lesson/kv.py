"""What KV injection buys (lesson point 7): DFlash beside the same recipe trained without the target's features, τ and
speedup each with its 95 % interval over the held-out prompts (engine/measure/lesson.py kv_injection), recorded into
assets/lessons/kv.json once that drafter is shipped (`python -m engine.train dflash --no-target-features`, then
`python scripts/record_lessons.py kv`). Until then the point says the drafter is not shipped and shows no figure.
Torch-free and Gradio-free.
"""

from __future__ import annotations

import json
from functools import cache

from engine.contract.methods import DFLASH, method_label
from engine.contract.presets import ASSETS_DIR, DEFAULT_PRESET, PRESETS, ablation_shipped, load_prompts
from engine.measure import lesson as recipes
from engine.process import run_on

from ..words import interval_trend

KV_POINT = 7
KV_FILE = ASSETS_DIR / "lessons" / "kv.json"
KV_PROMPTS = 16  # the first held-out prompts
KV_TOKENS = 64
KV_ROUNDS = 2
# What the lesson says the ablation is, and the command that trains it (docs/embedded-models.md)
TRAIN_COMMAND = "python -m engine.train dflash --no-target-features"


def ablation_checkpoint(method: str = DFLASH) -> str | None:
    """The embedded preset's checkpoint of `method` trained without the target's features (a folder of assets/)."""
    return PRESETS[DEFAULT_PRESET].ablation_drafters.get(method)


def measure_kv(engine, prompts: int = KV_PROMPTS, max_new_tokens: int = KV_TOKENS, rounds: int = KV_ROUNDS,
               stop=None) -> dict:
    """DFlash beside its ablation on the first `prompts` held-out prompts (the recording's size by default)."""
    return run_on(engine, recipes.kv_injection, load_prompts()[:prompts], max_new_tokens, rounds, stop=stop)


def read_kv(text: str) -> dict:
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != recipes.FORMAT or "ablations" not in doc.get("data", {}):
        raise ValueError("not a SpecLab KV-injection measurement")
    return doc


@cache
def recorded_kv() -> dict | None:
    """The recording in assets/lessons/kv.json, read once; None where there is none."""
    return read_kv(KV_FILE.read_text(encoding="utf-8")) if KV_FILE.exists() else None


def kv_item(data: dict) -> dict | None:
    """The KV measurement a page shows: `data`'s own ("kv", a live one or a test's), else the recording."""
    return data.get("kv") if "kv" in data else recorded_kv()


def _with_interval(value: float, interval: dict, unit: str = "") -> str:
    return f"{value:.2f}{unit} ({interval['low']:.2f}–{interval['high']:.2f})"


TAU_VERDICT = {"rises": "lift τ", "falls": "lower τ", "holds": "leave τ where it was, within the intervals"}
SPEED_VERDICT = {"rises": "pay", "falls": "cost more than they save",
                 "holds": "make no difference to the speed beyond the intervals"}
# The same verdicts on a slide, where the takeaway must stay short (τ's, then the speed's)
_TAU_SHORT = {"rises": "lift τ", "falls": "lower τ", "holds": "leave τ within the intervals"}
_SPEED_SHORT = {"rises": "pay", "falls": "cost time", "holds": "leave speed within the intervals"}
SHORT_VERDICT = {(t, s): f"{_TAU_SHORT[t]} and {_SPEED_SHORT[s]}" for t in _TAU_SHORT for s in _SPEED_SHORT}
SHORT_VERDICT["holds", "holds"] = "leave τ and speed within the intervals"


def not_shipped_words() -> str:
    checkpoint = ablation_checkpoint()
    return (f"What conditioning on the target buys is not measured here yet: the ablation, the same recipe trained "
            f"without the target's features (assets/{checkpoint}, `{TRAIN_COMMAND}`), is still training and not "
            "shipped.")


def kv_words(data: dict, short: bool = False) -> str:
    """The point's sentence on KV injection, chosen from the measurement's intervals (a difference is named only
    where the two 95 % intervals leave each other out); or, without one, why there is none."""
    from ..draw.kv import kv_rows  # here, not at the top: app.lesson imports without plotly (the device machine)

    rows = kv_rows(kv_item(data))
    if rows is None:
        checkpoint = ablation_checkpoint()
        if checkpoint is None or not ablation_shipped(checkpoint):
            return ("KV injection: the ablation without the target's features is still training, not shipped."
                    if short else not_shipped_words())
        return "KV injection: not recorded yet (python scripts/record_lessons.py kv)."
    method, kv, alone, prompts = rows
    tau, speed = interval_trend(alone["tau_interval"], kv["tau_interval"]), \
        interval_trend(alone["speedup_interval"], kv["speedup_interval"])
    name = method_label(method)
    if short:
        over = "Over" if "kv" in data else "Recorded over"  # on a live slide, what was not measured live says so
        return (f"{over} {prompts} held-out prompts, without target features: τ "
                f"{_with_interval(alone['tau'], alone['tau_interval'])}, "
                f"{_with_interval(alone['speedup'], alone['speedup_interval'], '×')}; with them "
                f"{_with_interval(kv['tau'], kv['tau_interval'])}, "
                f"{_with_interval(kv['speedup'], kv['speedup_interval'], '×')}: they {SHORT_VERDICT[tau, speed]}.")
    return (f"Trained by the same recipe without the target's features, {name}'s drafter reaches τ "
            f"{_with_interval(alone['tau'], alone['tau_interval'])} and "
            f"{_with_interval(alone['speedup'], alone['speedup_interval'], '×')}; with them, τ "
            f"{_with_interval(kv['tau'], kv['tau_interval'])} and "
            f"{_with_interval(kv['speedup'], kv['speedup_interval'], '×')} (95 % intervals over {prompts} held-out "
            f"prompts): the target's features {TAU_VERDICT[tau]} and {SPEED_VERDICT[speed]}.")
