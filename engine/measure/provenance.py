"""What made a recording: the engine's build digest, and the provenance block every shipped recording carries.

The build is one sha256 over the files that decide the tokens a run writes and how fast it writes them: the engine's
code (engine/**/*.py but engine/train/, which only trains, and this file, which only stamps) and what the engine
loads from assets/ (every model folder's weights, configs and records, the tokenizer, the prompt sets). Recordings,
the model card, docs and app code are not in it. A recording whose build differs from today's was made by another
engine: its numbers may no longer be what the engine measures (docs/benchmarks.md, "Recording everything").

Torch-free (stdlib only): the app reads provenance blocks, the tests compare builds, the recorders stamp them.
Hashing the ~60 MB of weights takes a fraction of a second; each root's digest is computed once a process.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Under assets/, what the engine does not load: the recordings themselves and the documents written from them.
NOT_INPUTS = ("lessons", "device", "MODEL_CARD.md", "model_card.json", "corpus_manifest.json")
NOT_ENGINE = ("train",)  # engine/ subpackages that decide no run's tokens or speed
THIS_FILE = "engine/measure/provenance.py"
SHORT = 10  # hex digits of the build shown on a page
# Every file that holds a recording the app or the docs show, relative to the root (the screenshot's provenance is
# kept beside it, a PNG holding none).
RECORDING_GLOBS = ("assets/lessons/*.json", "assets/device/*/*.json", "assets/model_card.json",
                   "docs/screenshot.json")


def build_inputs(root: Path = ROOT) -> list[Path]:
    """The files the build digest covers, sorted by their path relative to `root`."""
    root = Path(root)
    files = [p for p in (root / "engine").rglob("*.py")
             if p.relative_to(root / "engine").parts[0] not in NOT_ENGINE and "__pycache__" not in p.parts
             and p.relative_to(root).as_posix() != THIS_FILE]
    assets = root / "assets"
    for path in assets.rglob("*") if assets.is_dir() else ():
        rel = path.relative_to(assets)
        if path.is_file() and rel.parts[0] not in NOT_INPUTS and not path.name.startswith("."):
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def _build_digest(root: str) -> str:
    digest = hashlib.sha256()
    for path in build_inputs(Path(root)):
        digest.update(f"{path.relative_to(root).as_posix()}\0{_file_sha(path)}\n".encode())
    return digest.hexdigest()


def build_digest(root: Path = ROOT, cached: bool = True) -> str:
    """The engine build of the tree at `root` (sha256, hex): the same on every clone of the same files. Hashed once
    a process (cached: False hashes the files again, for a tree that changed meanwhile)."""
    if not cached:
        _build_digest.cache_clear()
    return _build_digest(str(Path(root).resolve()))


def short(build: str) -> str:
    return build[:SHORT]


def provenance(device: str, threads: int, command: str, duration_s: float, baseline_tokens_per_s: float | None,
               baseline_how: str = "", root: Path = ROOT, **extra) -> dict:
    """The block a recording carries under "provenance": the build that made it, where, the baseline's speed in the
    same process, when (UTC), the command that makes it again, and how long that took."""
    return {"build": build_digest(root), "device": device, "threads": threads,
            "baseline_tokens_per_s": None if baseline_tokens_per_s is None else round(baseline_tokens_per_s, 1),
            "baseline_how": baseline_how,
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": command, "duration_s": round(duration_s, 1),
            "python": platform.python_version(), "cpus": os.cpu_count(), **extra}


def read_provenance(path: Path) -> dict | None:
    """The provenance block of a recording file (a JSON document with "provenance"), or None where it has none or
    does not read."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    block = doc.get("provenance") if isinstance(doc, dict) else None
    return block if isinstance(block, dict) and isinstance(block.get("build"), str) else None


def recording_files(root: Path = ROOT) -> list[Path]:
    """Every shipped recording under `root` (RECORDING_GLOBS)."""
    root = Path(root)
    return sorted({p for pattern in RECORDING_GLOBS for p in root.glob(pattern) if p.is_file()})


def stale_recordings(root: Path = ROOT) -> list[str]:
    """Each shipped recording not made by the build at `root`, in words ("assets/lessons/greedy.json: build
    1a2b3c4d5e, today 6f7a8b9c0d"; "… no provenance"): empty when every recording is today's."""
    root = Path(root)
    today = build_digest(root)
    found = []
    for path in recording_files(root):
        block = read_provenance(path)
        name = path.relative_to(root).as_posix()
        if block is None:
            found.append(f"{name}: no provenance (recorded before recordings were stamped)")
        elif block["build"] != today:
            found.append(f"{name}: build {short(block['build'])}, today {short(today)}")
    return found
