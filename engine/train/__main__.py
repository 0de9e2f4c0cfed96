"""Reproducible training of the embedded models: `python -m engine.train STAGE`.

Stages, in order (each writes into assets/, the checkpoints of long runs go to runs/, which git ignores):
  tokenizer   byte-level BPE on the corpus, and the prompt sets -> assets/tokenizer/, assets/prompts/
  prompts     the prompt sets alone: held-out (every figure) and validation (no choice made on it) -> assets/prompts/
  target      the tiny Qwen3 target, next-token loss (~52 min)   -> assets/target/
              (the shipped one then grows: `target --grow-layers 24 --grow-steps 800 --unloop-steps 100`, ~26 min)
  small-lm-drafter  the small LM drafter, distilled from the shipped target  -> assets/small-lm-drafter/
  self-data   text the shipped target writes itself (~3 min)      -> runs/selfdata.pt
  greedy-data the target's greedy continuations, 3/4 after function openings (~14 min) -> runs/greedy.pt
  sampled-data the same prefixes continued by sampling at temperature 1 -> runs/sampled.pt (for --sampled)
  dflash      the DFlash block drafter: two cycles, each half self-data then more, then a greedy phase
              of 8000 steps (~2 h on one core)                    -> assets/dflash-drafter/
  dflash --no-target-features   the same recipe for a drafter that reads none of the target's hidden states
              (an ablation: what KV injection buys; its checkpoints in runs/dflash-nokv/) -> assets/dflash-drafter-nokv/
  dspark      the DSpark drafter likewise (~2 h), and its calibration -> assets/dspark-drafter/
  eagle3      the EAGLE-3 drafter, training-time test, corpus and self-data, then a greedy phase (~25 min)
                                                                  -> assets/eagle3-drafter/
  dflash|eagle3 --sampled   the checkpoint drafted with above temperature 0: the shipped drafter trained
              on in a distribution phase on runs/sampled.pt     -> assets/<stage>-drafter-sampled/
  dflash|dspark|eagle3 --self-distill [--drafts 15]   the papers' regime, a matched comparison: the shipped
              drafter one phase on greedy and sampled rows together (scripts/train_breakout.sh)
                                                                  -> runs/<stage>-selfdistill[-dN]/export/
              (DSpark's is the shipped one, for every temperature: copied to assets/dspark-drafter/)
              with --grow-layers N: the drafter deepened to N layers first, drafting the same (grow.py), so the
              phase measures what more capacity buys                -> runs/<stage>-selfdistill[-dN]-gN/export/
              dflash with --tv-loss: the DSpark paper's loss (0.1 CE + 0.9 TV), one set of weights meant for every
              temperature                                           -> runs/dflash-selfdistill[...]-tv/export/
  eagle3|small-lm-drafter --matched   on the block drafters' budget: a fresh drafter through DSpark's recorded
              schedule phase for phase, 16,800 steps (hours; scripts/train_matched.sh) -> runs/<stage>-matched/export/
  card        measure the shipped models (--bench: the bench's speed table) -> assets/MODEL_CARD.md, model_card.json
  reexport    the shipped DFlash and DSpark drafters saved again in z-lab's and DeepSpec's formats, same weights,
              no training (reexport.py; seconds), and the card's sizes and digests -> assets/dflash-drafter/,
              assets/dspark-drafter/, the model card
`--from-shipped` trains a shipped model on instead: the target a further cycle (then --unloop-steps), a feature
drafter one more greedy phase on the target now shipped (`scripts/train_family.sh --more`; an experiment toward a
target with a lower held-out loss, not the shipped family: docs/experiments.md).
Long stages resume from runs/<stage>/ckpt.pt when cut off; `--steps` sets the schedule length. `--device cuda`
trains on a GPU (batches are drawn on the CPU either way, so a seed gives the same batches on any device);
`scripts/train_family.sh` runs every stage in order, the shipped family's way: the drafters' first phases on the
16-layer target, its growth, then the small LM drafter, the greedy data and every drafter's greedy phase on the grown one.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch

from .unloop import RULES as UNLOOP_RULES

ASSETS = Path(__file__).resolve().parents[2] / "assets"
TARGET_STEPS = 3000  # about 3.9 passes over the corpus: 52 min on 2 cores in bf16 (AVX-512 BF16)
SELF_DATA_ROWS = 2048  # sequences of target-written text the drafters learn from (half of each batch, more at the end)
SELF_DATA_STEPS = 400  # second-phase steps, three quarters of each batch target-written
GREEDY_ROWS = 8192  # greedy continuations for the drafters' last phase (selfdata.generate_greedy_rows)
# The last phase of every drafter that reads the target's features: greedy rows only, each drafted token scored
# against the target's greedy choice (argmax labels; DSpark: its CE term, and its confidence head learns whether
# its argmax is the target's). τ on the held-out prompts: EAGLE-3 2.76 -> 3.49, DFlash 3.06 -> 3.58, DSpark 3.41 -> 3.97
# (16-layer target, 2000 steps each). On the grown target the block drafters gained from a longer one:
# DFlash 2000 -> 8000 steps τ 3.19 -> 3.38, DSpark (verifying all) 3.45 -> 3.88 (docs/experiments.md).
GREEDY_STEPS = {"dflash": 8000, "dspark": 8000, "eagle3": 2000}
# First-phase steps of the block drafters. DFlash gained from twice DSpark's schedule (τ 2.53 -> 2.81 on the
# held-out prompts, docs/experiments.md). Each then trains a second cosine cycle as long as its first (the
# default of --restart-steps for these stages): τ DFlash 2.81 -> 3.06, DSpark 3.10 -> 3.41 (2026-11-30).
BLOCK_STEPS = {"dflash": 6000, "dspark": 3000}
DRAFTER_BATCH = 8  # windows of 256 tokens per step, for every drafter
CALIBRATION_ROWS = 64  # held-out greedy continuations DSpark's confidence temperatures are fitted on
# An optional last phase of the target (unloop.py, `--unloop-steps N`): unlikelihood on tokens of its own greedy
# continuations of UNLOOP_ROWS prompts (`--unloop-rule`), next-token loss on corpus windows beside them. On the
# two-cycle target 200 steps with the "ngrams" rule took greedy loops on the held-out prompts from 12% to 0%
# (held-out loss 2.05 -> 2.18), but the target's text without its repeats was far harder to draft: τ DFlash 2.15
# below EAGLE-3's 2.26 with every drafter retrained on it. The shipped target ends with 100 steps of the "tails"
# rule (loops only) after growing (scripts/train_family.sh): loops 3%, τ DFlash 3.19 after 2000 greedy steps,
# 3.38 after 8000 (docs/experiments.md).
UNLOOP_STEPS_TRIED = 200
UNLOOP_ROWS = 2048
UNLOOP_LR = 2e-4
UNLOOP_ALPHA = 1.0  # weight of the unlikelihood term beside the corpus rows' cross-entropy
# An optional phase of the target before that (grow.py, `--grow-layers N --grow-steps M`): deepened to N layers
# computing the same function, then trained M steps at half the peak rate. The shipped target: 16 -> 24 layers,
# 800 steps (held-out loss 2.42 -> 2.29, 2.35 after the unloop phase), scripts/train_family.sh.
GROW_STEPS = 800
# `--from-shipped` (target): a further cosine cycle of the shipped target, from its weights in assets/target, at the
# grow phase's peak rate (then --unloop-steps again), for a target with a lower held-out loss; the drafters then
# take one more greedy phase on it from their shipped weights (`dflash|dspark|eagle3 --from-shipped`).
MORE_STEPS = 2000
MORE_GREEDY_STEPS = {"dflash": 6000, "dspark": 6000, "eagle3": 1000}  # per round, after GREEDY_STEPS
# `--sampled` (dflash, eagle3): the checkpoint the engine drafts with above temperature 0, from the shipped
# (temperature-0) drafter's weights, one distribution phase on the target's sampled continuations (runs/sampled.pt,
# `sampled-data`): every drafted position scored against the target's whole distribution at temperature 1 (KL + TV;
# DSpark: its paper's loss, the confidence head learning 1 − TV), DSpark's confidences calibrated on the rejection
# rule's outcomes at temperature 1. Exported beside the shipped drafter as assets/<stage>-drafter-sampled/. DSpark
# has no such checkpoint any more: its self-distilled weights serve every temperature, with a calibration for each.
SAMPLED_ROWS = 2048
SAMPLED_STEPS = {"dflash": 500, "eagle3": 300}
# `--self-distill` (dflash, dspark, eagle3): the papers' regime, a matched comparison. From the shipped drafter's
# weights, one phase on the target's own outputs at both temperatures (runs/greedy.pt and runs/sampled.pt
# together, every row of every batch), the same steps and batch for the three: DFlash position-weighted CE on
# the tokens the target wrote (γ the paper's for its block size: 7 at block 16), DSpark its paper's loss
# (0.1 CE + 0.9 TV + BCE toward 1 − TV), EAGLE-3 its training-time test on the written tokens. `--drafts N`
# sets a block drafter's drafts per block (15: z-lab's block 16). Checkpoints and exports stay in
# runs/<stage>-selfdistill[-dN]/export/: the engine loads none of them until one is copied to assets/. DSpark's
# config carries two calibrations of its confidences, `confidence_temperatures` (at temperature 0, the key of
# earlier saves) and `confidence_temperatures_sampled` (at 1). Once assets/<stage>-drafter is such an export, the
# stage only re-exports from its finished checkpoint, the record it started from being the shipped record's
# `earlier`.
SELF_DISTILL_STEPS = 2000
RUNS = Path(__file__).resolve().parents[2] / "runs"


def _export(model, name: str, cfg, extra: dict, out: Path | None = None) -> None:
    """Ship weights in float16 (upcast on load) with a record of how they were made, to assets/<name> or `out`."""
    out = ASSETS / name if out is None else out
    model.to(torch.float16).save_pretrained(out)
    record = {"train_config": asdict(cfg), "python_version": platform.python_version(),
              "torch_version": torch.__version__, **extra}
    (out / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"exported {name} to {out}")


def _config(args, default_steps: int, **schedule):
    """A stage's TrainConfig: its own schedule, and what every stage takes from the command line."""
    from .lm import TrainConfig

    return TrainConfig(seed=args.seed, steps=args.steps or default_steps, threads=args.threads, device=args.device,
                       precision=args.precision, **schedule)


def _second_cycle(cfg, steps: int):
    """A second cosine cycle from the first one's weights: a new phase (fresh optimizer), half the peak rate,
    another seed (other windows than the first cycle's)."""
    return replace(cfg, steps=steps, lr=cfg.lr / 2, seed=cfg.seed + 1)


def _train_minutes(*run_dirs: Path) -> float:
    """Minutes of training recorded in the checkpoints of a stage's phases, to one decimal."""
    return round(sum(torch.load(d / "ckpt.pt", weights_only=False)["elapsed_s"] for d in run_dirs) / 60, 1)


def _target_digest() -> str:
    """A short hash of the shipped target's weights: the small LM drafter's checkpoints live under it, so a run
    distilled from another target never resumes."""
    from ..contract.presets import file_digest

    return file_digest(ASSETS / "target" / "model.safetensors")


def _greedy_rows_problem() -> str | None:
    """Why runs/greedy.pt cannot serve a greedy phase now (missing, or written by another target than the one in
    assets/target), or None."""
    if not (RUNS / "greedy.pt").exists():
        return "no greedy rows (runs/greedy.pt)"
    meta = RUNS / "greedy.json"
    if not meta.exists() or json.loads(meta.read_text()).get("target") != _target_digest():
        return "runs/greedy.pt holds another target's greedy continuations"
    return None


def _shipped_target(device: str = "cpu"):
    """The target as shipped (float16 weights, upcast): drafters learn the model users actually run."""
    from transformers import Qwen3ForCausalLM

    target = Qwen3ForCausalLM.from_pretrained(ASSETS / "target", dtype=torch.float32)
    return target.to(device).eval().requires_grad_(False)


def _train_greedy_phase(drafter, streams, after: Path, cfg, args, loss_fn, eval_fn, anchors: torch.Generator,
                        default_steps: dict[str, int] | None = None) -> tuple[Path, dict] | None:
    """The last phase of a drafter reading the target's features, in after/greedy, from the weights the phase in
    `after` left: greedy rows only (runs/greedy.pt stands in for the self-data rows), argmax labels (`loss_fn`,
    drawing anchor positions from `anchors`), a third of the first phase's peak rate, a short warm-up, its own
    seed. Returns its folder and its record, or None with --greedy-steps 0."""
    from .lm import train

    steps = (default_steps or GREEDY_STEPS)[args.stage] if args.greedy_steps is None else args.greedy_steps
    if not steps:
        return None
    greedy = replace(cfg, steps=steps, self_data_fraction=1.0, lr=cfg.lr / 3, warmup_steps=20, seed=cfg.seed + 2)
    print(f"{args.stage} greedy phase: {after.name}/greedy, {steps} steps", flush=True)  # a log says where it is
    train(drafter, {**streams, "self": torch.load(RUNS / "greedy.pt")}, after / "greedy", greedy, loss_fn, eval_fn,
          loss_generators=[anchors])
    return after / "greedy", {**asdict(greedy), "labels": "argmax"}


def _train_unloop_phase(model, tokenizer, streams, after: Path, cfg, args) -> tuple[Path, object, dict] | None:
    """The target's optional last phase, in after/unloop, from the weights the phase in `after` left: first its
    own greedy continuations of UNLOOP_ROWS prompts (after/unloop/rows.pt, kept for a resumed run), then half of
    every batch corpus windows (next-token loss), half those rows (unlikelihood of the tokens --unloop-rule picks).
    Returns its folder, config and record, or None without --unloop-steps."""
    from .lm import heldout_loss, train
    from .selfdata import PREFIX_TOKENS, generate_greedy_rows
    from .unloop import NGRAM, unloop_loss

    steps = args.unloop_steps or 0
    if not steps:
        return None
    run_dir = after / "unloop"
    rows_path = run_dir / "rows.pt"
    if not rows_path.exists():
        model.eval()
        rows = generate_greedy_rows(model, tokenizer, streams["train"], UNLOOP_ROWS, seed=cfg.seed + 3,
                                    log=lambda line: print(line.replace("greedy-data", "unloop rows"), flush=True))
        run_dir.mkdir(parents=True, exist_ok=True)
        torch.save(rows.to(torch.int16), rows_path)
    rows = torch.load(rows_path)
    phase = replace(cfg, steps=steps, lr=UNLOOP_LR, warmup_steps=20, batch_size=16, seq_len=rows.shape[1],
                    self_data_fraction=0.5, seed=cfg.seed + 3)
    num_loop_rows = round(phase.batch_size * phase.self_data_fraction)
    loss_fn = unloop_loss(model, num_loop_rows, PREFIX_TOKENS, args.unloop_rule, alpha=UNLOOP_ALPHA)
    train(model, {**streams, "self": rows}, run_dir, phase, loss_fn, lambda windows: heldout_loss(model, windows))
    return run_dir, phase, {**asdict(phase), "rows": UNLOOP_ROWS, "rule": args.unloop_rule, "ngram": NGRAM,
                            "alpha": UNLOOP_ALPHA}


def _train_grow_phase(model, streams, after: Path, cfg, args) -> tuple[Path, object, dict] | None:
    """The target's optional phase in after/grow, from the weights the phase in `after` left: deepened to
    --grow-layers layers (grow.py, same function), then --grow-steps steps of next-token loss at half the first
    cycle's peak rate, its own seed. Returns its folder, config and record, or None without --grow-layers."""
    from .grow import grow
    from .lm import heldout_loss, lm_loss, train

    if not args.grow_layers:
        return None
    old = model.config.num_hidden_layers
    mapping = grow(model, args.grow_layers)
    phase = replace(cfg, steps=args.grow_steps if args.grow_steps is not None else GROW_STEPS, lr=cfg.lr / 2,
                    warmup_steps=50, seed=cfg.seed + 4)
    train(model, streams, after / "grow", phase, lm_loss(model), lambda windows: heldout_loss(model, windows))
    return after / "grow", phase, {**asdict(phase), "from_layers": old, "layers": args.grow_layers,
                                   "old_layer_at": mapping}


def _shipped_record(stage: str) -> tuple[dict, int, Path]:
    """The training.json of a shipped model (the target, or a stage's drafter), how many --from-shipped rounds it
    already had, and the folder of the next round's checkpoints: runs/<stage>-more for the first, then
    runs/<stage>-more2, and so on. A round's record keeps the one before it under "earlier", so the chain back to
    the first stage stays readable (card.record_chain reads it back)."""
    from .card import record_chain

    record = json.loads((ASSETS / (stage if stage == "target" else f"{stage}-drafter") / "training.json").read_text())
    rounds = len(record_chain(record)) - 1
    return record, rounds, RUNS / (f"{stage}-more" if rounds == 0 else f"{stage}-more{rounds + 1}")


def _train_target_more(args, tokenizer, streams) -> int:
    """The shipped target trained on (--from-shipped): a cosine cycle of --steps steps at the grow phase's peak
    rate with a fresh optimizer and its own seed, then the unloop phase (--unloop-steps) if asked; exported with
    the earlier record kept under "earlier"."""
    from transformers import Qwen3ForCausalLM

    from .lm import heldout_loss, heldout_windows, lm_loss, train

    earlier, rounds, run_dir = _shipped_record("target")
    model = Qwen3ForCausalLM.from_pretrained(ASSETS / "target", dtype=torch.float32)
    cfg = _config(args, MORE_STEPS, lr=earlier["train_config"]["lr"] / 2, warmup_steps=50)
    cfg = replace(cfg, seed=cfg.seed + 5 + rounds)  # other windows than every earlier phase and round
    windows = heldout_windows(streams["heldout"], cfg.seq_len)
    start_ce = heldout_loss(model, windows)
    train(model, streams, run_dir, cfg, lm_loss(model), lambda w: heldout_loss(model, w))
    phases, extra = [(run_dir, cfg)], {}
    unloop = _train_unloop_phase(model, tokenizer, streams, run_dir, cfg, args)
    if unloop is not None:
        phases.append(unloop[:2])
        extra["unloop_phase"] = unloop[2]
    ce = heldout_loss(model, windows)
    tokens = sum(c.steps * c.batch_size * c.seq_len for _, c in phases)
    _export(model, "target", cfg, {
        "heldout_ce_fp32": round(ce, 4), "heldout_ce_fp32_before": round(start_ce, 4),
        "train_minutes": round(earlier["train_minutes"] + _train_minutes(*dict(phases)), 1),
        "train_tokens": earlier["train_tokens"] + tokens, "num_parameters": sum(p.numel() for p in model.parameters()),
        "more": {"phase": asdict(cfg), **extra}, "earlier": earlier})
    return 0


def _block_drafter_parts(kind: str) -> tuple[type, Callable, Callable, Callable]:
    """DFlash or DSpark: its model class, config builder, loss (taking labels=) and teacher-forced score."""
    from ..drafters.dflash_model import DFlashDraftModel
    from ..drafters.dspark_model import DSparkDraftModel
    from . import dflash, dspark

    return {"dflash": (DFlashDraftModel, dflash.dflash_config, dflash.dflash_loss, dflash.dflash_acceptance),
            "dspark": (DSparkDraftModel, dspark.dspark_config, dspark.dspark_loss, dspark.dspark_acceptance)}[kind]


def _load_shipped_drafter(kind: str, target, device: str):
    """A shipped feature drafter loaded to train on, its frozen parts kept frozen."""
    from ..drafters import eagle3 as eagle3_drafter
    from ..drafters.dflash_model import load_block_model

    path = str(ASSETS / f"{kind}-drafter")
    if kind == "eagle3":
        drafter = eagle3_drafter.load(path, torch.device(device), torch.float32).requires_grad_(True)
        drafter.embed_tokens.requires_grad_(False)  # its frozen copies of the target's, as its first phase left them
        drafter.lm_head.requires_grad_(False)
        return drafter
    cls = _block_drafter_parts(kind)[0]
    drafter = load_block_model(cls, path, torch.device(device), torch.float32).requires_grad_(True)
    if kind == "dspark":  # its stored copies are those of the target it trains for now (frozen)
        drafter.copy_target_embeddings(target)
    return drafter


def _drafter_objectives(kind: str, drafter, target, generator: torch.Generator, labels: str,
                        rows: bool | torch.Tensor = False):
    """A feature drafter's loss under `labels` (drawing anchors from `generator`; DSpark's "argmax" or its paper's
    loss, the others' "argmax", "distribution" or "written") and its teacher-forced greedy score. rows: the
    target's outputs kept per row (teacher.row_teacher): True where every window is one of a fixed set of rows
    drawn again and again (a phase on the greedy or self-distillation rows alone), the rows themselves where a
    phase mixes them with corpus windows."""
    from . import eagle3

    if kind == "eagle3":
        return (eagle3.eagle3_loss(drafter, target, generator, labels=labels, rows=rows),
                lambda windows: eagle3.eagle3_acceptance(drafter, target, windows))
    _, _, loss_of, score_of = _block_drafter_parts(kind)
    labels = "paper" if kind == "dspark" and labels in ("distribution", "written") else labels
    return (loss_of(drafter, target, generator, labels=labels, rows=rows),
            lambda windows: score_of(drafter, target, windows))


def _shipped_drafter_to_train(kind: str, target, device: str, generator: torch.Generator, labels: str,
                              rows: bool | torch.Tensor = False):
    """A shipped feature drafter loaded to train on (_load_shipped_drafter), its loss and score
    (_drafter_objectives)."""
    drafter = _load_shipped_drafter(kind, target, device)
    return (drafter, *_drafter_objectives(kind, drafter, target, generator, labels, rows))


def set_drafts(drafter, kind: str, drafts: int) -> None:
    """A block drafter made to draft `drafts` tokens per block: DFlash's block is the anchor and `drafts` masks,
    DSpark's `drafts` inputs (the anchor predicts the first). Its weights serve any block size; DSpark's
    confidence temperatures go back to 1 until calibrated again."""
    block = drafts + 1 if kind == "dflash" else drafts
    drafter.block_size = block
    drafter.config.block_size = block
    if kind == "dflash" and isinstance(getattr(drafter.config, "dflash_config", None), dict):
        drafter.config.dflash_config = {**drafter.config.dflash_config, "block_size": block}
    if kind == "dspark":  # both calibrations (temperatures 0 and 1) undone
        drafter.confidence_temperatures = [1.0] * block
        drafter.config.confidence_temperatures = [1.0] * block
        drafter.sampled_confidence_temperatures = [1.0] * block
        if hasattr(drafter.config, "confidence_temperatures_sampled"):
            drafter.config.confidence_temperatures_sampled = [1.0] * block


def _train_drafter_more(kind: str, args, streams) -> int:
    """A shipped drafter trained on (--from-shipped): from its weights in assets/, one more greedy phase
    (--greedy-steps, default MORE_GREEDY_STEPS) on the greedy rows of the target now in assets/target, its own seed;
    DSpark's confidences calibrated anew at both temperatures. Exported with the earlier record kept under "earlier". A drafter that had
    rounds already trains another (seeds and folder of that round: _shipped_record)."""
    from .lm import TrainConfig, heldout_windows

    earlier, rounds, run_dir = _shipped_record(kind)
    target = _shipped_target(args.device)
    generator = torch.Generator().manual_seed(args.seed + 1 + rounds)  # anchor positions
    drafter, loss, score = _shipped_drafter_to_train(kind, target, args.device, generator, "argmax", rows=True)
    cfg = replace(TrainConfig(**earlier["train_config"]), seed=args.seed + 5 + rounds, threads=args.threads,
                  device=args.device, precision=args.precision)
    greedy = _train_greedy_phase(drafter, streams, run_dir, cfg, args, loss, score, generator,
                                 MORE_GREEDY_STEPS)
    if greedy is None:
        print("error: --from-shipped trains a greedy phase; --greedy-steps 0 leaves nothing to do", file=sys.stderr)
        return 2
    drafter.eval()
    windows = heldout_windows(streams["heldout"], cfg.seq_len).to(args.device)
    extra = {"greedy_phase": greedy[1]}
    if kind == "dspark":
        extra.update(_calibrate_both(drafter, target, streams, args.device))
    score_key = _score_key(kind)
    _export(drafter, f"{kind}-drafter", cfg, {
        score_key: round(score(windows), 3), f"{score_key}_before": earlier.get(score_key),
        "train_minutes": round(earlier["train_minutes"] + _train_minutes(greedy[0]), 1),
        "num_parameters": sum(p.numel() for p in drafter.parameters()),
        **({"num_trained_parameters": sum(p.numel() for p in drafter.parameters() if p.requires_grad)}
           if kind == "eagle3" else {}),
        "more": {"from": f"assets/{kind}-drafter as shipped before, on the target then shipped", **extra},
        "earlier": earlier})
    return 0


def _sampled_rows_problem() -> str | None:
    """Why runs/sampled.pt cannot serve a distribution phase now (missing, or another target's), or None."""
    meta = RUNS / "sampled.json"
    if not (RUNS / "sampled.pt").exists() or not meta.exists():
        return "no sampled rows (runs/sampled.pt)"
    if json.loads(meta.read_text()).get("target") != _target_digest():
        return "runs/sampled.pt holds another target's sampled continuations"
    return None


def _train_drafter_sampled(kind: str, args, streams) -> int:
    """The checkpoint used above temperature 0 (--sampled): from the shipped drafter's weights, SAMPLED_STEPS steps
    of a distribution phase on the target's sampled continuations (three quarters of each batch; corpus windows the
    rest) at a third of the first phase's peak rate, its own seed, in runs/<stage>-sampled. Exported as
    assets/<stage>-drafter-sampled/. DFlash and EAGLE-3 only: DSpark's one set of weights serves every temperature."""
    from .lm import TrainConfig, heldout_windows, train

    shipped = json.loads((ASSETS / f"{kind}-drafter" / "training.json").read_text())
    target = _shipped_target(args.device)
    generator = torch.Generator().manual_seed(args.seed + 7)  # anchor positions
    rows = torch.load(RUNS / "sampled.pt")  # corpus windows beside them are cut as long as they are
    drafter, loss, score = _shipped_drafter_to_train(kind, target, args.device, generator, "distribution", rows=rows)
    first = TrainConfig(**shipped["train_config"])
    cfg = replace(first, steps=args.steps or SAMPLED_STEPS[kind], self_data_fraction=0.75, lr=first.lr / 3,
                  warmup_steps=20, seed=args.seed + 7, threads=args.threads, device=args.device,
                  precision=args.precision, seq_len=rows.shape[1])
    run_dir = RUNS / f"{kind}-sampled"
    train(drafter, {**streams, "self": rows}, run_dir, cfg, loss, score,
          loss_generators=[generator])
    drafter.eval()
    windows = heldout_windows(streams["heldout"], first.seq_len).to(args.device)
    score_key = _score_key(kind)
    _export(drafter, f"{kind}-drafter-sampled", cfg, {
        "used": "above temperature 0 (the engine picks it by temperature; assets/" + f"{kind}-drafter at 0)",
        "labels": "KL + TV at temperature 1",
        "rows": "runs/sampled.pt: the target's continuations sampled at temperature 1",
        f"{score_key}_greedy": round(score(windows), 3),
        "train_minutes": round(shipped["train_minutes"] + _train_minutes(run_dir), 1),
        "distribution_phase_minutes": _train_minutes(run_dir),
        "num_parameters": sum(p.numel() for p in drafter.parameters()),
        "from": f"assets/{kind}-drafter as shipped", "earlier": shipped})
    return 0


def _train_self_distill(kind: str, args, streams) -> int:
    """The papers' regime (--self-distill): from the shipped drafter's weights (block drafters at --drafts per
    block), one phase of SELF_DISTILL_STEPS steps on the target's greedy and sampled rows together, labels of
    the target's own outputs ("written"; DSpark its paper's loss), a third of the first phase's peak rate, in
    runs/<stage>-selfdistill[-dN], exported to its export/; DSpark calibrated at temperature 0 and at 1, both in
    its config. Where assets/<stage>-drafter is already a self-distilled export, only a finished checkpoint
    re-exports (_self_distill_origin)."""
    from .lm import TrainConfig, heldout_windows, train

    run_dir = _self_distill_dir(kind, args)
    score_key = _score_key(kind)
    shipped, before = _self_distill_origin(kind, run_dir, args.steps or SELF_DISTILL_STEPS, score_key)
    if shipped is None:
        return 2
    target = _shipped_target(args.device)
    generator = torch.Generator().manual_seed(args.seed + 13)  # anchor positions
    drafter = _load_shipped_drafter(kind, target, args.device)
    if args.drafts:
        set_drafts(drafter, kind, args.drafts)
    grown = None
    if args.grow_layers is not None:
        from .grow import grow_drafter

        old_layers = drafter.config.num_hidden_layers
        if args.grow_layers < old_layers:
            print(f"error: --grow-layers {args.grow_layers}: assets/{kind}-drafter has {old_layers} layers already",
                  file=sys.stderr)
            return 2
        grown = {"from_layers": old_layers, "layers": args.grow_layers,
                 "old_layer_at": grow_drafter(drafter, args.grow_layers)}
    labels = "paper" if kind == "dspark" else "tv" if args.tv_loss else "written"
    loss, score = _drafter_objectives(kind, drafter, target, generator, labels, rows=True)
    rows, greedy, sampled = _self_distill_rows()
    first = TrainConfig(**shipped["train_config"])
    cfg = replace(first, steps=args.steps or SELF_DISTILL_STEPS, batch_size=DRAFTER_BATCH, self_data_fraction=1.0,
                  lr=first.lr / 3, warmup_steps=50, seed=args.seed + 13, threads=args.threads, device=args.device,
                  precision=args.precision, seq_len=rows.shape[1])
    windows = heldout_windows(streams["heldout"], first.seq_len).to(args.device)
    drafter.eval()
    if before is None:
        before = round(score(windows), 3)
    print(f"{kind} self-distillation" + (f" grown from {grown['from_layers']} to {grown['layers']} layers" if grown
                                         else "") + f": {greedy} greedy + {sampled} sampled rows, {cfg.steps} steps, "
          f"held-out score before {before}", flush=True)
    train(drafter, {**streams, "self": rows}, run_dir, cfg, loss, score, loss_generators=[generator])
    drafter.eval()
    extra = _calibrate_both(drafter, target, streams, args.device) if kind == "dspark" else {}
    record = {
        score_key: round(score(windows), 3), f"{score_key}_before": before,
        "labels": _self_distill_labels(kind, labels, drafter),
        "rows": _rows_record(greedy, sampled),
        "drafts_per_block": drafter.block_size - 1 if kind == "dflash" else getattr(drafter, "block_size", None),
        "self_distill_minutes": _train_minutes(run_dir),
        "train_minutes": round(shipped["train_minutes"] + _train_minutes(run_dir), 1),
        "num_parameters": sum(p.numel() for p in drafter.parameters()),
        "from": f"assets/{kind}-drafter as shipped", "earlier": shipped, **extra,
        **({"grown": grown} if grown else {})}
    _export(drafter, kind, cfg, record, out=run_dir / "export")
    return 0


def _self_distill_dir(kind: str, args) -> Path:
    """runs/<stage>-selfdistill, then -dN (drafts per block), -gN (grown to N layers), -tv (the DSpark paper's loss)."""
    return RUNS / (f"{kind}-selfdistill" + (f"-d{args.drafts}" if args.drafts else "")
                   + (f"-g{args.grow_layers}" if args.grow_layers is not None else "")
                   + ("-tv" if args.tv_loss else ""))


def _self_distill_labels(kind: str, labels: str, drafter) -> str:
    """The self-distillation's loss as its training.json record says it, position weights included where they apply."""
    from .dflash import gamma_for

    if kind == "dspark":
        return "paper (0.1 CE + 0.9 TV + BCE toward 1 − TV)"
    weighted = f", positions weighted exp(−(k−1)/{round(gamma_for(drafter.block_size), 2)})" if kind == "dflash" else ""
    if labels == "tv":
        return "tv: 0.1 CE on the target's argmax + 0.9 TV against its distribution" + weighted
    return "written: CE on the token the target wrote" + weighted


def _self_distill_rows() -> tuple[torch.Tensor, int, int]:
    """The self-distillation phase's rows: the target's greedy and sampled continuations (runs/greedy.pt,
    runs/sampled.pt) together, cut to the narrower of the two widths; and how many of each."""
    greedy, sampled = torch.load(RUNS / "greedy.pt"), torch.load(RUNS / "sampled.pt")
    width = min(greedy.shape[1], sampled.shape[1])
    return torch.cat([greedy[:, :width], sampled[:, :width]]), len(greedy), len(sampled)


def _refused_without_distill_rows() -> bool:
    """Whether the self-distillation rows are missing or another target's (then said in one line)."""
    if problem := _greedy_rows_problem() or _sampled_rows_problem():
        print(f"error: {problem}: run `python -m engine.train greedy-data` and `sampled-data` first", file=sys.stderr)
        return True
    return False


def _rows_record(greedy: int, sampled: int) -> str:
    """The self-distillation rows as a training.json record names them."""
    return f"runs/greedy.pt ({greedy} greedy) and runs/sampled.pt ({sampled} sampled at temperature 1)"


def _score_key(kind: str) -> str:
    """The training.json key of a drafter's held-out score: EAGLE-3's expected accepted run at K = 4, a block
    drafter's over its block, both teacher-forced."""
    return ("heldout_expected_accepted_k4_teacher_forced" if kind == "eagle3" else
            "heldout_expected_accepted_teacher_forced")


def _self_distill_origin(kind: str, run_dir: Path, steps: int, score_key: str) -> tuple[dict | None, float | None]:
    """The record of the drafter a self-distillation starts from, and its held-out score then (None: measured now,
    on the shipped weights). Where assets/<stage>-drafter is itself a self-distilled export, its weights are no
    starting point: the run's checkpoint must have finished (it re-exports without training), and both come from
    the shipped record. (None, None), with a one-line error, where it has not."""
    shipped = json.loads((ASSETS / f"{kind}-drafter" / "training.json").read_text())
    if "self_distill_minutes" not in shipped:
        return shipped, None
    ckpt = run_dir / "ckpt.pt"
    done = ckpt.exists() and torch.load(ckpt, weights_only=False, map_location="cpu")["step"] >= steps
    if not done:
        print(f"error: assets/{kind}-drafter is a self-distilled export already, and {run_dir} holds no finished "
              f"checkpoint of {steps} steps to export again (a new run starts from the drafter shipped before it)",
              file=sys.stderr)
        return None, None
    return shipped["earlier"], shipped.get(f"{score_key}_before")


def _calibrate_both(drafter, target, streams, device: str) -> dict:
    """DSpark's confidences calibrated for both temperatures its one set of weights serves, into its config:
    `confidence_temperatures` on the target's greedy continuations (temperature 0, the key of earlier saves) and
    `confidence_temperatures_sampled` on the rejection rule's outcomes at temperature 1. Their records."""
    from . import dspark

    at_one = dspark.calibrate(drafter, target, _heldout_sampled_rows(target, streams).to(device),
                              "the target's sampled continuations (temperature 1) of held-out windows",
                              outcome="sampled")
    at_zero = dspark.calibrate(drafter, target, _heldout_greedy_rows(target, streams).to(device),
                               "the target's greedy continuations of held-out windows")  # last: the drafter keeps it
    drafter.config.confidence_temperatures_sampled = list(at_one["temperatures"])
    drafter.sampled_confidence_temperatures = list(at_one["temperatures"])
    return {"calibration": at_zero, "calibration_sampled": at_one}


def _heldout_sampled_rows(target, streams) -> torch.Tensor:
    """(CALIBRATION_ROWS, 64 + 192): the first CALIBRATION_ROWS 64-token held-out windows continued by sampling
    at temperature 1 (seed 0)."""
    from .lm import heldout_windows
    from .selfdata import PREFIX_TOKENS, continue_rows

    prefixes = heldout_windows(streams["heldout"], PREFIX_TOKENS, CALIBRATION_ROWS)
    return continue_rows(target, prefixes, False, torch.Generator().manual_seed(0))


def _heldout_greedy_rows(target, streams) -> torch.Tensor:
    """(CALIBRATION_ROWS, 64 + 192): the target's greedy continuations of the first CALIBRATION_ROWS 64-token
    held-out windows."""
    from .lm import heldout_windows
    from .selfdata import PREFIX_TOKENS, greedy_continuations

    return greedy_continuations(target, heldout_windows(streams["heldout"], PREFIX_TOKENS, CALIBRATION_ROWS))


def _block_cycles(cfg, run_dir: Path, restart_steps: int | None) -> tuple[list, object, dict]:
    """The block drafters' phases before their greedy one, from a first phase `cfg` in run_dir: half of every batch
    text the target wrote itself, then a shorter phase at three quarters of it (a fresh schedule, half the rate),
    and, unless restart_steps is 0, a second cycle (default: as long as the first) and that self-data phase again
    at half its rate. Returns [(folder, config)] in order (the first phase first), the self-data phase's config, and
    the records of the second cycle's phases."""
    tune = replace(cfg, steps=SELF_DATA_STEPS, self_data_fraction=0.75, lr=cfg.lr / 2, warmup_steps=20)
    phases = [(run_dir, cfg), (run_dir / "self", tune)]
    restart_steps = cfg.steps if restart_steps is None else restart_steps
    records = {}
    if restart_steps:
        cycle2 = _second_cycle(cfg, restart_steps)
        tune2 = replace(tune, lr=cycle2.lr / 2, seed=cycle2.seed)
        phases += [(run_dir / "cycle2", cycle2), (run_dir / "cycle2" / "self", tune2)]
        records = {"second_cycle": asdict(cycle2), "second_self_data_phase": asdict(tune2)}
    return phases, tune, records


def _train_block_drafter(kind: str, args, tokenizer, streams, run_dir: Path) -> int:
    """DFlash or DSpark: train on the shipped target, measure on held-out windows, (DSpark) calibrate, export.
    DFlash with --no-target-features: the same recipe for the ablation that reads no target features, in its own
    folders (run_dir is then runs/dflash-nokv), exported as assets/dflash-drafter-nokv."""
    from . import dflash, dspark
    from .lm import heldout_windows, train

    target = _shipped_target(args.device)
    cls, config_of, loss_fn, score = _block_drafter_parts(kind)
    ablation = {"target_features": False} if args.no_target_features else {}
    drafter = cls(config_of(target.config, tokenizer.mask_token_id, **ablation))
    if ablation:  # its fc and hidden_norm stay as initialised: kept for the checkpoint's layout, never read
        drafter.fc.requires_grad_(False)
        drafter.hidden_norm.requires_grad_(False)
    if kind == "dspark":
        dspark.init_markov_head(drafter)
        drafter.copy_target_embeddings(target)  # frozen, stored in its checkpoint as DeepSpec's are
    dflash.init_from_target(drafter, target)
    cfg = _config(args, BLOCK_STEPS[kind], lr=1.5e-3, batch_size=DRAFTER_BATCH, seq_len=256, warmup_steps=50,
                  self_data_fraction=0.5)
    generator = torch.Generator().manual_seed(args.seed + 1)  # anchor positions
    # The self-data rows come back about six times a cycle: the target runs once per row (corpus windows as they come)
    train(drafter, streams, run_dir, cfg, loss_fn(drafter, target, generator, rows=streams["self"]),
          lambda windows: score(drafter, target, windows), loss_generators=[generator])
    # Half of every batch is text the target wrote itself: the drafter learns the continuations it will really
    # be asked to draft. Second phase: three quarters of it (a fresh, shorter schedule from the first phase's weights).
    phases, tune, records = _block_cycles(cfg, run_dir, args.restart_steps)
    for phase_dir, phase_cfg in phases[1:]:
        train(drafter, streams, phase_dir, phase_cfg, loss_fn(drafter, target, generator, rows=streams["self"]),
              lambda windows: score(drafter, target, windows), loss_generators=[generator])
    run_dirs = [phase_dir for phase_dir, _ in phases]
    greedy = _train_greedy_phase(drafter, streams, run_dirs[-1], cfg, args,
                                 loss_fn(drafter, target, generator, labels="argmax", rows=True),
                                 lambda windows: score(drafter, target, windows), generator)
    if greedy is not None:
        run_dirs.append(greedy[0])
        records["greedy_phase"] = greedy[1]
    drafter.eval()
    windows = heldout_windows(streams["heldout"], cfg.seq_len).to(args.device)
    extra = {}
    if kind == "dspark":  # confidences calibrated on what they are judged against at temperature 0
        extra["calibration"] = dspark.calibrate(drafter, target, _heldout_greedy_rows(target, streams).to(args.device),
                                                "the target's greedy continuations of held-out windows")
    if ablation:
        extra["target_features"] = False
        extra["num_trained_parameters"] = sum(p.numel() for p in drafter.parameters() if p.requires_grad)
    _export(drafter, f"{kind}-drafter" + ("-nokv" if ablation else ""), cfg, {
        "heldout_expected_accepted_teacher_forced": round(score(drafter, target, windows), 3), **extra,
        "train_minutes": _train_minutes(*run_dirs),
        "self_data_phase": asdict(tune), **records,
        "num_parameters": sum(p.numel() for p in drafter.parameters())})
    return 0


def _train_eagle3(args, streams, run_dir: Path) -> int:
    """EAGLE-3: one layer trained with training-time test on the shipped target, half of each batch
    target-written text; measured on held-out windows, exported."""
    from ..drafters.eagle3 import Eagle3DraftModel
    from . import eagle3
    from .lm import heldout_windows, train

    target = _shipped_target(args.device)
    drafter = Eagle3DraftModel(eagle3.eagle3_config(target.config))
    eagle3.init_from_target(drafter, target)
    cfg = _config(args, 1600, lr=2e-3, batch_size=DRAFTER_BATCH, seq_len=256, warmup_steps=40,
                  self_data_fraction=0.5)
    generator = torch.Generator().manual_seed(args.seed + 1)  # anchor positions

    def score(windows: torch.Tensor) -> float:
        return eagle3.eagle3_acceptance(drafter, target, windows)

    train(drafter, streams, run_dir, cfg, eagle3.eagle3_loss(drafter, target, generator, rows=streams["self"]), score,
          loss_generators=[generator])
    run_dirs, records = [run_dir], {}
    greedy = _train_greedy_phase(drafter, streams, run_dir, cfg, args,
                                 eagle3.eagle3_loss(drafter, target, generator, labels="argmax", rows=True), score,
                                 generator)
    if greedy is not None:
        run_dirs.append(greedy[0])
        records["greedy_phase"] = greedy[1]
    drafter.eval()
    windows = heldout_windows(streams["heldout"], cfg.seq_len).to(args.device)
    _export(drafter, "eagle3-drafter", cfg, {
        "heldout_expected_accepted_k4_teacher_forced": round(score(windows), 3),
        "train_minutes": _train_minutes(*run_dirs), **records,
        "num_parameters": sum(p.numel() for p in drafter.parameters()),
        "num_trained_parameters": sum(p.numel() for p in drafter.parameters() if p.requires_grad)})
    return 0


MATCHED_WITH = "dspark"  # --matched: the block drafter whose schedule the serial drafters follow, phase for phase
MATCHED_DIRS = {"eagle3": "eagle3-matched", "small-lm-drafter": "small-lm-matched"}  # in runs/


def _matched_parts(stage: str, target, tokenizer, generator: torch.Generator):
    """A serial drafter trained on the block drafters' budget: its fresh model, its loss for given labels, its held-out
    score (and that score's training.json key), its first phase's peak rate and its folder's name when exported.
    EAGLE-3 takes the labels the block drafter's phase took (argmax in the greedy phase, the written tokens in the
    self-distillation); the small LM its own distillation on the target's whole distribution in every phase."""
    if stage == "eagle3":
        from ..drafters.eagle3 import Eagle3DraftModel
        from . import eagle3

        model = Eagle3DraftModel(eagle3.eagle3_config(target.config))
        eagle3.init_from_target(model, target)
        return (model,
                lambda labels, rows=False: eagle3.eagle3_loss(model, target, generator, labels=labels, rows=rows),
                lambda windows: eagle3.eagle3_acceptance(model, target, windows), _score_key("eagle3"), 2e-3, "eagle3")
    from transformers import Qwen3ForCausalLM

    from .configs import small_lm_config
    from .lm import distill_loss, heldout_loss

    model = Qwen3ForCausalLM(small_lm_config(len(tokenizer)))
    return (model, lambda labels, rows=False: distill_loss(model, target, rows),
            lambda windows: heldout_loss(model, windows),
            "heldout_ce_fp32", 3e-3, "small-lm-drafter")


def _train_matched(stage: str, args, tokenizer, streams) -> int:
    """A serial drafter (EAGLE-3, the small LM) on the block drafters' budget (--matched): DSpark's recorded schedule
    phase for phase, the same steps, batch, window and rows (its first cycle on corpus windows half target-written,
    the self-data phase, a second cycle and that phase again, the greedy phase, then the self-distillation phase on
    the greedy and sampled rows together), with the drafter's own loss and peak rate (_matched_parts), from a fresh
    drafter; every phase on the shipped target (DSpark's first cycles learned the 16-layer target before it grew,
    runs/selfdata.pt is now the grown one's text). In runs/<stage>-matched/ (MATCHED_DIRS), each phase in its own
    folder, resumed from its checkpoints; exported to its export/, never to assets/ (the engine drafts with it once
    it is copied to assets/<stage>). The schedule comes from assets/dspark-drafter/training.json alone."""
    from .lm import TrainConfig, heldout_windows, train

    block = json.loads((ASSETS / f"{MATCHED_WITH}-drafter" / "training.json").read_text())
    schedule = block["earlier"] if "self_distill_minutes" in block else block  # its phases before self-distillation
    first = TrainConfig(**schedule["train_config"])
    target = _shipped_target(args.device)
    generator = torch.Generator().manual_seed(args.seed + 1)  # anchor positions (EAGLE-3)
    model, loss, score, score_key, lr, name = _matched_parts(stage, target, tokenizer, generator)
    run_dir = RUNS / MATCHED_DIRS[stage]
    cfg = _config(args, first.steps, lr=lr, batch_size=first.batch_size, seq_len=first.seq_len,
                  warmup_steps=first.warmup_steps, self_data_fraction=first.self_data_fraction)
    phases, tune, records = _block_cycles(cfg, run_dir, schedule.get("second_cycle", {}).get("steps", 0))
    for phase_dir, phase_cfg in phases:
        print(f"{stage} matched: {phase_dir.relative_to(RUNS)}, {phase_cfg.steps} steps", flush=True)
        # half or three quarters of each batch self-data rows, each drawn about six times a cycle: kept per row
        train(model, streams, phase_dir, phase_cfg, loss("soft", rows=streams["self"]), score,
              loss_generators=[generator])
    # the last two phases draw fixed rows again and again: the target runs once per row (teacher.RowTeacher)
    greedy = _train_greedy_phase(model, streams, phases[-1][0], cfg, args, loss("argmax", rows=True), score, generator,
                                 default_steps={stage: schedule.get("greedy_phase", {}).get("steps", 0)})
    run_dirs = [phase_dir for phase_dir, _ in phases] + ([greedy[0]] if greedy else [])
    if greedy:
        records["greedy_phase"] = {**greedy[1], "labels": "argmax" if stage == "eagle3" else "soft"}
    distill = block.get("train_config") if "self_distill_minutes" in block else None
    if distill:  # the last phase: the target's own outputs at both temperatures
        rows, greedy_rows, sampled_rows = _self_distill_rows()
        phase = replace(cfg, steps=distill["steps"], batch_size=distill["batch_size"], self_data_fraction=1.0,
                        lr=cfg.lr / 3, warmup_steps=distill["warmup_steps"], seed=args.seed + 13,
                        seq_len=rows.shape[1])
        train(model, {**streams, "self": rows}, run_dir / "distill", phase, loss("written", rows=True), score,
              loss_generators=[generator])
        run_dirs.append(run_dir / "distill")
        records["self_distill_phase"] = {**asdict(phase), "labels": "written" if stage == "eagle3" else "soft",
                                         "rows": _rows_record(greedy_rows, sampled_rows)}
    model.eval()
    windows = heldout_windows(streams["heldout"], cfg.seq_len).to(args.device)
    _export(model, name, cfg, {
        score_key: round(score(windows), 4), "matched_with": f"assets/{MATCHED_WITH}-drafter's schedule",
        "self_data_phase": asdict(tune), **records, "train_minutes": _train_minutes(*run_dirs),
        "train_tokens": sum(c.steps * c.batch_size * c.seq_len for _, c in phases) + sum(
            r["steps"] * r["batch_size"] * r["seq_len"] for key, r in records.items()
            if key in ("greedy_phase", "self_distill_phase")),
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "num_trained_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)},
        out=run_dir / "export")
    return 0


def _matched_or_refused(args, tokenizer, streams) -> int:
    """--matched: refused in one line without the rows its phases read (self-data, greedy and sampled rows)."""
    if not (RUNS / "selfdata.pt").exists():
        print("error: run `python -m engine.train self-data` first", file=sys.stderr)
        return 2
    if _refused_without_distill_rows():
        return 2
    return _train_matched(args.stage, args, tokenizer, {**streams, "self": torch.load(RUNS / "selfdata.pt")})


def _write_prompt_sets() -> None:
    from .prompts import heldout_prompts, validation_prompts, write_prompts

    print(f"wrote {write_prompts(ASSETS / 'prompts' / 'heldout.jsonl', heldout_prompts())} held-out prompts")
    print(f"wrote {write_prompts(ASSETS / 'prompts' / 'validation.jsonl', validation_prompts())} validation prompts")


def _parser() -> argparse.ArgumentParser:
    """The command line: the stage, then what shapes its schedule, the regime it trains in, and where it runs."""
    parser = argparse.ArgumentParser(prog="python -m engine.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["tokenizer", "prompts", "target", "small-lm-drafter", "self-data", "greedy-data",
                                          "sampled-data", "dflash", "dspark", "eagle3", "card", "reexport"])
    parser.add_argument("--steps", type=int,
                        help="optimizer steps for the whole run (self-data, greedy-data: rows to write)")
    parser.add_argument("--seed", type=int, default=0)
    _add_schedule_arguments(parser)
    _add_regime_arguments(parser)
    parser.add_argument("--bench", type=Path, action="append",
                        help="card: a report of `python -m engine.measure.bench --json PATH` on the shipped weights, for the "
                             "card's speed table; given twice, a quiet run and one with --busy. Default: the speed "
                             "table of the card written before, while its weights are those in assets/")
    parser.add_argument("--no-target-features", action="store_true",
                        help="dflash: the same recipe for a drafter that reads no target features (keys and values "
                             "of the block alone: what KV injection buys), in runs/dflash-nokv/ -> "
                             "assets/dflash-drafter-nokv/")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (two trainings at once: 1 each)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N: where the models train")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"],
                        help="bf16: forward passes in bfloat16 autocast, float32 weights (half the time on a CPU "
                             "with AVX-512 BF16, several times the time on one without); fp32: float32 throughout; "
                             "auto (the default): bf16 on a GPU or a CPU that computes it natively, else fp32")
    return parser


def _add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """How long each phase of a stage trains, and what the target's run adds (a second cycle, growth, unlikelihood)."""
    parser.add_argument("--restart-steps", type=int,
                        help="target, dflash, dspark: a second cosine cycle of this many steps from the first "
                             "one's weights (fresh optimizer, half the peak rate; drafters then repeat their "
                             "self-data phase); 0: none. Default: none for the target, as long as the first "
                             "phase for the block drafters. Results: docs/experiments.md")
    parser.add_argument("--greedy-steps", type=int,
                        help="dflash, dspark, eagle3: steps of the last phase, on the target's greedy "
                             "continuations only (runs/greedy.pt); 0: none. Default: "
                             + ", ".join(f"{steps} ({stage})" for stage, steps in GREEDY_STEPS.items()))
    parser.add_argument("--unloop-steps", type=int,
                        help=f"target: a last phase of this many steps, unlikelihood against its own greedy "
                             f"loops (engine/train/unloop.py; {UNLOOP_STEPS_TRIED} with --unloop-rule ngrams: no "
                             f"loops, but a target far harder to draft). Default: none")
    parser.add_argument("--unloop-rule", default="tails", choices=list(UNLOOP_RULES),
                        help="with --unloop-steps: the tokens penalised, those of loops under way (tails) or every "
                             "token completing a repeated 4-gram (ngrams, Welleck et al.). Default: tails")
    parser.add_argument("--grow-layers", type=int,
                        help="target: after its cycles, deepen it to this many layers computing the same function "
                             "(engine/train/grow.py), then train on (--grow-steps); before --unloop-steps. "
                             "dflash|dspark --self-distill: the shipped drafter deepened to that many layers before "
                             "its phase (runs/<stage>-selfdistill[-dN]-gLAYERS). Default: none")
    parser.add_argument("--grow-steps", type=int,
                        help=f"with --grow-layers: steps of training after growing. Default: {GROW_STEPS}")


def _add_regime_arguments(parser: argparse.ArgumentParser) -> None:
    """What a drafter stage trains from and on: the shipped weights, sampled rows, the papers' regime, a matched
    budget, and that regime's loss and block."""
    parser.add_argument("--from-shipped", action="store_true",
                        help=f"target: train the shipped target (assets/target) on, a further cosine cycle of --steps "
                             f"steps (default {MORE_STEPS}) in runs/target-more, then --unloop-steps; dflash, dspark, "
                             f"eagle3: only a greedy phase (--greedy-steps, default "
                             + ", ".join(f"{steps} ({stage})" for stage, steps in MORE_GREEDY_STEPS.items())
                             + ") from the shipped drafter's weights, in runs/<stage>-more. The record in "
                               "training.json keeps the earlier one; a second round trains in runs/<stage>-more2, "
                               "with seeds of its own")
    parser.add_argument("--sampled", action="store_true",
                        help="dflash, eagle3: the checkpoint used above temperature 0, from the shipped "
                             "drafter's weights, a distribution phase on runs/sampled.pt (`sampled-data`) of --steps "
                             "steps (default " + ", ".join(f"{steps} ({stage})" for stage, steps in SAMPLED_STEPS.items())
                             + ") -> assets/<stage>-drafter-sampled/. Not dspark: its self-distilled weights "
                               "(--self-distill) serve every temperature")
    parser.add_argument("--self-distill", action="store_true",
                        help=f"dflash, dspark, eagle3: the papers' regime, from the shipped drafter's weights one phase "
                             f"on the target's greedy and sampled rows together (runs/greedy.pt, runs/sampled.pt), "
                             f"--steps steps (default {SELF_DISTILL_STEPS}), the same for the three -> "
                             f"runs/<stage>-selfdistill[-dN]/export/ (never assets/)")
    parser.add_argument("--matched", action="store_true",
                        help=f"eagle3, small-lm-drafter: a fresh drafter on the block drafters' budget, DSpark's "
                             f"schedule phase for phase from assets/{MATCHED_WITH}-drafter/training.json (the same "
                             "steps and rows, its self-distillation last) -> runs/<stage>-matched/export/ (never "
                             "assets/; scripts/train_matched.sh)")
    parser.add_argument("--tv-loss", action="store_true",
                        help="with dflash --self-distill: the DSpark paper's loss, 0.1 CE on the target's argmax + 0.9 "
                             "TV against its distribution (DFlash's position weights), instead of CE on the written "
                             "token: one set of weights meant for every temperature "
                             "-> runs/dflash-selfdistill[...]-tv/")
    parser.add_argument("--drafts", type=int,
                        help="with --self-distill, dflash and dspark: drafts per block (15: z-lab's block 16). "
                             "Default: the shipped drafter's")


def _misuse(args) -> str | None:
    """Why these arguments do not go together, in one line (argparse's error then exits 2); None where they do."""
    if args.restart_steps is not None and (args.restart_steps < 0 or (
            args.restart_steps and args.stage not in ("target", "dflash", "dspark"))):
        return "--restart-steps takes a number of steps ≥ 0, for the target, dflash and dspark stages only"
    if args.greedy_steps is not None and (args.greedy_steps < 0 or args.stage not in ("dflash", "dspark", "eagle3")):
        return "--greedy-steps takes a number of steps ≥ 0, for the dflash, dspark and eagle3 stages only"
    if args.unloop_steps is not None and (args.unloop_steps < 0 or args.stage != "target"):
        return "--unloop-steps takes a number of steps ≥ 0, for the target stage only"
    grows_drafter = args.self_distill and args.stage in ("dflash", "dspark") and args.grow_steps is None
    if (args.grow_layers is not None or args.grow_steps is not None) and not grows_drafter and (
            args.stage != "target" or args.grow_layers is None or (args.grow_steps or 0) < 0):
        return ("--grow-layers takes the target's new depth, --grow-steps (with it) a number of steps ≥ 0, for "
                "the target stage; or a block drafter's new depth with dflash|dspark --self-distill")
    if args.no_target_features and (args.stage != "dflash" or args.from_shipped or args.sampled):
        return "--no-target-features is for the dflash stage only, without --from-shipped or --sampled"
    if args.bench and args.stage != "card":
        return "--bench is for the card stage only"
    if args.from_shipped and (args.stage not in ("target", "dflash", "dspark", "eagle3") or args.restart_steps
                              or args.grow_layers is not None):
        return ("--from-shipped is for the target, dflash, dspark and eagle3 stages, without --restart-steps "
                "or --grow-layers")
    if args.sampled and args.stage == "dspark":
        return ("--sampled is not for dspark: its one set of weights serves every temperature, calibrated at "
                "0 and at 1 by `dspark --self-distill` (scripts/train_breakout.sh)")
    if args.sampled and (args.stage not in ("dflash", "eagle3") or args.from_shipped
                         or args.greedy_steps is not None or args.restart_steps):
        return ("--sampled is for the dflash and eagle3 stages, without --from-shipped, "
                "--greedy-steps or --restart-steps")
    if args.matched and (args.stage not in MATCHED_DIRS or args.from_shipped or args.sampled or args.self_distill
                         or args.steps is not None or args.greedy_steps is not None or args.restart_steps):
        return ("--matched is for the eagle3 and small-lm-drafter stages: their schedule is the block "
                "drafter's, with no --steps, --greedy-steps, --restart-steps, --from-shipped, --sampled or "
                "--self-distill")
    if args.self_distill and (args.stage not in ("dflash", "dspark", "eagle3") or args.from_shipped or args.sampled
                              or args.greedy_steps is not None or args.restart_steps or args.no_target_features):
        return ("--self-distill is for the dflash, dspark and eagle3 stages, without --from-shipped, --sampled, "
                "--greedy-steps, --restart-steps or --no-target-features")
    if args.tv_loss and (not args.self_distill or args.stage != "dflash"):
        return ("--tv-loss is for dflash --self-distill only (DSpark's self-distillation has its paper's loss "
                "already)")
    if args.drafts is not None and (not args.self_distill or args.stage not in ("dflash", "dspark")
                                    or not 1 <= args.drafts <= 31):
        return "--drafts takes 1 to 31 drafts per block, for dflash and dspark with --self-distill only"
    return None


def _asset_stage(args) -> int:
    """The stages that write assets/ without training: the tokenizer and prompt sets, the re-export, the card."""
    if args.stage == "tokenizer":
        from .corpus import corpus_files, write_manifest
        from .tokenizer import train_tokenizer

        train_tokenizer(ASSETS / "tokenizer")
        write_manifest(ASSETS / "corpus_manifest.json", corpus_files())
        _write_prompt_sets()
        return 0

    if args.stage == "prompts":
        _write_prompt_sets()
        return 0

    if args.stage == "reexport":
        from .card import refresh_file_facts
        from .reexport import reexport

        target = _shipped_target()
        for kind in ("dflash", "dspark"):
            names = reexport(ASSETS / f"{kind}-drafter", kind, target)
            print(f"saved {kind}-drafter again, {len(names)} weights, the same numbers")
        if (ASSETS / "model_card.json").exists():  # the same functions: the card's sizes and digests only
            refresh_file_facts()
            print("model card: sizes and weight digests of the files now in assets/")
        return 0

    if args.stage == "card":
        from .card import write_card

        try:
            card = write_card(RUNS, args.bench or ())
        except ValueError as exc:  # a bench report unreadable, not one, or not of these weights
            print(f"error: --bench: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(card, indent=1))
        return 0

    raise ValueError(f"not a stage without training: {args.stage}")


def _write_rows(args, tokenizer, streams) -> int:
    """The data stages: the rows the shipped target writes (its own text, greedy and sampled continuations)."""
    if args.stage == "self-data":
        from .selfdata import generate_rows

        torch.set_num_threads(args.threads)
        rows = generate_rows(_shipped_target(args.device), streams["train"], num_rows=args.steps or SELF_DATA_ROWS,
                             seed=args.seed, log=lambda line: print(line, flush=True))
        RUNS.mkdir(parents=True, exist_ok=True)
        torch.save(rows.to(torch.int16), RUNS / "selfdata.pt")
        return 0
    if args.stage == "greedy-data":
        from .selfdata import generate_greedy_rows

        torch.set_num_threads(args.threads)
        rows = generate_greedy_rows(_shipped_target(args.device), tokenizer, streams["train"],
                                    num_rows=args.steps or GREEDY_ROWS, seed=args.seed,
                                    log=lambda line: print(line, flush=True))
        RUNS.mkdir(parents=True, exist_ok=True)
        torch.save(rows.to(torch.int16), RUNS / "greedy.pt")
        (RUNS / "greedy.json").write_text(json.dumps({"target": _target_digest(), "rows": len(rows)}) + "\n")
        return 0
    if args.stage == "sampled-data":
        from .selfdata import generate_sampled_rows

        torch.set_num_threads(args.threads)
        rows = generate_sampled_rows(_shipped_target(args.device), tokenizer, streams["train"],
                                     num_rows=args.steps or SAMPLED_ROWS, seed=args.seed + 11,
                                     log=lambda line: print(line, flush=True))
        RUNS.mkdir(parents=True, exist_ok=True)
        torch.save(rows.to(torch.int16), RUNS / "sampled.pt")
        (RUNS / "sampled.json").write_text(json.dumps({"target": _target_digest(), "rows": len(rows)}) + "\n")
        return 0
    raise ValueError(f"not a data stage: {args.stage}")


def _train_drafter_stage(args, tokenizer, streams, run_dir: Path) -> int:
    """dflash, dspark, eagle3 (and the small LM with --matched): each regime after the rows it reads are there."""
    if args.matched:
        return _matched_or_refused(args, tokenizer, streams)
    if args.stage in ("dflash", "dspark", "eagle3") and args.self_distill:
        if _refused_without_distill_rows():
            return 2
        return _train_self_distill(args.stage, args, streams)
    if args.stage in ("dflash", "dspark", "eagle3") and args.sampled:
        if problem := _sampled_rows_problem():
            print(f"error: {problem}: run `python -m engine.train sampled-data` first", file=sys.stderr)
            return 2
        return _train_drafter_sampled(args.stage, args, streams)
    if args.stage in ("dflash", "dspark", "eagle3"):
        self_path = RUNS / "selfdata.pt"
        if args.greedy_steps != 0 and (problem := _greedy_rows_problem()):
            print(f"error: {problem}: run `python -m engine.train greedy-data` first"
                  + ("" if args.from_shipped else " (or --greedy-steps 0)"), file=sys.stderr)
            return 2
        if args.from_shipped:  # only the greedy phase: no self-data rows
            return _train_drafter_more(args.stage, args, streams)
        if not self_path.exists():
            print("error: run `python -m engine.train self-data` first", file=sys.stderr)
            return 2
        streams = {**streams, "self": torch.load(self_path)}
        if args.stage == "eagle3":
            return _train_eagle3(args, streams, run_dir)
        return _train_block_drafter(args.stage, args, tokenizer, streams, run_dir)
    raise ValueError(f"not a drafter stage: {args.stage}")


def _train_lm_stage(args, tokenizer, streams, run_dir: Path) -> int:
    """The target (fresh, grown, unlooped, or the shipped one trained on) and the small LM drafter, then exported."""
    from transformers import Qwen3ForCausalLM

    from .configs import small_lm_config, target_config
    from .lm import distill_loss, heldout_loss, heldout_windows, lm_loss, train

    if args.stage == "target" and args.from_shipped:
        return _train_target_more(args, tokenizer, streams)
    if args.stage == "target":
        cfg = _config(args, TARGET_STEPS)
        model = Qwen3ForCausalLM(target_config(len(tokenizer)))
        if args.grow_layers is not None:
            from .grow import layer_map

            try:
                layer_map(model.config.num_hidden_layers, args.grow_layers)
            except ValueError as exc:
                print(f"error: --grow-layers: {exc}", file=sys.stderr)
                return 2
        loss_fn = lm_loss(model)
    else:
        run_dir = RUNS / "small-lm-drafter" / _target_digest()
        cfg = _config(args, 600, lr=3e-3, batch_size=8, warmup_steps=50)
        model = Qwen3ForCausalLM(small_lm_config(len(tokenizer)))
        loss_fn = distill_loss(model, _shipped_target(args.device))
    phases, extra = [(run_dir, cfg)], {}
    if args.stage == "target" and args.restart_steps:  # None (the default) or 0: one cycle
        # Not used for the shipped target: harder to draft (docs/experiments.md).
        cycle2 = _second_cycle(cfg, args.restart_steps)
        phases.append((run_dir / "cycle2", cycle2))
        extra = {"second_cycle": asdict(cycle2)}
    for phase_dir, phase_cfg in phases:
        train(model, streams, phase_dir, phase_cfg, loss_fn, lambda windows: heldout_loss(model, windows))
    if args.stage == "target":
        grown = _train_grow_phase(model, streams, phases[-1][0], cfg, args)
        if grown is not None:
            phases.append(grown[:2])
            extra["grow_phase"] = grown[2]
        unloop = _train_unloop_phase(model, tokenizer, streams, phases[-1][0], cfg, args)
        if unloop is not None:
            phases.append(unloop[:2])
            extra["unloop_phase"] = unloop[2]
    ce = heldout_loss(model, heldout_windows(streams["heldout"], cfg.seq_len))
    _export(model, args.stage, cfg, {"heldout_ce_fp32": round(ce, 4), "train_minutes": _train_minutes(*dict(phases)),
                                      "train_tokens": sum(c.steps * c.batch_size * c.seq_len for _, c in phases),
                                      "num_parameters": sum(p.numel() for p in model.parameters()), **extra})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.precision == "auto":
        from .lm import native_precision

        args.precision = native_precision(args.device)
    if problem := _misuse(args):
        parser.error(problem)
    from ..models import pick_device
    from ..contract.types import EngineError

    try:
        args.device = str(pick_device(args.device))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.stage in ("tokenizer", "prompts", "reexport", "card"):
        return _asset_stage(args)
    from transformers import AutoTokenizer

    from .lm import tokenize_corpus

    tokenizer = AutoTokenizer.from_pretrained(ASSETS / "tokenizer")
    streams = tokenize_corpus(tokenizer, RUNS / "tokens.pt")
    torch.manual_seed(args.seed)
    run_dir = RUNS / (f"{args.stage}-nokv" if args.no_target_features else args.stage)
    if args.stage in ("self-data", "greedy-data", "sampled-data"):
        return _write_rows(args, tokenizer, streams)
    if args.matched or args.stage in ("dflash", "dspark", "eagle3"):
        return _train_drafter_stage(args, tokenizer, streams, run_dir)
    return _train_lm_stage(args, tokenizer, streams, run_dir)


if __name__ == "__main__":
    sys.exit(main())
