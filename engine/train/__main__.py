"""Reproducible training of the embedded models: `python -m engine.train STAGE`.

Stages, in order (each writes into assets/, the checkpoints of long runs go to runs/, which git ignores):
  tokenizer   byte-level BPE on the corpus, and the held-out prompt set -> assets/tokenizer/, assets/prompts/
  target      the tiny Qwen3 target, next-token loss (~1 h)      -> assets/target/
  ar-drafter  the AR drafter, distilled from the shipped target  -> assets/ar-drafter/
Long stages resume from runs/<stage>/ckpt.pt when cut off; `--steps` sets the schedule length.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch

ASSETS = Path(__file__).resolve().parents[2] / "assets"
RUNS = Path(__file__).resolve().parents[2] / "runs"


def _export(model, name: str, cfg, extra: dict) -> None:
    """Ship weights in float16 (upcast on load) with a record of how they were made."""
    out = ASSETS / name
    model.to(torch.float16).save_pretrained(out)
    record = {"train_config": asdict(cfg), "python_version": platform.python_version(),
              "torch_version": torch.__version__, **extra}
    (out / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"exported {name} to {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["tokenizer", "target", "ar-drafter"])
    parser.add_argument("--steps", type=int, help="optimizer steps for the whole run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from .configs import ar_drafter_config, target_config
    from .corpus import corpus_files, write_manifest
    from .lm import TrainConfig, heldout_loss, heldout_windows, tokenize_corpus, train

    if args.stage == "tokenizer":
        from .tokenizer import train_tokenizer

        from .prompts import write_prompts

        train_tokenizer(ASSETS / "tokenizer")
        write_manifest(ASSETS / "corpus_manifest.json", corpus_files())
        print(f"wrote {write_prompts(ASSETS / 'prompts' / 'heldout.jsonl')} held-out prompts")
        return 0

    tokenizer = AutoTokenizer.from_pretrained(ASSETS / "tokenizer")
    streams = tokenize_corpus(tokenizer, RUNS / "tokens.pt")
    torch.manual_seed(args.seed)
    if args.stage == "target":
        cfg = TrainConfig(seed=args.seed, steps=args.steps or TrainConfig.steps)
        model = Qwen3ForCausalLM(target_config(len(tokenizer)))
        teacher = None
    else:
        cfg = TrainConfig(seed=args.seed, steps=args.steps or 1200, lr=3e-3, batch_size=8)
        model = Qwen3ForCausalLM(ar_drafter_config(len(tokenizer)))
        teacher = Qwen3ForCausalLM.from_pretrained(ASSETS / "target", dtype=torch.float32)
    run_dir = RUNS / args.stage
    train(model, streams, run_dir, cfg, teacher=teacher)
    state = torch.load(run_dir / "ckpt.pt", weights_only=False)
    ce = heldout_loss(model, heldout_windows(streams["heldout"], cfg.seq_len))
    _export(model, args.stage, cfg, {"heldout_ce_fp32": round(ce, 4), "train_minutes": round(state["elapsed_s"] / 60, 1),
                                      "train_tokens": cfg.steps * cfg.batch_size * cfg.seq_len,
                                      "num_parameters": sum(p.numel() for p in model.parameters())})
    return 0


if __name__ == "__main__":
    sys.exit(main())
