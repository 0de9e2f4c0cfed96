"""The device check: every method on the embedded models and on a Qwen3-4B-shaped target with drafters of
the public checkpoints' shapes, measured side by side in one run, written to one JSON file.

    python -m scripts.gpu_check                 # on CUDA (embedded models float32, the 4B shape bfloat16)
    python -m scripts.gpu_check --cpu           # the same checks on the CPU (the 4B shape narrowed)

Needs torch and transformers only (no gradio, no network). For each family and lane: identity with the
baseline at temperature 0, τ, tokens/s, speedup, draft cost (draft time / verify time per step) and the
share of wall time in bubbles, with overlap off and on; and the target's verify cost against the number of
tokens verified. The Qwen3-4B-shaped models have random weights: their costs are real, their τ is not
(random drafters are rarely accepted), so only the embedded family's τ means anything.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from engine.measure.bench import load_prompts  # noqa: E402
from engine.drafters.dflash_model import DFlashDraftModel  # noqa: E402
from engine.drafters.dspark_model import DSparkDraftModel  # noqa: E402
from engine.drafters.eagle3 import Eagle3DraftModel  # noqa: E402
from engine.loop import Engine  # noqa: E402
from engine.contract.methods import BASELINE, METHOD_REGISTRY  # noqa: E402
from engine.models import default_dtype, drafter_kind_of, load_tokenizer  # noqa: E402
from engine.scheduler import time_verify_forwards  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402

# Qwen3-4B and Qwen3-0.6B as published; --cpu narrows the width and keeps every depth.
QWEN3_4B = dict(num_hidden_layers=36, hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=151936)
QWEN3_06B = dict(num_hidden_layers=28, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128)
NARROW = dict(hidden_size=256, intermediate_size=768, num_attention_heads=4, num_key_value_heads=2, head_dim=64)
FEATURE_LAYERS = [1, 9, 17, 25, 33]  # DeepSpec's and z-lab's for a 36-layer target


def qwen3_shaped_engine(tokenizer, device: torch.device, narrow: bool, smoke: bool = False) -> tuple[Engine, dict]:
    """Random-weight models of the public shapes: a Qwen3-4B target, Qwen3-0.6B as the small LM, DeepSpec's
    EAGLE-3 (1 layer), DFlash and DSpark (5 layers, block 7, rank 256) and z-lab's DFlash (5 layers, block 16)."""
    dtype = default_dtype(device)
    shape = dict(QWEN3_4B, **(NARROW if narrow else {}))
    feature_layers = FEATURE_LAYERS
    if smoke:  # the test suite's quick pass through every code path: 8 target layers, the tokenizer's vocabulary
        shape.update(num_hidden_layers=8, vocab_size=len(tokenizer))
        feature_layers = [1, 2, 3, 4, 5]
    base = dict(max_position_embeddings=4096, rope_theta=1_000_000.0, tie_word_embeddings=True,
                bos_token_id=0, eos_token_id=tokenizer.eos_token_id, pad_token_id=0)
    with torch.device(device):
        torch.manual_seed(0)
        target = Qwen3ForCausalLM(Qwen3Config(**shape, **base)).to(dtype).eval().requires_grad_(False)
        small = dict(QWEN3_06B, **(dict(NARROW, hidden_size=128, intermediate_size=384) if narrow else {}),
                     **({"num_hidden_layers": 4} if smoke else {}))
        small_lm = Qwen3ForCausalLM(Qwen3Config(**dict(shape, **small), **base)).to(dtype).eval().requires_grad_(False)

        def drafter_config(layers: int, **fields) -> Qwen3Config:
            config = copy.deepcopy(target.config)
            config.num_hidden_layers, config.layer_types, config.tie_word_embeddings = layers, ["full_attention"] * layers, False
            config.update(dict(num_target_layers=shape["num_hidden_layers"], **fields))
            return config

        mask = tokenizer.mask_token_id
        eagle3 = Eagle3DraftModel(drafter_config(1, target_layer_ids=feature_layers, ttt_length=7))
        eagle3.embed_tokens, eagle3.lm_head = target.get_input_embeddings(), target.get_output_embeddings()
        deepspec = dict(block_size=7, mask_token_id=mask, target_layer_ids=feature_layers)
        dflash = DSparkDraftModel(drafter_config(5, **deepspec, markov_rank=0, enable_confidence_head=False))
        dspark = DSparkDraftModel(drafter_config(5, **deepspec, markov_rank=256, markov_head_type="vanilla",
                                                 enable_confidence_head=True, confidence_head_with_markov=True))
        zlab = DFlashDraftModel(drafter_config(5, block_size=16,
                                               dflash_config={"mask_token_id": mask, "target_layer_ids": feature_layers}))
    # Each drafting method gets the stand-in of the format the qwen3-4b preset serves it with: EAGLE-3 and the small
    # LM by their kinds; a one-pass method DeepSpec's block format, with the DSpark heads where a scheduler cuts.
    by_kind = {"eagle3": eagle3, "small-lm": small_lm}
    drafters = {name: by_kind.get(entry.kinds[0]) or (dspark if entry.cuts else dflash)
                for name, entry in METHOD_REGISTRY.items() if entry.drafts}
    for model in drafters.values():
        model.to(dtype).eval().requires_grad_(False)
    zlab.to(dtype).eval().requires_grad_(False)
    engine = Engine(target, tokenizer, drafters, device, preset="qwen3-4b-shape (random weights)")
    return engine, {"dflash_zlab_b16": zlab}


def measure_lanes(engine: Engine, prompts: list[str], max_new_tokens: int, drafts_per_block: int,
                  extra: dict | None = None, warm_up: bool = True) -> dict:
    """Every lane, overlap off and on, interleaved per prompt so machine noise hits all alike, after a
    warm-up round (unless warm_up is False); `extra` names further block-drafter checkpoints (z-lab's DFlash),
    each run in the one-pass lane that verifies every draft, at its whole block."""
    block = next(m for m in engine.methods() if METHOD_REGISTRY[m].one_pass and not METHOD_REGISTRY[m].cuts)
    lanes = {}  # the extra checkpoints run in `block`, the first one-pass lane that verifies every draft
    for method in engine.methods():
        k = drafts_per_block if METHOD_REGISTRY[method].one_pass else METHOD_REGISTRY[method].default_drafts or 1
        for overlap in (False, True):
            lanes[f"{method}/overlap_{'on' if overlap else 'off'}"] = (
                method, GenerationConfig(method=method, max_new_tokens=max_new_tokens, drafts_per_step=k, overlap=overlap))
    extra = extra or {}
    totals = {name: {"tokens": 0, "steps": 0, "committed": 0, "wall_s": 0.0, "draft_s": 0.0, "verify_s": 0.0,
                     "bubble_s": 0.0, "identical": True} for name in [*lanes, *extra]}

    def run_all(prompt: str, tally: bool) -> None:
        results = {name: engine.generate(prompt, config) for name, (method, config) in lanes.items()}
        for name, model in extra.items():
            saved = engine.drafter_models[block], engine.drafter_kinds[block]
            engine.drafter_models[block], engine.drafter_kinds[block] = model, drafter_kind_of(model)
            try:
                results[name] = engine.generate(prompt, replace(lanes[f"{block}/overlap_off"][1],
                                                                drafts_per_step=model.block_size - 1))
            finally:
                engine.drafter_models[block], engine.drafter_kinds[block] = saved
        baseline = results[f"{BASELINE}/overlap_off"].output_ids
        for name, r in results.items():
            if not tally:
                continue
            t, s = totals[name], r.summary
            t["tokens"] += s.num_new_tokens
            t["steps"] += s.num_steps
            t["committed"] += sum(len(step.committed) for step in r.steps)
            t["wall_s"] += s.wall_s
            t["draft_s"] += s.draft_s
            t["verify_s"] += s.verify_s
            t["bubble_s"] += s.bubble_s
            t["identical"] &= r.output_ids == baseline

    if warm_up:
        run_all(prompts[0], tally=False)
    for prompt in prompts:
        run_all(prompt, tally=True)
    base_wall = totals[f"{BASELINE}/overlap_off"]["wall_s"]
    report = {}
    for name, t in totals.items():
        report[name] = {
            "identical_to_baseline": t["identical"], "tokens": t["tokens"],
            "tokens_per_s": round(t["tokens"] / t["wall_s"], 2), "speedup": round(base_wall / t["wall_s"], 3),
            "tau": round(t["committed"] / t["steps"], 3) if t["steps"] else None,
            "draft_cost": round(t["draft_s"] / t["verify_s"], 3) if t["verify_s"] else None,
            "bubble_share": round(t["bubble_s"] / t["wall_s"], 3)}
    return report


def verify_cost(engine: Engine, repeats: int, sizes=(1, 2, 4, 8, 16, 32)) -> dict:
    """Milliseconds per target forward of n new tokens over a 128-token cache, and relative to n = 1."""
    seconds = time_verify_forwards(engine.target, engine.device, sizes, repeats=repeats)
    return {str(n): {"ms": round(t * 1e3, 3), "vs_one_token": round(t / seconds[0], 3)} for n, t in zip(sizes, seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (the 4B shape narrowed to width 256)")
    parser.add_argument("--prompts", type=int, default=4, help="held-out prompts per family")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9, help="timed forwards per size for the verify cost")
    parser.add_argument("--smoke", action="store_true",
                        help="8 target layers, a small vocabulary, no warm-up: every code path quickly, "
                             "no figures worth reading")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check.json")
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        print("error: no CUDA device here; pass --cpu to run the same checks on the CPU", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)  # fail before the run, not after it
    device = torch.device("cpu" if args.cpu else "cuda")
    started = time.perf_counter()
    prompts = load_prompts()[: args.prompts]
    report = {"device": None, "torch": torch.__version__, "transformers": transformers.__version__,
              "python": platform.python_version(), "max_new_tokens": args.max_new_tokens, "prompts": len(prompts)}

    embedded = Engine.load("tiny", str(device))
    report["device"] = embedded.device_name
    print(f"embedded models on {embedded.device_name}", file=sys.stderr)
    report["embedded"] = {"lanes": measure_lanes(embedded, prompts, args.max_new_tokens, 7, warm_up=not args.smoke),
                          "verify_cost": verify_cost(embedded, args.repeats)}
    print(f"Qwen3-4B-shaped random models ({'narrowed, ' if args.cpu else ''}{default_dtype(device)})", file=sys.stderr)
    shaped, extra = qwen3_shaped_engine(load_tokenizer("tokenizer", local_files_only=True), device, narrow=args.cpu,
                                        smoke=args.smoke)
    report["qwen3_4b_shape"] = {"narrowed": args.cpu, "smoke": args.smoke,
                                "lanes": measure_lanes(shaped, prompts[:2], args.max_new_tokens, 7, extra,
                                                       warm_up=not args.smoke),
                                "verify_cost": verify_cost(shaped, args.repeats)}
    report["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for family in ("embedded", "qwen3_4b_shape"):
        print(f"\n{family}: lane | identical | tokens/s | speedup | τ | draft cost | bubble share")
        for name, r in report[family]["lanes"].items():
            print(f"  {name} | {r['identical_to_baseline']} | {r['tokens_per_s']} | {r['speedup']}× | {r['tau']} | "
                  f"{r['draft_cost']} | {r['bubble_share']}")
        print("  verify cost vs tokens: " + ", ".join(f"{n}: {v['vs_one_token']}×" for n, v in
                                                      report[family]["verify_cost"].items()))
    print(f"\nwrote {args.out} in {report['wall_s']} s")
    identical = all(r["identical_to_baseline"] for f in ("embedded", "qwen3_4b_shape") for r in report[f]["lanes"].values())
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
