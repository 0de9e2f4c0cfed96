"""What each lesson recording says made it, in words for the page: "recorded 2026-12-06 on build 3f2a91c0d1, cpu,
1 thread", read from the recording's own provenance block (engine/measure/provenance.py writes it); a recording
without one says so ("recorded 2026-12-03 by an earlier engine, no build stamp"). And which recordings a slide's chart
and takeaway read, each named, so that a slide redrawn from a live measurement says "live" only beside what was
measured live and "recorded" beside the rest. Torch-free and Gradio-free.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from engine.measure.provenance import short  # the build as a page shows it


# What each recording is, in a few words, where a slide names its sources one by one
SOURCE_NAMES = {"greedy": "one prompt at T = 0", "sampled": "one prompt at T = 1",
                "temperatures": "the held-out prompts by temperature", "sweeps": "the K sweep",
                "lossless": "the distribution check", "parts": "DSpark's parts", "trees": "the budget sweep",
                "load": "under load", "kv": "the KV ablation", "long": "long outputs"}
# The recordings a point's slide reads besides its own (Point.recording): its chart's other panels and its takeaway's
# other numbers (app/draw/evidence.py, app/lesson/speed.py)
SLIDE_EXTRA = {1: ("temperatures",), 3: ("temperatures",), 6: ("sweeps", "parts"), 7: ("kv",)}


def slide_sources(number: int, recording: str) -> tuple[str, ...]:
    """Every recording point `number`'s slide reads, its own (`recording`) first."""
    return (recording, *SLIDE_EXTRA.get(number, ()))


def _files() -> dict[str, Path]:
    from . import LESSONS_DIR, RECORDINGS
    from .kv import KV_FILE

    return {**{key: LESSONS_DIR / name for key, name in RECORDINGS.items()}, "kv": KV_FILE}


@cache
def recorded_stamps() -> dict[str, dict | None]:
    """Each lesson recording's provenance block ({"build", "device", "threads", "recorded_at", ...}), read once from its
    file; None for a recording without one (or one that does not read)."""
    found = {}
    for key, path in _files().items():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found[key] = stamp_of(doc)
    return found


def stamp_of(doc) -> dict | None:
    """The provenance block of a recording's document (a dict, or an object with `provenance`), or None."""
    block = doc.get("provenance") if isinstance(doc, dict) else getattr(doc, "provenance", None)
    return block if isinstance(block, dict) and isinstance(block.get("build"), str) else None


def stamp_words(block: dict | None, dated: str = "", device: str = "") -> str:
    """"recorded 2026-12-06 on build 3f2a91c0d1, cpu, 1 thread" from a provenance block (", 3 separate processes"
    after it for a recording measured in several, one after another); without one, "recorded
    2026-12-03 on cpu (1 thread) by an earlier engine, no build stamp" (dated, device: what the recording's data
    carries, if anything)."""
    if block is None:
        on = f" on {device}" if device else ""
        return (f"recorded {dated[:10]}{on} by an earlier engine, no build stamp" if dated else
                f"recorded{on} by an earlier engine, no stamp")
    device, threads = str(block.get("device") or ""), block.get("threads")
    where = device
    if isinstance(threads, int) and "thread" not in device:
        where += f", {threads} thread{'' if threads == 1 else 's'}"
    when = str(block.get("recorded_at") or dated)[:10]
    processes = block.get("processes")
    if isinstance(processes, int) and processes > 1:  # measured in fresh processes one after another
        where += f"{', ' if where else ''}{processes} separate processes"
    return f"recorded {when} on build {short(block['build'])}" + (f", {where}" if where else "")
