"""What keeping the target's outputs per row saves a phase on fixed rows (engine/train/teacher.py): one greedy-phase
step (argmax labels) of EAGLE-3, DFlash and DSpark (the block drafters from their shipped weights, at their shipped
blocks) and one small-LM distillation step, each on 8 of the greedy rows, with the target run on every batch and with
its outputs kept, alternating, on one thread. The kept runs have seen every row once first: the steady state of a
phase that draws each row about 30 times.

    .venv/bin/python scripts/row_teacher_times.py [--rows runs/greedy.pt] [--rounds 2] [--mixed]

--mixed: half of each batch the rows, half windows cut anywhere (as the first phases mix self-data rows with corpus
windows that never come back), the rows kept and the windows run as they come.

Needs the greedy rows (`python -m engine.train greedy-data`). Seconds a step, the mean of three steps; both ways
give the same losses to float32 rounding (tests/engine/test_teacher.py).
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import Qwen3ForCausalLM

from engine.drafters.dflash_model import DFlashDraftModel, load_block_model
from engine.drafters.dspark_model import DSparkDraftModel
from engine.drafters.eagle3 import Eagle3DraftModel
from engine.train import dflash, dspark, eagle3
from engine.train.configs import small_lm_config
from engine.train.lm import distill_loss

ROWS = 64  # the rows the batches are drawn from (each seen once before the kept runs)


def _step_s(model, loss, batches: list[torch.Tensor]) -> float:
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    start = time.perf_counter()
    for x in batches:
        loss(x).backward()
        optimizer.step()
        optimizer.zero_grad()
    return (time.perf_counter() - start) / len(batches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="runs/greedy.pt")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two ways, for each drafter")
    parser.add_argument("--mixed", action="store_true", help="half of each batch windows that never come back")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    target = Qwen3ForCausalLM.from_pretrained("assets/target", dtype=torch.float32).eval()
    rows = torch.load(args.rows)[:ROWS].long()
    generator = torch.Generator().manual_seed(0)
    batches = [rows[torch.randint(0, ROWS, (8,), generator=generator)] for _ in range(3)]
    if args.mixed:  # four rows and four windows cut at any offset of all of them (a start of a row by chance only)
        stream, width = rows.flatten(), rows.shape[1]
        batches = [torch.cat([b[:4], torch.stack([stream[s: s + width] for s in torch.randint(
            0, len(stream) - width, (4,), generator=generator).tolist()])]) for b in batches]
    drafter = Eagle3DraftModel(eagle3.eagle3_config(target.config))
    eagle3.init_from_target(drafter, target)
    small = Qwen3ForCausalLM(small_lm_config(target.config.vocab_size))
    losses = {"EAGLE-3": (drafter, lambda kept: eagle3.eagle3_loss(drafter, target, torch.Generator().manual_seed(1),
                                                                  labels="argmax", rows=kept)),
              "small LM": (small, lambda kept: distill_loss(small, target, rows=kept))}
    block = {"DFlash": (DFlashDraftModel, dflash.dflash_loss), "DSpark": (DSparkDraftModel, dspark.dspark_loss)}
    for name, (cls, loss_of) in block.items():  # loaded as a further greedy phase loads them (--from-shipped)
        model = load_block_model(cls, f"assets/{name.lower()}-drafter", torch.device("cpu"), torch.float32)
        model.requires_grad_(True)
        if cls is DSparkDraftModel:
            model.copy_target_embeddings(target)  # frozen
        losses[name] = (model, lambda kept, model=model, loss_of=loss_of: loss_of(
            model, target, torch.Generator().manual_seed(1), labels="argmax", rows=kept))
    for name, (model, make) in losses.items():
        for _ in range(args.rounds):
            times = {}
            for kept in (False, True):
                loss = make(rows if kept and args.mixed else kept)
                if kept:
                    loss(rows)  # every row once
                times[kept] = _step_s(model, loss, batches)
            print(f"{name}: target on every batch {times[False]:.2f} s a step, kept per row {times[True]:.2f} s "
                  f"({times[False] / times[True]:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
