"""Names defined once and imported everywhere: methods, verification rules, model presets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"

# Every method the product knows, in display order. `baseline` is target-only decoding.
METHODS = ("baseline", "ar", "dflash", "dspark")
# The methods this engine can run (a preset may lack some drafters; Engine.methods() tells).
AVAILABLE_METHODS = ("baseline", "ar", "dflash", "dspark")

METHOD_DESCRIPTIONS = {
    "baseline": "target only: one target forward per token",
    "ar": "AR: a small model drafts K tokens, one forward each",
    "dflash": "DFlash: drafts a whole block in one parallel pass",
    "dspark": "DSpark: one-pass block, Markov head, confidence-scheduled verify",
}

# How drafted tokens are checked when temperature > 0 (at temperature 0 verification is greedy).
VERIFY_RULES = ("rejection", "match")

# Overlap of each step's host work with the next step's device work: automatic (on for CUDA only), on, off.
OVERLAP_CHOICES = {"auto": None, "on": True, "off": False}

# How much of a DSpark block is verified (engine/scheduler.py); "none" verifies all of it.
SCHEDULERS = ("throughput", "static", "none")


@dataclass(frozen=True)
class Preset:
    name: str
    target: str  # local folder (relative to assets/) or a hub id
    tokenizer: str  # local folder or hub id; the drafters share it
    ar_drafter: str | None  # small model of the same tokenizer, or None when the preset has none
    dflash_drafter: str | None  # DFlash block drafter trained on this target, or None
    dspark_drafter: str | None  # DSpark drafter trained on this target, or None
    description: str


PRESETS = {
    "tiny": Preset(
        name="tiny",
        target="target",
        tokenizer="tokenizer",
        ar_drafter="ar-drafter",
        dflash_drafter="dflash-drafter",
        dspark_drafter="dspark-drafter",
        description="embedded models trained by us on the Python standard library (assets/)",
    ),
    "qwen3-4b": Preset(
        name="qwen3-4b",
        target="Qwen/Qwen3-4B",
        tokenizer="Qwen/Qwen3-4B",
        ar_drafter="Qwen/Qwen3-0.6B",
        dflash_drafter="z-lab/Qwen3-4B-DFlash-b16",
        dspark_drafter="deepseek-ai/dspark_qwen3_4b_block7",
        description="Qwen3-4B target with Qwen3-0.6B drafting (needs the hub or a local copy)",
    ),
}
DEFAULT_PRESET = "tiny"


def resolve_model_path(name: str) -> str:
    """A name of a folder in assets/ becomes its absolute path; anything else is passed on (hub id, path)."""
    local = ASSETS_DIR / name
    return str(local) if local.exists() else name
