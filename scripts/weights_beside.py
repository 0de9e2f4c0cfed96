"""One drafter's shipped weights and a candidate's (a training's export), side by side in one run: the same lane
drafting with each, on the same prompts, with the baseline beside them, so that machine noise hits all three alike.

    .venv/bin/python -m scripts.weights_beside eagle3=runs/eagle3-matched/export --drafts-per-step 4,7 \
        --temperature 0,1 --limit 24 --max-new-tokens 64 --json runs/eagle3-matched/beside.json

For every temperature and drafts per step K, each prompt runs the baseline, the shipped lane and the candidate's,
in an order that turns by one place from prompt to prompt; one prompt first, untimed, warms all three. The shipped
lane drafts as the app does: above temperature 0 with the weights the preset trained for sampling where it has
them. The candidate drafts with its one set at every temperature. Each pair (candidate over shipped, each over
the baseline) gets its paired speed ratio over prompts with a 95 % interval, and each drafting lane τ (tokens a
step) and its per-position acceptance with Wilson intervals (engine/measure/decide.py); the candidate's τ over the
shipped lane's is paired prompt by prompt too, so a small difference in τ reads as a tie or not. At temperature 0
every lane must write the baseline's tokens: the script exits 1 when one does not. --busy keeps one core busy with a
second process meanwhile (the bench's busy machine).

The candidate may also be a training run's checkpoint, to measure a long run part-way (a phase it has finished, or
the one under way):

    .venv/bin/python -m scripts.weights_beside classic=runs/small-lm-matched/cycle2/self/ckpt.pt --limit 24

its weights in the shipped drafter's architecture and config, rounded to float16 as an export is, in a folder of
its own for the run (`checkpoint_folder`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from engine.contract.methods import BASELINE
from engine.contract.methods import method as method_entry
from engine.contract.presets import DEFAULT_PRESET, HELDOUT_PROMPTS, PRESETS
from engine.contract.summary import position_counts
from engine.contract.types import EngineError, GenerationConfig
from engine.loop import Engine
from engine.measure.bench import BusyMachine
from engine.measure.decide import (add_counts, pair_words, paired_ratio, pairwise, position_rows, position_words,
                                   read_prompt_file)
from engine.models import load_drafter

LANES = (BASELINE, "shipped", "candidate")  # the target alone, the lane with the shipped weights, with the candidate's
PAIRS = [("candidate", "shipped"), ("candidate", BASELINE), ("shipped", BASELINE)]


class _Lane:
    """One lane's runs at one setting, prompt by prompt: tokens, seconds, steps, per-position counts."""

    def __init__(self):
        self.tokens, self.wall_s, self.step_tokens, self.steps = [], [], 0, 0
        self.taus: list[float] = []  # each prompt's tokens a step (0 where it took no step)
        self.positions: list[list[int]] = []

    def add(self, result) -> None:
        self.tokens.append(result.summary.num_new_tokens)
        self.wall_s.append(result.summary.wall_s)
        self.step_tokens += result.summary.num_new_tokens - 1  # the prefill's token is not a step's
        self.steps += result.summary.num_steps
        self.taus.append((result.summary.num_new_tokens - 1) / result.summary.num_steps
                         if result.summary.num_steps else 0.0)
        self.positions = add_counts(self.positions, position_counts(result.steps))

    def row(self, baseline: "_Lane") -> dict:
        row = {"tokens": sum(self.tokens), "wall_s": round(sum(self.wall_s), 4),
               "tokens_per_s": round(sum(self.tokens) / sum(self.wall_s), 1),
               "speedup": round(sum(baseline.wall_s) / sum(self.wall_s), 3)}
        if self is not baseline:
            row.update(tau=round(self.step_tokens / max(self.steps, 1), 3), per_position=position_rows(self.positions))
        return row

    def speeds(self) -> list[float]:
        return [t / s if s else 0.0 for t, s in zip(self.tokens, self.wall_s)]


def checkpoint_folder(shipped_preset: str, method: str, checkpoint: Path, out: Path) -> Path:
    """A training run's checkpoint (its ckpt.pt: the model's weights beside the optimizer's state) as a checkpoint
    folder in `out`: the shipped drafter of `method` gives the architecture and config, the checkpoint every weight,
    rounded to float16 as an export is. Weights that do not fit that drafter are refused in one line."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise EngineError(f"{checkpoint}: not a training checkpoint (no model weights in it)")
    model = load_drafter(PRESETS[shipped_preset].drafters[method], method_entry(method).kinds, torch.device("cpu"),
                         torch.float32, local_files_only=True)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:  # its last line says which weights are missing, unexpected or of another shape
        reason = [line.strip() for line in str(error).splitlines() if line.strip()][-1][:200]
        raise EngineError(f"{checkpoint}: its weights do not fit the shipped {method} drafter ({reason})") from None
    model.to(torch.float16).save_pretrained(out)
    return out


def candidate_engine(shipped_preset: str, method: str, folder: Path, threads: int | None) -> Engine:
    """The shipped preset's target and tokenizer with `folder` as `method`'s only drafter, at every temperature."""
    spec = PRESETS[shipped_preset]
    name = f"{spec.name}+{method}={folder}"
    PRESETS[name] = replace(spec, name=name, drafters={method: str(folder.resolve())}, sampled_drafters={},
                            ablation_drafters={}, description=f"{spec.description}; {method} from {folder}")
    return Engine.load(name, threads=threads)


def compare(shipped: Engine, candidate: Engine, method: str, prompts: list[str], temperatures: list[float],
            drafts: list[int], max_new_tokens: int, seed: int = 0) -> list[dict]:
    """One block of figures for each temperature and K: the three lanes' rows, the pairs' paired ratios and, at
    temperature 0, the lanes that did not write the baseline's tokens (`mismatches`, prompt indices)."""
    engines = {BASELINE: shipped, "shipped": shipped, "candidate": candidate}
    blocks = []
    for temperature in temperatures:
        for k in drafts:
            common = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                                      drafts_per_step=k)
            configs = {lane: replace(common, method=BASELINE if lane == BASELINE else method) for lane in LANES}
            for lane in LANES:  # warm-up, untimed
                engines[lane].generate(prompts[0], configs[lane])
            lanes = {lane: _Lane() for lane in LANES}
            mismatches: dict[str, list[int]] = {}
            for i, prompt in enumerate(prompts):
                order = LANES[i % 3:] + LANES[:i % 3]
                results = {lane: engines[lane].generate(prompt, configs[lane]) for lane in order}
                for lane in LANES:
                    lanes[lane].add(results[lane])
                    if temperature == 0 and results[lane].output_ids != results[BASELINE].output_ids:
                        mismatches.setdefault(lane, []).append(i)
            blocks.append({"temperature": temperature, "drafts_per_step": k, "prompts": len(prompts),
                           "lanes": {lane: lanes[lane].row(lanes[BASELINE]) for lane in LANES},
                           "pairwise": pairwise({lane: lanes[lane].speeds() for lane in LANES}, PAIRS),
                           "tau_pair": paired_ratio(lanes["candidate"].taus, lanes["shipped"].taus),
                           "mismatches": mismatches})
    return blocks


def tau_words(row: dict) -> str:
    """The candidate's τ over the shipped lane's (paired_ratio of their per-prompt τ) in words, with its interval."""
    if row["low"] is None:
        return f"candidate / shipped τ: too few prompts for an interval ({row['prompts']})"
    verdict = {"a faster": "higher", "b faster": "lower", "tie": "a tie"}[row["verdict"]]
    return (f"candidate / shipped τ: {verdict}, {row['ratio']:.3f}× (95 % interval {row['low']:.3f}–{row['high']:.3f}, "
            f"{row['prompts']} prompts)")


def describe(blocks: list[dict]) -> str:
    """The blocks as a table, then each block's pairs and the two drafting lanes' per-position acceptance in words."""
    lines = ["T  K  lane       tokens/s  speedup  tau", "-- -- ---------- -------- -------- -----"]
    for b in blocks:
        for lane, row in b["lanes"].items():
            tau = f"{row['tau']:.2f}" if "tau" in row else ""
            lines.append(f"{b['temperature']:<2g} {b['drafts_per_step']:<2} {lane:<10} {row['tokens_per_s']:>8.1f} "
                         f"{row['speedup']:>7.3f}x {tau:>5}")
    for b in blocks:
        lines += ["", f"T = {b['temperature']:g}, K = {b['drafts_per_step']}, {b['prompts']} prompts:"]
        lines += ["  " + pair_words(row) for row in b["pairwise"]]
        lines.append("  " + tau_words(b["tau_pair"]))
        for lane in ("shipped", "candidate"):
            lines.append(f"  {lane} per-position acceptance: {position_words(b['lanes'][lane]['per_position'])}")
        if b["mismatches"]:
            lines.append("  NOT the baseline's tokens: " + "; ".join(
                f"{lane} on prompts {', '.join(map(str, where))}" for lane, where in b["mismatches"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("candidate", metavar="METHOD=FOLDER", help="the lane and the candidate's checkpoint folder")
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="the shipped models (default: %(default)s)")
    parser.add_argument("--prompts", type=Path, default=HELDOUT_PROMPTS)
    parser.add_argument("--limit", type=int, default=24, help="the first N prompts (0 = all)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--drafts-per-step", type=lambda v: [int(k) for k in v.split(",")], default=[4],
                        help="K, or several: 4,7")
    parser.add_argument("--temperature", type=lambda v: [float(t) for t in v.split(",")], default=[0.0],
                        help="T, or several: 0,1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a second process meanwhile")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = parser.parse_args(argv)
    method, _, folder = args.candidate.partition("=")
    try:
        if not folder:
            raise EngineError(f"{args.candidate!r}: give the lane and the folder, e.g. eagle3=runs/eagle3-matched/export")
        if args.preset not in PRESETS:
            raise EngineError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
        if method not in PRESETS[args.preset].drafters:
            raise EngineError(f"{method!r} has no shipped drafter in {args.preset!r} to set the candidate beside; "
                              f"choose one of {', '.join(PRESETS[args.preset].drafters)}")
        checkpoint = Path(folder) if Path(folder).is_file() else None
        if checkpoint is None and not (Path(folder) / "config.json").is_file():
            raise EngineError(f"{folder!r} is not a checkpoint folder (no config.json) or a training checkpoint")
        rows = read_prompt_file(args.prompts)
        prompts = [row["prompt"] for row in rows][:args.limit or None]
        with tempfile.TemporaryDirectory(prefix="candidate-") as scratch:
            weights = checkpoint_folder(args.preset, method, checkpoint, Path(scratch)) if checkpoint else Path(folder)
            shipped = Engine.load(args.preset, threads=args.threads)
            candidate = candidate_engine(args.preset, method, weights, args.threads)
            with BusyMachine() if args.busy else contextlib.nullcontext():
                blocks = compare(shipped, candidate, method, prompts, args.temperature, args.drafts_per_step,
                                 args.max_new_tokens, args.seed)
    except (EngineError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(describe(blocks))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"method": method, "candidate": folder, "preset": args.preset,
                                         "prompts": str(args.prompts), "max_new_tokens": args.max_new_tokens,
                                         "seed": args.seed, "threads": args.threads, "busy_machine": args.busy,
                                         "blocks": blocks}, indent=1))
    return 1 if any(b["mismatches"] for b in blocks) else 0


if __name__ == "__main__":
    sys.exit(main())
