"""Share links: a whole comparison as URL query parameters (settings.py checks each value).

A link carries its own settings (a restart loses nothing), named as the CLI's options: `prompt`, `methods`
(a comma list), `temperature`, `seed`, `max_new_tokens`, `draft_len` (the serial drafters' K), `block_len`
(tokens per block of the one-pass drafters), `verify_rule`, `scheduler`, `confidence_threshold`, `overlap`,
`tree_nodes` (the tree lanes' node budget), `requests_at_once` (the prompt among that many requests), and `preset` (which models the link was made on; only compared with the server's). Pure and torch-free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from urllib.parse import quote, urlencode

from engine.contract.presets import PRESETS

from .settings import PARSERS, SettingError, Settings, default_settings, parse_setting, quoted

MAX_MESSAGES = 12  # a link with hundreds of bad parameters gets this many lines, then a count

# The two draft lengths keep, in links, the names of the CLI's options: a link made before the controls had their
# own names opens the same comparison. A comparison file saved before they were named drafts_per_step_<drafting>
# says serial_k and drafts_per_block, and opens the same too.
LINK_NAMES = {"drafts_per_step_serial": "draft_len", "drafts_per_step_one_pass": "block_len"}  # control -> link
EARLIER_FILE_NAMES = {"serial_k": "drafts_per_step_serial", "drafts_per_block": "drafts_per_step_one_pass"}
CONTROL_NAMES = {**{link: control for control, link in LINK_NAMES.items()}, **EARLIER_FILE_NAMES}  # -> control
LINK_PARAMETERS = (*(LINK_NAMES.get(name, name) for name in PARSERS), "preset")


def control_name(parameter: str) -> str:
    """The control a link parameter (or a saved file's setting) sets: its own name, or the renamed draft length's."""
    return CONTROL_NAMES.get(parameter, parameter)


# Which tab opens and which lesson point it shows (app/tabs/lesson.py reads them), the lesson as slides
# (app/tabs/slides.py), projector mode (app/draw/projector.py), and the operator's pin key (app/tabs/compare.py: the
# link's recorded run is never evicted)
PAGE_PARAMETERS = ("tab", "lesson", "present", "projector", "pin")


def _ignored(name: str) -> bool:
    """Gradio's and Hugging Face Spaces' own parameters (`__theme`, `__sign`, ...; `view=api`), and the page's
    own, which are not a comparison's."""
    return name.startswith("__") or name == "view" or name in PAGE_PARAMETERS


def parse_query(params: Mapping[str, str] | Iterable[tuple[str, str]], defaults: Settings | None = None,
                available: Sequence[str] | None = None, preset: str | None = None) -> tuple[Settings, list[str]]:
    """A link's settings: each bad, repeated or unknown parameter gives one message, and a bad value its
    control's default. `preset` is the server's; a link made on another one gets a message and runs here."""
    defaults = defaults or default_settings(available)
    items = list(params.items() if isinstance(params, Mapping) else params)
    counts = Counter(name for name, _ in items)
    values, messages = {}, []
    for name, value in items:
        control = control_name(name)
        if _ignored(name):
            continue
        if name not in LINK_PARAMETERS:
            messages.append(f"unknown link parameter {quoted(name)} ignored")
        elif counts[name] > 1:
            if control not in values:
                messages.append(f"{name} is given {counts[name]} times in the link; using the default")
                values[control] = getattr(defaults, control, None)
        elif name == "preset":
            if preset is not None and value != preset:
                known = "" if value in PRESETS else " (not a preset SpecLab knows)"
                messages.append(f"this link was made with preset {quoted(value)}{known}; "
                                f"this server runs preset {preset}, so its models may write other text")
        else:
            try:
                values[control] = parse_setting(control, value, available)
            except SettingError as exc:
                messages.append(f"{exc}; using the default")
    values.pop("preset", None)
    if len(messages) > MAX_MESSAGES:
        messages = [*messages[:MAX_MESSAGES - 1], f"and {len(messages) - MAX_MESSAGES + 1} more problems"]
    return Settings(**{f.name: values.get(f.name, getattr(defaults, f.name)) for f in fields(Settings)}), messages


def is_link(params: Mapping[str, str] | Iterable[tuple[str, str]]) -> bool:
    """Does the address carry any of a comparison's parameters (so opening it should run the comparison)?"""
    items = params.items() if isinstance(params, Mapping) else params
    return any(name in LINK_PARAMETERS and name != "preset" for name, _ in items)


def _number_text(value: float) -> str:
    text = repr(float(value))  # repr round-trips exactly
    return text[:-2] if text.endswith(".0") else text


def build_query(settings: Settings, preset: str | None = None) -> str:
    """The query string (without "?") that `parse_query` reads back into the same settings. Every control
    is written, so a link means the same comparison even if a later version changes a default."""
    pairs = [("methods", ",".join(settings.methods))]
    for f in fields(Settings):
        value = getattr(settings, f.name)
        if f.name in ("prompt", "methods"):
            continue
        pairs.append((LINK_NAMES.get(f.name, f.name), _number_text(value) if isinstance(value, float) else str(value)))
    if preset:
        pairs.append(("preset", preset))
    pairs.append(("prompt", settings.prompt))  # last: the long one
    return urlencode(pairs, quote_via=quote, safe=",")
