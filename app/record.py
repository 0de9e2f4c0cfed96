"""A comparison as one JSON document: every lane's trace, the settings, the device and the versions.

Written by the Compare tab after a run ("Download this comparison"), read back to show a run without
running any model (the Compare tab's "Open a saved comparison", the Step-through tab). Each session's last
comparison is also kept here, bounded, so other tabs can show it. Torch-free.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from engine.methods import METHOD_REGISTRY
from engine.types import Step

from .links import SettingError, parse_controls

FORMAT = "speclab-comparison/1"
MAX_FILE_BYTES = 20_000_000  # a 512-token comparison of five lanes is a few MB
MAX_SESSIONS = 64  # last comparisons kept in memory, oldest evicted


class RecordError(ValueError):
    """A file that is not a comparison SpecLab can show; its message is one clear line."""


@dataclass(frozen=True)
class Comparison:
    settings: dict  # app.links.Settings as a dict (settings_dict), checked when read from a file
    lanes: dict[str, list[Step]]  # method -> its steps (the prefill first), in display order
    drafters: dict[str, str] = field(default_factory=dict)  # method -> which drafter ran it
    device: str = ""
    preset: str = ""
    versions: dict = field(default_factory=dict)
    recorded_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "settings": self.settings, "device": self.device, "preset": self.preset,
                           "versions": self.versions, "recorded_at": self.recorded_at, "drafters": self.drafters,
                           "lanes": {m: [s.to_dict() for s in steps] for m, steps in self.lanes.items()}},
                          ensure_ascii=False)


def read_comparison(data: bytes | str) -> Comparison:
    """Parse and check a saved comparison; anything malformed or oversized raises RecordError (one line)."""
    if len(data) > MAX_FILE_BYTES:
        raise RecordError(f"the file is {len(data):,} bytes; a saved comparison is at most {MAX_FILE_BYTES:,}")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a JSON file ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RecordError(f"not a SpecLab comparison (expected \"format\": \"{FORMAT}\")")
    lanes = doc.get("lanes")
    if not isinstance(lanes, dict) or not lanes:
        raise RecordError("the comparison has no lanes")
    unknown = [m for m in lanes if m not in METHOD_REGISTRY]
    if unknown:
        raise RecordError(f"unknown method {unknown[0]!r} in the file")
    try:
        steps = {m: [Step.from_dict(s) for s in lanes[m]] for m in METHOD_REGISTRY if m in lanes}
        for method, trace in steps.items():
            if not trace or trace[0].kind != "prefill":
                raise ValueError(f"lane {method} does not start with its prefill")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"a step in the file is malformed ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(doc.get("settings"), dict):
        raise RecordError("the comparison has no settings")
    try:  # checked like the page's own controls, so every reader of a comparison can trust its settings
        settings = settings_dict(parse_controls(doc["settings"]))
    except SettingError as exc:
        raise RecordError(f"the comparison's settings are invalid: {exc}") from None
    except KeyError as exc:
        raise RecordError(f"the comparison's settings lack {exc}") from None
    return Comparison(settings=settings, lanes=steps, drafters={str(k): str(v) for k, v in (doc.get("drafters") or {}).items()},
                      device=str(doc.get("device", "")), preset=str(doc.get("preset", "")),
                      versions=dict(doc.get("versions") or {}), recorded_at=str(doc.get("recorded_at", "")))


class LastComparisons:
    """Each browser session's last comparison, at most MAX_SESSIONS of them (oldest evicted)."""

    def __init__(self, limit: int = MAX_SESSIONS):
        self._items: OrderedDict[str, Comparison] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def remember(self, session: str, comparison: Comparison) -> None:
        with self._lock:
            self._items[session] = comparison
            self._items.move_to_end(session)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)

    def last(self, session: str) -> Comparison | None:
        with self._lock:
            return self._items.get(session)

    def forget(self, session: str) -> None:
        with self._lock:
            self._items.pop(session, None)


LAST = LastComparisons()


def settings_dict(settings) -> dict:
    """app.links.Settings (a frozen dataclass) as plain JSON values."""
    d = asdict(settings)
    d["methods"] = list(d["methods"])
    return d
