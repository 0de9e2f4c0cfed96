"""What the target's own forward buys each lane: every lane run with the fused forward over the target's own cache
(engine/target/) and with transformers' forward and cache, side by side in one process, the two interleaved per
prompt and lane so machine noise hits both alike; and transformers' `generate` on the same weights beside them.

    python -m engine.measure.forwards --limit 12 --json runs/forwards.json
    python -m engine.measure.forwards --limit 12 --busy      # beside a second process keeping one core busy

Per lane: tokens per second each way and their ratio (> 1: the fused forward is faster), and whether both wrote the
same tokens; the baseline against transformers' greedy `generate`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch

from ..contract.methods import BASELINE, method_id, method_names
from ..contract.presets import load_prompts
from ..contract.types import EngineError, GenerationConfig
from ..loop import Engine
from .bench import BusyMachine



def compare_forwards(engine: Engine, prompts: list[str], methods, max_new_tokens: int, log=print) -> dict:
    fused = engine.fused_target
    if fused is None:
        raise EngineError(f"preset {engine.preset!r} has no fused forward to compare")
    totals = {m: {"fused": [0, 0.0], "transformers": [0, 0.0], "same": True} for m in methods}
    hf = [0, 0.0]
    try:
        for i, prompt in enumerate(prompts):
            for method in methods:
                config = GenerationConfig(method=method, max_new_tokens=max_new_tokens)
                outputs = {}
                order = ("fused", "transformers") if i % 2 == 0 else ("transformers", "fused")
                for way in order:
                    engine.fused_target = fused if way == "fused" else None
                    result = engine.generate(prompt, config)
                    totals[method][way][0] += result.summary.num_new_tokens
                    totals[method][way][1] += result.summary.wall_s
                    outputs[way] = result.output_ids
                totals[method]["same"] &= outputs["fused"] == outputs["transformers"]
            ids = torch.tensor([engine.encode_prompt(prompt)], device=engine.device)
            start = time.perf_counter()
            with torch.inference_mode():
                out = engine.target.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, min_new_tokens=1)
            hf[1] += time.perf_counter() - start
            hf[0] += out.shape[1] - ids.shape[1]
            log(f"{i + 1}/{len(prompts)} prompts", file=sys.stderr)
    finally:
        engine.fused_target = fused
    lanes = {}
    for method, t in totals.items():
        fused_rate, hf_rate = t["fused"][0] / t["fused"][1], t["transformers"][0] / t["transformers"][1]
        lanes[method] = {"fused_tokens_per_s": round(fused_rate, 2), "transformers_tokens_per_s": round(hf_rate, 2),
                         "ratio": round(fused_rate / hf_rate, 3), "same_tokens": t["same"]}
    baseline = lanes.get(BASELINE)
    report = {"lanes": lanes, "hf_generate_tokens_per_s": round(hf[0] / hf[1], 2)}
    if baseline is not None:
        hf_rate = report["hf_generate_tokens_per_s"]
        report["baseline_vs_hf_generate"] = round(baseline["fused_tokens_per_s"] / hf_rate, 3)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.measure.forwards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--limit", type=int, default=12, help="the first N held-out prompts")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--methods", type=lambda v: [method_id(m.strip()) for m in v.split(",") if m.strip()],
                        default=None, help="comma-separated (default: every registered method)")
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a second process meanwhile")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        engine = Engine.load(args.preset, args.device)
        methods = [m for m in args.methods or method_names() if m in engine.methods()]
        engine.warm_up()
        with BusyMachine() if args.busy else contextlib.nullcontext():
            report = compare_forwards(engine, load_prompts()[: args.limit], methods, args.max_new_tokens)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{engine.device_name}, {args.limit} prompts, {args.max_new_tokens} new tokens"
          + (", one core kept busy" if args.busy else ""))
    print("| lane | fused tokens/s | transformers tokens/s | fused ÷ transformers | same tokens |")
    print("|---|---|---|---|---|")
    for method, lane in report["lanes"].items():
        print(f"| {method} | {lane['fused_tokens_per_s']} | {lane['transformers_tokens_per_s']} | "
              f"{lane['ratio']:.2f}× | {lane['same_tokens']} |")
    if "baseline_vs_hf_generate" in report:
        print(f"baseline (fused) vs transformers' generate: {report['baseline_vs_hf_generate']:.2f}×")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0 if all(lane["same_tokens"] for lane in report["lanes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
