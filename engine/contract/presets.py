"""Names defined once and imported everywhere: verification rules, schedulers, model presets.

Methods and drafter kinds live in methods.py. A preset is an allowlisted set of checkpoints: a target,
its tokenizer, and one drafter checkpoint per method. Only these ids are ever loaded (never an arbitrary
repo id, never remote code).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from .methods import CLASSIC, DFLASH, DSPARK, EAGLE3, METHODS

ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets"
HELDOUT_PROMPTS = ASSETS_DIR / "prompts" / "heldout.jsonl"  # prompts no model trained or was tuned on


def load_prompts(path: Path = HELDOUT_PROMPTS) -> list[str]:
    """The prompts of a JSON-lines file with a "prompt" field (default: the held-out prompts)."""
    return [json.loads(line)["prompt"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

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
    tokenizer: str  # local folder or hub id; every drafter shares it
    drafters: dict[str, str] = field(default_factory=dict)  # method -> checkpoint (folder or hub id)
    # method -> the checkpoint drafted with above temperature 0, where the preset has one trained for it (the
    # engine picks by the run's temperature: GenerationConfig.drafter_weights; temperature 0 uses `drafters`).
    # The same folder as in `drafters`: one set of weights for both temperatures, loaded once, drafting above 0 with
    # what its config holds for it (DSpark: `confidence_temperatures_sampled`, its scheduler's calibration at T = 1)
    sampled_drafters: dict[str, str] = field(default_factory=dict)
    # method -> an ablation's checkpoint, trained by the same recipe with one thing taken away (DFlash without the
    # target's features: GenerationConfig.drafter_weights "no_features"); loaded where its folder is in assets/,
    # never required (not in `checkpoints`)
    ablation_drafters: dict[str, str] = field(default_factory=dict)
    description: str = ""
    chat: bool = False  # wrap the prompt in the tokenizer's chat template, thinking off
    needs_gpu: bool = False  # refuse to load it without CUDA (a 4B target on a CPU is not a demo)
    local: bool = True  # everything ships in assets/; False: hub ids, cached or downloadable
    # torch CPU threads when it runs on the CPU (None: torch's default, one per core). Models this small
    # gain little from a second thread, and two threads break down as soon as the cores are shared: a second
    # thread of the process touching torch (the app's lane worker) makes a second OpenMP team, a busy process
    # takes a core, and every parallel region then waits. One thread measured 3-4× faster beside a busy
    # process on a 2-core machine (docs/benchmarks.md).
    cpu_threads: int | None = None
    # The weights' type on CUDA (the CPU always runs float32). bfloat16 halves a large model's memory and time, but
    # rounds a verify of several tokens differently from a one-token step, so where the target's two best tokens
    # nearly tie, its pick can differ between the two and a speculative run's output from its plain decoding.
    cuda_dtype: str = "bfloat16"

    def checkpoints(self) -> list[str]:
        return list(dict.fromkeys([self.target, *self.drafters.values(), *self.sampled_drafters.values()]))


TINY = Preset(
    name="tiny",
    target="target",
    tokenizer="tokenizer",
    drafters={EAGLE3: "eagle3-drafter", CLASSIC: "small-lm-drafter", DFLASH: "dflash-drafter", DSPARK: "dspark-drafter"},
    # EAGLE-3's temperature-0 weights trained on against the target's whole distribution at temperature 1
    # (engine/train `--sampled`). DFlash's and DSpark's one set of weights each was trained on the target's greedy
    # and sampled continuations together (engine/train `dflash --self-distill --tv-loss`, `dspark --self-distill`)
    # and serves both temperatures, DSpark's with a confidence calibration for each; the small LM was distilled from
    # distributions and serves both.
    sampled_drafters={EAGLE3: "eagle3-drafter-sampled", DSPARK: "dspark-drafter"},
    ablation_drafters={DFLASH: "dflash-drafter-nokv"},  # engine/train `dflash --no-target-features`
    description="embedded models trained by us on the Python standard library (assets/)",
    cpu_threads=1,
    # Small enough that float32 costs little on a GPU, and the lesson's promise (every method's output equals the
    # target's own decoding) holds as it does on the CPU: in bfloat16 on an H200 one of three held-out prompts
    # turned at token 32 for every method, a near-tie decided one way by the baseline and the other by a verify.
    cuda_dtype="float32",
)
# The DSpark paper's comparison (Table 1: Qwen3-4B, block 7, drafters trained alike by DeepSpec).
QWEN3_4B = Preset(
    name="qwen3-4b",
    target="Qwen/Qwen3-4B",
    tokenizer="Qwen/Qwen3-4B",
    drafters={EAGLE3: "deepseek-ai/eagle3_qwen3_4b_ttt7", CLASSIC: "Qwen/Qwen3-0.6B",
              DFLASH: "deepseek-ai/dflash_qwen3_4b_block7", DSPARK: "deepseek-ai/dspark_qwen3_4b_block7"},
    description="Qwen3-4B with DeepSpec's EAGLE-3, DFlash and DSpark (block 7) and Qwen3-0.6B as the small LM",
    chat=True, needs_gpu=True, local=False,
)
# The DFlash paper's own drafter (z-lab, block 16) in the DFlash lane, the rest as above.
QWEN3_4B_ZLAB = replace(QWEN3_4B, name="qwen3-4b-zlab", drafters={**QWEN3_4B.drafters, DFLASH: "z-lab/Qwen3-4B-DFlash-b16"},
                        description="as qwen3-4b, with z-lab's DFlash checkpoint (block 16) in the DFlash lane")
PRESETS = {p.name: p for p in (TINY, QWEN3_4B, QWEN3_4B_ZLAB)}
DEFAULT_PRESET = "tiny"

for _preset in PRESETS.values():  # a typo in a preset would otherwise surface only when it is loaded
    assert set(_preset.drafters) <= set(METHODS), _preset.name
    assert set(_preset.sampled_drafters) <= set(_preset.drafters), _preset.name

# What a drafter proposes above temperature 0 (GenerationConfig.proposal): "sample" draws each token from its
# distribution q (the rejection rule then accepts with min(1, p/q)); "argmax" proposes q's likeliest token, a
# point mass, which either rule then accepts with probability p(token). Both keep the output the target's.
# "auto": the method's own choice (methods.Method.proposal, the better of the two as measured).
PROPOSALS = ("auto", "sample", "argmax")

# Which weights a drafter drafts with (GenerationConfig.drafter_weights): "auto" those the preset trained for the
# run's temperature (its sampled checkpoint above 0, where it has one); "greedy" the temperature-0 ones always;
# "no_features" the preset's ablation trained without the target's features (Preset.ablation_drafters), where loaded.
DRAFTER_WEIGHTS = ("auto", "greedy", "no_features")


def file_digest(path: Path) -> str:
    """A short hash of a file's bytes (12 hex digits): enough to tell one set of weights from another."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def weights_digests(preset: Preset) -> dict[str, str] | None:
    """The digest of every checkpoint's weights of a preset that ships in assets/, by folder; None for one
    that loads from the hub. A measurement that records them says which weights it measured."""
    if not preset.local:
        return None
    return {name: file_digest(ASSETS_DIR / name / "model.safetensors") for name in preset.checkpoints()}


def ablation_shipped(name: str) -> bool:
    """Whether an ablation's checkpoint (Preset.ablation_drafters) is in assets/ trained to its end: its weights and a
    training record of its last phase, the greedy one (an export part-way, `--greedy-steps 0`, is not loaded)."""
    record = ASSETS_DIR / name / "training.json"
    return (ASSETS_DIR / name / "model.safetensors").exists() and record.exists() \
        and "greedy_phase" in json.loads(record.read_text(encoding="utf-8"))


def resolve_model_path(name: str) -> str:
    """A name of a folder in assets/ becomes its absolute path; anything else is passed on (hub id, path)."""
    local = ASSETS_DIR / name
    return str(local) if local.exists() else name
