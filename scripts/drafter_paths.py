"""What the drafters' fast path saves (engine/drafters/fused.py): each feature drafter's lane run twice on the shipped
models, with its fused forward over its own cache and with the network's own modules over a transformers cache
cropped every step, the two interleaved per prompt and repeat so machine noise hits both alike, one thread. Times are
the thread's CPU time (they do not grow while another process holds the core).

    .venv/bin/python scripts/drafter_paths.py [--lanes dflash dspark eagle3] [--repeats 5] [--tokens 64]

Per lane: the drafter's time a step (its draft spans) each way, the whole run's time each way, their ratios (> 1: the
fast path is faster), and whether both wrote the same tokens (tests/engine/test_fused_drafters.py checks the two
paths' drafts agree to float32 rounding).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from engine.contract.presets import load_prompts
from engine.contract.types import GenerationConfig
from engine.loop import Engine
from engine.run import Run
from engine.timing import SpanClock


def run_once(engine: Engine, prompt: str, config: GenerationConfig, fast: bool) -> tuple[float, float, int, list]:
    """(whole run's CPU s, drafting's CPU s, decode steps, tokens) of one run of the lane, its drafter on the fast path or not."""
    request = engine.requests(prompt, [config])[0]  # checked once; the run checks nothing again
    prompt_ids, drafter = list(request.prompt_ids), Run(engine).prepare(request.config)
    chain = getattr(drafter, "chain", drafter)
    if not fast:
        chain.fused = None
    clock = SpanClock(engine.device)
    started = time.perf_counter()
    steps = list(Run(engine).device_steps(prompt_ids, config, drafter, clock))
    elapsed = time.perf_counter() - started
    spans = [span for step in steps for span in clock.resolve(step.spans)]
    drafted = sum(s.end_s - s.start_s for s in spans if s.work == "draft")
    return elapsed, drafted, len(steps) - 1, [token for step in steps for token in step.kept_ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lanes", nargs="+", default=["dflash", "dspark", "eagle3"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=3, help="held-out prompts used")
    args = parser.parse_args()
    torch.set_num_threads(1)
    engine = Engine.load("tiny", "cpu")
    prompts = [p if isinstance(p, str) else p.get("prompt", p.get("text")) for p in load_prompts()][: args.prompts]
    print(f"{'lane':10} {'draft/step old':>15} {'new':>8} {'ratio':>6}   {'run old':>9} {'new':>8} {'ratio':>6}")
    for lane in args.lanes:
        config = GenerationConfig(method=lane, max_new_tokens=args.tokens, temperature=0.0, seed=0)
        times, written, same = {True: [[], []], False: [[], []]}, {}, True
        for prompt in prompts:
            for fast in (True, False):  # once each untimed: first-call costs
                run_once(engine, prompt, config, fast)
            for _ in range(args.repeats):
                for fast in (False, True):
                    elapsed, drafted, steps, tokens = run_once(engine, prompt, config, fast)
                    written.setdefault(prompt, tokens)
                    same &= written[prompt] == tokens
                    times[fast][0].append(elapsed)
                    times[fast][1].append(drafted / steps)
        old_run, new_run = (statistics.median(times[f][0]) for f in (False, True))
        old_draft, new_draft = (statistics.median(times[f][1]) for f in (False, True))
        print(f"{lane:10} {old_draft * 1e3:12.2f} ms {new_draft * 1e3:5.2f} ms {old_draft / new_draft:5.2f}x   "
              f"{old_run * 1e3:6.0f} ms {new_run * 1e3:5.0f} ms {old_run / new_run:5.2f}x   same tokens: {same}")


if __name__ == "__main__":
    main()
