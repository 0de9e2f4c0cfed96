"""Long outputs (lesson point 11): each feature drafter's τ against the position in its output, generated to the
embedded target's whole context, inside and past the window its drafter was trained on, beside the same drafter
cut to that window and tuning itself as it goes; 95 % intervals over the held-out prompts (engine/measure/positions.py),
recorded into assets/lessons/long.json. Torch-free and Gradio-free.
"""

from __future__ import annotations

from engine.contract.methods import DFLASH, DSPARK, EAGLE3, method_label
from engine.contract.presets import load_prompts
from engine.measure import positions as recipes
from engine.process import run_on

from ..draw.long_values import long_lanes, tau_mean, tau_text, train_share
from ..words import interval_trend

LONG_POINT = 11
LONG_PROMPTS = 16  # the first held-out prompts
LONG_BIN = 32  # output positions a bin
# The recording: every feature drafter as shipped, and the one that falls here (DFlash) cut to its window and tuning
# itself; the options exist for every feature drafter, which past their windows here hold their τ as shipped
LONG_LANES = ((DFLASH, "as shipped"), (DSPARK, "as shipped"), (EAGLE3, "as shipped"), (DFLASH, "window"),
              (DFLASH, "self-tuning"))
# The Run it live: the drafter that falls here, as shipped, on four prompts (the fall prompt by prompt needs them),
# each run LIVE_LONG_TOKENS new tokens, about 150 past the window: about 11 s of one core (12 s of CPU time on a busy
# one); its window and self-tuning lanes stay the recording's
LIVE_LONG_PROMPTS = 4
LIVE_LONG_TOKENS = 280
LIVE_LONG_LANES = ((DFLASH, "as shipped"),)
# About 5 minutes on one core with nothing else running (3 prompts of all nine lanes took 100 s of CPU time)
RECORDING_MINUTES = 5

# What the papers measured, beside which 512 positions are short (the lesson says so in words)
PAPERS = ("On long outputs the papers measure thousands of tokens where this target holds 512 positions. Test-Time "
          "Speculation (arXiv 2605.09329) finds DFlash, EAGLE-3 and PARD falling toward one token a step within a few "
          "thousand output tokens: on MATH-500 with Qwen3-8B, τ is about 3.7 in the first 10K tokens and 1.5 in the "
          "last 10K, EAGLE-3 about 1.1 past 20K; distilling the drafter online from the verify step lifts τ by 41 % on "
          "average (72 % at most), more the longer the output. Users of z-lab's DFlash report 200 tokens/s at a "
          "500-token prompt against 24 at 64K, which serving engines answer with a drafter window; ports report "
          "per-token acceptance falling from 73 % to 13 % past the trained length. Here the drafters were trained on "
          "256-token windows, so the same cause shows within a few hundred tokens.")


def measure_long(engine, prompts: int = LONG_PROMPTS, lanes=LONG_LANES, bin_size: int = LONG_BIN,
                 max_new_tokens: int | None = None, stop=None) -> dict:
    """`lanes` ((method, option) pairs; None: every feature drafter under every option) on the first `prompts`
    held-out prompts (the recording's size by default), each run to the target's context or `max_new_tokens`."""
    return run_on(engine, recipes.lesson_measurement, load_prompts()[:prompts],
                  None if lanes is None else [list(lane) for lane in lanes], bin_size, max_new_tokens, stop=stop)


def measure_long_live(engine, stop=None) -> dict:
    return measure_long(engine, LIVE_LONG_PROMPTS, LIVE_LONG_LANES, max_new_tokens=LIVE_LONG_TOKENS, stop=stop)


FALLS = {"falls": "falls", "holds": "holds, within the intervals", "rises": "rises"}
AGAINST = {"rises": "lifts it", "holds": "leaves it within the intervals", "falls": "lowers it"}
SHORT_TREND = {"falls": "falls", "holds": "holds", "rises": "rises"}
SHORT_AGAINST = {"rises": "lifts it", "holds": "no clear change", "falls": "lowers it"}


def _trend(start: dict | None, end: dict | None, paired: dict | None = None) -> str | None:
    """How τ moves from `start` to `end`: from their prompt-by-prompt difference where the measurement has it (the
    same prompts on both sides, so what differs between prompts cancels), else from their two intervals."""
    if paired:
        return "falls" if paired["high"] < 0 else "rises" if paired["low"] > 0 else "holds"
    if not (start and end and start.get("tau") and end.get("tau")):
        return None
    return interval_trend(start["tau"], end["tau"])


def _difference(paired: dict | None) -> str:
    if not paired:
        return ""
    return f"; prompt by prompt {paired['mean']:+.2f} ({paired['low']:+.2f} to {paired['high']:+.2f})"


def method_words(lanes: dict, method: str, short: bool = False) -> str:
    """One drafter's sentence: its τ inside and past its trained window, then what the window and self-tuning do to
    τ past it, each verb chosen from the intervals."""
    shipped = lanes.get((method, "as shipped"))
    if shipped is None or "past" not in shipped:
        return ""
    name, window = method_label(method), shipped.get("trained_window")
    fall = _trend(shipped.get("inside"), shipped.get("past"), shipped.get("fall"))
    if short:  # a slide's few words: the means, each verb still chosen from the intervals
        parts = [f"{name} {tau_mean(shipped.get('inside'))} → {tau_mean(shipped['past'])}"
                 + (f" ({SHORT_TREND[fall]})" if fall else "")]
    else:
        parts = [f"{name} drafts τ {tau_text(shipped.get('inside'))} inside its {window}-token trained window and "
                 f"{tau_text(shipped['past'])} past it{_difference(shipped.get('fall'))}"
                 + (f": it {FALLS[fall]}" if fall else "")]
    for option, what in (("window", f"cut to its {window}-token window"), ("self-tuning", "tuning itself")):
        lane = lanes.get((method, option))
        trend = _trend(shipped["past"], (lane or {}).get("past"), (lane or {}).get("gain_past"))
        if trend is None:
            continue
        if short:
            parts.append(f"{option} {tau_mean(lane['past'])} ({SHORT_AGAINST[trend]})")
            continue
        cost = (f", {train_share(lane):.0%} of its time spent training" if option == "self-tuning" else "")
        parts.append(f"{what}, {tau_text(lane['past'])} past it{_difference(lane.get('gain_past'))} "
                     f"({option} {AGAINST[trend]}{cost})")
    return (", " if short else "; ").join(parts) + ("" if short else ".")


def long_words(item: dict | None, short: bool = False) -> str:
    """The point's takeaway from a long-output measurement: every drafter's sentence, with the prompts and sizes."""
    lanes = long_lanes(item)
    if not lanes:
        return "Long outputs: not recorded yet (python scripts/record_lessons.py long)."
    data = item["data"]
    lengths = sorted(data.get("prompt_tokens") or [0])
    methods = list(dict.fromkeys(m for m, _ in lanes))
    sentences = [w for w in (method_words(lanes, m, short) for m in methods) if w]
    if short:
        return f"τ inside → past the trained window, {data['prompts']} prompts: " + "; ".join(sentences) + "."
    return (f"Over {data['prompts']} held-out prompts of {lengths[0]}–{lengths[-1]} tokens, each generated to the "
            f"target's {data['context']} positions{_tokens(data)} (τ with its 95 % interval, and each change prompt by "
            "prompt with its own; past the window means the step's anchor sits past the drafter's trained length, "
            "prompt included): " + " ".join(sentences))


def _tokens(data: dict) -> str:
    return f" or {data['max_new_tokens']} new tokens" if data.get("max_new_tokens") else ""


def long_claim(item: dict | None) -> str:
    """The slide's title from the numbers: whether the shipped drafters fall past their window and the window helps."""
    lanes = long_lanes(item)
    falls = [m for (m, o), lane in lanes.items()
             if o == "as shipped" and _trend(lane.get("inside"), lane.get("past"), lane.get("fall")) == "falls"]
    if not falls:
        return "Past their trained window, the drafters here hold their τ"
    names = " and ".join(method_label(m) for m in falls)
    windowed = {m: lanes.get((m, "window")) or {} for m in falls}
    helped = [m for m in falls if _trend(lanes[m, "as shipped"].get("past"), windowed[m].get("past"),
                                         windowed[m].get("gain_past")) == "rises"]
    if helped:
        return f"Past its trained window {names} falls; cut to that window it recovers"
    return f"Past its trained window {names} falls"


def long_takeaway(data: dict) -> str:
    return long_words(data.get("long"))


def long_slide(data: dict) -> str:
    return long_words(data.get("long"), short=True)


def long_claim_from(data: dict) -> str:
    return long_claim(data.get("long"))
