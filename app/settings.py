"""A comparison's settings: every control of the Compare tab, its default, and the check that makes any value safe.

One parser per control turns a raw value into a setting or raises `SettingError` with one line. The run
handler uses them on whatever a browser or an API client sends (a string, None, a list...), and refuses the
run with that line; links.py uses them on a link, where each bad value gives one message and its control's
default. Pure and torch-free.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from engine.contract.methods import DEFAULT_LANES, METHOD_REGISTRY, method_id, method_names
from engine.contract.presets import OVERLAP_CHOICES, SCHEDULERS, VERIFY_RULES
from engine.text import repair_text
from engine.contract.types import (INTEGER_SETTINGS, MAX_PROMPT_CHARS, MIN_SAMPLING_TEMPERATURE, RANGES, GenerationConfig,
                          temperature_too_low)

from .examples import example_prompts

ENGINE_DEFAULTS = GenerationConfig()
MAX_NEW_TOKENS_UI = 512  # the slider's end; the engine allows more from the CLI
MAX_REQUESTS_AT_ONCE_UI = 32  # the slider's end: the published curves' largest concurrency (the engine takes 64)
# The draft length, drafts per step, is set per way of drafting (Method.drafting: "serial" or "one_pass"), each by
# the control drafts_per_step_<drafting>, which starts at the largest default of the methods that draft so
DEFAULT_DRAFTS_PER_STEP = {d: max(m.default_drafts for m in METHOD_REGISTRY.values() if m.drafts and m.drafting == d)
                           for d in ("serial", "one_pass")}
MAX_EXACT_FLOAT_INT = 2**53  # a float this large may be a neighbour of the integer it was meant to be


class SettingError(ValueError):
    """A value a control cannot take; the message is one line naming the control and the value."""


@lru_cache(maxsize=1)
def default_prompt() -> str:
    return example_prompts()[0]


@dataclass(frozen=True)
class Settings:
    """Every control of one comparison (the page's "show drafts" is display only and not part of it)."""

    prompt: str = field(default_factory=default_prompt)
    methods: tuple[str, ...] = DEFAULT_LANES  # lanes to run, in registry order
    temperature: float = ENGINE_DEFAULTS.temperature
    seed: int = ENGINE_DEFAULTS.seed
    max_new_tokens: int = ENGINE_DEFAULTS.max_new_tokens
    drafts_per_step_serial: int = DEFAULT_DRAFTS_PER_STEP["serial"]  # K of the serial drafters (AR, Classic)
    drafts_per_step_one_pass: int = DEFAULT_DRAFTS_PER_STEP["one_pass"]  # tokens per block (DFlash, DSpark)
    verify_rule: str = ENGINE_DEFAULTS.verify_rule
    scheduler: str = ENGINE_DEFAULTS.scheduler
    confidence_threshold: float = ENGINE_DEFAULTS.confidence_threshold
    overlap: str = "auto"  # a key of OVERLAP_CHOICES
    tree_nodes: int = ENGINE_DEFAULTS.tree_nodes  # the tree lanes' node budget (AR tree, DFlash tree)
    requests_at_once: int = ENGINE_DEFAULTS.requests_at_once  # the prompt among this many requests, one batch

    def config(self, method: str) -> GenerationConfig:
        """The engine's configuration for one lane."""
        return GenerationConfig(method=method, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                seed=self.seed, drafts_per_step=getattr(self, drafts_per_step_control(method)),
                                verify_rule=self.verify_rule, scheduler=self.scheduler,
                                confidence_threshold=self.confidence_threshold,
                                overlap=OVERLAP_CHOICES[self.overlap], tree_nodes=self.tree_nodes,
                                requests_at_once=self.requests_at_once)


def drafts_per_step_control(method: str) -> str:
    """The control (a Settings field, a saved comparison's setting) that sets `method`'s drafts per step."""
    return f"drafts_per_step_{METHOD_REGISTRY[method].drafting}"


def default_settings(available: Sequence[str] | None = None) -> Settings:
    """The page's defaults on a server that can run `available` (default: every registered method)."""
    available = method_names() if available is None else available
    return Settings(methods=tuple(m for m in DEFAULT_LANES if m in available) or tuple(available[:1]))


# --- one parser per control ---------------------------------------------------------------------------

def quoted(value: Any) -> str:
    """A value as a message quotes it: repr (so control characters and lone surrogates stay visible), cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def parse_prompt(value: Any) -> str:
    if not isinstance(value, str):
        raise SettingError(f"the prompt must be text, got {type(value).__name__}")
    if len(value) > MAX_PROMPT_CHARS:
        raise SettingError(f"the prompt is {len(value):,} characters; at most {MAX_PROMPT_CHARS:,} are accepted")
    if not value.strip():
        raise SettingError("the prompt is empty")
    return repair_text(value)


def _number(value: Any, name: str, expect: str) -> float | int:
    """An int or float as sent (bools refused) or parsed from text; finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SettingError(f"{name} must be {expect}, got {quoted(value)}")
    number = value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?[0-9]{1,30}", text):
            return int(text)
        try:
            number = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            raise SettingError(f"{name} must be {expect}, got {quoted(value)}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise SettingError(f"{name} must be {expect}, got {quoted(value)}")
    return number


def integer_parser(name: str, low: int, high: int) -> Callable[[Any], int]:
    expect = f"a whole number from {low} to {high}"

    def parse(value: Any) -> int:
        number = _number(value, name, expect)
        if isinstance(number, float):  # a float is taken only where it is exactly the integer meant
            if abs(number) >= MAX_EXACT_FLOAT_INT:
                how = "write it in digits" if isinstance(value, str) else "send it as text, in digits"
                raise SettingError(f"{name} {quoted(value)} is too large to be exact as a float; {how}")
            if not number.is_integer():
                raise SettingError(f"{name} must be {expect}, got {quoted(value)}")
            number = int(number)
        if not low <= number <= high:
            raise SettingError(f"{name} must be {expect}, got {quoted(value)}")
        return number

    return parse


def float_parser(name: str, low: float, high: float) -> Callable[[Any], float]:
    expect = f"a number from {low:g} to {high:g}"

    def parse(value: Any) -> float:
        number = _number(value, name, expect)
        try:
            number = float(number)
        except OverflowError:  # an integer with hundreds of digits
            raise SettingError(f"{name} must be {expect}, got {quoted(value)}") from None
        if not low <= number <= high:
            raise SettingError(f"{name} must be {expect}, got {quoted(value)}")
        return number

    return parse


def choice_parser(name: str, options: Sequence[str]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise SettingError(f"unknown {name} {quoted(value)}; choose one of {', '.join(options)}")
        return value

    return parse


def parse_methods(value: Any, available: Sequence[str] | None = None) -> tuple[str, ...]:
    """A comma list (a link) or a list (the checkboxes) of method names; returned in registry order."""
    available = method_names() if available is None else available
    if isinstance(value, str):
        names = [method_id(name.strip()) for name in value.split(",") if name.strip()]
    elif isinstance(value, (list, tuple)):
        names = [method_id(name) for name in value]
    else:
        raise SettingError(f"lanes must be a list of methods, got {quoted(value)}")
    if not names:
        raise SettingError("choose at least one lane")
    for name in names:
        if not isinstance(name, str) or name not in METHOD_REGISTRY:
            raise SettingError(f"unknown method {quoted(name)}; choose from {', '.join(available)}")
        if name not in available:
            raise SettingError(f"this server has no {name} lane; it runs {', '.join(available)}")
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise SettingError(f"method {repeated[0]!r} is listed more than once")
    return tuple(m for m in METHOD_REGISTRY if m in names)


def _ranged(name: str, high=None, words: str | None = None) -> Callable[[Any], Any]:
    """A control's parser over the engine's own range for `name` (engine/contract/types.py RANGES); `high` narrows it."""
    engine_words, low, engine_high = RANGES[name]
    make = integer_parser if name in INTEGER_SETTINGS else float_parser
    return make(words or engine_words, low, engine_high if high is None else high)


def parse_temperature(value: Any) -> float:
    """0 (greedy) or a temperature that samples: the engine's range, and never a positive one too low to sample."""
    temperature = _ranged("temperature")(value)
    if 0 < temperature < MIN_SAMPLING_TEMPERATURE:
        raise SettingError(temperature_too_low(temperature))
    return temperature


PARSERS: dict[str, Callable[[Any], Any]] = {
    "prompt": parse_prompt,
    "methods": parse_methods,
    "temperature": parse_temperature,
    "seed": _ranged("seed"),
    "max_new_tokens": _ranged("max_new_tokens", high=MAX_NEW_TOKENS_UI),
    "drafts_per_step_serial": _ranged("drafts_per_step"),
    "drafts_per_step_one_pass": _ranged("drafts_per_step", words="tokens per block"),
    "verify_rule": choice_parser("verification rule", VERIFY_RULES),
    "scheduler": choice_parser("scheduler", SCHEDULERS),
    "confidence_threshold": _ranged("confidence_threshold"),
    "overlap": choice_parser("overlap", tuple(OVERLAP_CHOICES)),
    "tree_nodes": _ranged("tree_nodes"),
    "requests_at_once": _ranged("requests_at_once", high=MAX_REQUESTS_AT_ONCE_UI),
}
assert set(PARSERS) == {f.name for f in fields(Settings)}
# Controls added after comparison files were first saved: a file without one ran as its default does now.
LATER_CONTROLS = {"tree_nodes": Settings.tree_nodes, "requests_at_once": Settings.requests_at_once}


def parse_setting(name: str, value: Any, available: Sequence[str]) -> Any:
    return parse_methods(value, available) if name == "methods" else PARSERS[name](value)


def parse_controls(values: Mapping[str, Any], available: Sequence[str] | None = None) -> Settings:
    """The run handler's check: every control's raw value, or SettingError naming the first bad one."""
    return Settings(**{name: parse_setting(name, values[name], available) for name in PARSERS})


def parse_show_drafts(value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingError(f"show drafts must be true or false, got {value!r:.40}")
    return value


# The Run button's inputs by name, in the order the page and the API send them (app/run/plan.py reads them by name)
RUN_INPUTS = ("prompt", "methods", "temperature", "drafts_per_step_serial", "drafts_per_step_one_pass",
              "max_new_tokens", "seed", "verify_rule", "show_drafts", "scheduler", "confidence_threshold", "overlap",
              "tree_nodes", "requests_at_once")
