"""The training corpus: the Python standard library's own source (PSF licence), read offline.

Contract: `corpus_files()` returns a sorted, deterministic list of `.py` files outside test folders,
split into train and held-out by whole module (a stable hash of the relative path), so the held-out
prompts and losses come from code no model saw. `write_manifest` records the list and the Python
version, since another Python ships other sources.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

# Folders whose code is tests or vendored third-party code, not the standard library itself.
EXCLUDED_PARTS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})
HELDOUT_PERCENT = 5  # share of modules kept out of training, chosen by hash of the relative path
MAX_FILE_BYTES = 400_000  # a few generated tables are huge and teach nothing


@dataclass(frozen=True)
class CorpusFile:
    relative_path: str
    path: Path
    heldout: bool


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_heldout(relative_path: str) -> bool:
    digest = hashlib.sha256(relative_path.encode()).digest()
    return digest[0] * 100 // 256 < HELDOUT_PERCENT


def corpus_files(root: Path | None = None) -> list[CorpusFile]:
    root = root or stdlib_root()
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_PARTS or part.startswith("test_") for part in rel.parts):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        files.append(CorpusFile(rel.as_posix(), path, _is_heldout(rel.as_posix())))
    return files


def read_text(file: CorpusFile) -> str:
    return file.path.read_text(encoding="utf-8", errors="replace")


def write_manifest(path: Path, files: list[CorpusFile]) -> None:
    manifest = {
        "source": "CPython standard library, PSF licence",
        "python_version": platform.python_version(),
        "stdlib_root": str(stdlib_root()),
        "heldout_percent": HELDOUT_PERCENT,
        "train_files": [f.relative_path for f in files if not f.heldout],
        "heldout_files": [f.relative_path for f in files if f.heldout],
    }
    path.write_text(json.dumps(manifest, indent=1) + "\n")
