"""The device check: what a GPU does with the engine, in sections, each estimated from its sizes before it runs
and timed as it runs, so that one lease of a lent GPU (15 minutes in all, 10 a command) measures what it can and
a failing section stops nothing.

    python -m scripts.gpu_check --out runs/gpu                              # the quick set (about 4 minutes)
    python -m scripts.gpu_check --plan                                      # each section's estimate, nothing run
    python -m scripts.gpu_check --out runs/gpu --only recordings --full trees   # one full-size recording a call
    python -m scripts.gpu_check --out runs/gpu --only concurrency           # a call of its own
    python -m scripts.gpu_check --cpu --smoke --out runs/cpu                # every code path on the CPU, in seconds

Needs torch and transformers only (no gradio, no network). The quick set, run by default: facts, identity, census,
profile, steps, trees, recordings (at the lesson's live sizes). Estimates assume a step of the embedded models
takes HEALTHY_STEP_S until the facts section has timed this device's own; from then on they use that. A section
whose estimate would take the call past --budget-s (540 s) is skipped and says so.

- facts: versions, the device, what one kernel launch, one sync and one small host-to-device copy cost, alone and
  beside a busy Python thread; a plain step of the embedded models timed (the estimates' rate from then on).
- identity: every lane of the embedded models against the baseline in float32 and bfloat16, in three groups with one
  status each: chains, trees (at 16 and 64 nodes) and batches (of 2 and of 8), each lane's first token that leaves
  the baseline named. Chains and trees verify at the one fixed width, identical by construction; a batch runs its
  own shape, so its bfloat16 identity is reported apart and does not fail the check.
- census: per lane, the reads, host-built tensors and syncs a step (engine/measure/census.py; on CUDA also what
  `torch.cuda.set_sync_debug_mode` reports).
- profile: `torch.profiler` over one baseline and one DFlash step: top kernels, kernel launches and syncs a step,
  and a chrome trace each.
- steps: step times, eager against CUDA graphs and overlap on against off; whether the graphs write the eager
  verifies' tokens (where they do, add the device's name to engine/target/graphs.py GRAPHS_CHECKED_ON:
  `--cuda-graphs auto` then turns graphs on there); DFlash's draft-to-verify cost ratio.
- trees: the DFlash and EAGLE trees at 8, 16, 32 and 64 nodes beside their chains (τ, speedup).
- recordings: the Compare tab's default comparison and the lesson's trees and load points recorded on this device
  (scripts/device_recordings.py); with --full one of them at the lesson's recorded sizes, a call each.
- concurrency (its own call): the batched lanes at 1, 8 and 32 requests at once.
- qwen3_4b: a Qwen3-4B-shaped target with drafters of the public checkpoints' shapes (random weights): its verify
  cost against the tokens verified, every lane's draft cost.

Every section's result goes into OUT/report.json, rewritten as each ends, with its estimate and its time; one log
line a section, and one every 30 s while it runs. A call writes at most 8 files (report.json, two profile traces,
three recordings); more would go into one archive, OUT/gpu_check.tar.gz. Exit status 0 when every section ran and
every required identity held, else 1; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import sys
import threading
import time
import traceback
import warnings
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file (python scripts/gpu_check.py), the project's packages importable
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from engine.batch import generate_batch  # noqa: E402
from engine.contract.methods import BASELINE, METHOD_REGISTRY, methods_where, reads_features  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402
from engine.drafters.dflash_model import DFlashDraftModel  # noqa: E402
from engine.drafters.dspark_model import DSparkDraftModel  # noqa: E402
from engine.drafters.eagle3 import Eagle3DraftModel  # noqa: E402
from engine.loop import Engine  # noqa: E402
from engine.measure.bench import load_prompts  # noqa: E402
from engine.measure.census import KINDS, census  # noqa: E402
from engine.models import default_dtype, drafter_kind_of, load_tokenizer  # noqa: E402
from engine.run import Run  # noqa: E402
from engine.speed import time_verifies  # noqa: E402
from engine.timing import SpanClock  # noqa: E402

# Qwen3-4B and Qwen3-0.6B as published; --cpu narrows the width and keeps every depth.
QWEN3_4B = dict(num_hidden_layers=36, hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=151936)
QWEN3_06B = dict(num_hidden_layers=28, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128)
NARROW = dict(hidden_size=256, intermediate_size=768, num_attention_heads=4, num_key_value_heads=2, head_dim=64)
FEATURE_LAYERS = [1, 9, 17, 25, 33]  # DeepSpec's and z-lab's for a 36-layer target
CHAINS = methods_where(tree=False)  # every lane from the registry: a method registered there is checked too
TREES = methods_where(tree=True)
ONE_PASS = methods_where(drafts=True, one_pass=True, tree=False)  # the block drafters (DFlash, DSpark)
SMOKE = (BASELINE, *ONE_PASS[:1])  # --smoke: the baseline and the first block drafter
BATCH_SIZES = (2, 8)  # identity's batches
TREE_BUDGETS = (8, 16, 32, 64)
CONCURRENCY_SIZES = (1, 8, 32)


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
            config.num_hidden_layers, config.layer_types = layers, ["full_attention"] * layers
            config.tie_word_embeddings = False
            config.update(dict(num_target_layers=shape["num_hidden_layers"], **fields))
            return config

        mask = tokenizer.mask_token_id
        eagle3 = Eagle3DraftModel(drafter_config(1, target_layer_ids=feature_layers, ttt_length=7))
        eagle3.embed_tokens, eagle3.lm_head = target.get_input_embeddings(), target.get_output_embeddings()
        deepspec = dict(block_size=7, mask_token_id=mask, target_layer_ids=feature_layers)
        dflash = DSparkDraftModel(drafter_config(5, **deepspec, markov_rank=0, enable_confidence_head=False))
        dspark = DSparkDraftModel(drafter_config(5, **deepspec, markov_rank=256, markov_head_type="vanilla",
                                                 enable_confidence_head=True, confidence_head_with_markov=True))
        zlab_config = {"mask_token_id": mask, "target_layer_ids": feature_layers}
        zlab = DFlashDraftModel(drafter_config(5, block_size=16, dflash_config=zlab_config))
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


def measure_lanes(engine: Engine, prompts: list[str], max_new_tokens: int, drafts_per_step: dict[str, int],
                  extra: dict | None = None, warm_up: bool = True) -> dict:
    """Every lane, overlap off and on, interleaved per prompt so machine noise hits all alike, after a
    warm-up round (unless warm_up is False), each at its drafting style's entry in `drafts_per_step` (else its
    default); `extra` names further block-drafter checkpoints (z-lab's DFlash), each run in the one-pass lane that
    verifies every draft, at its whole block."""
    block = next(m for m in engine.methods() if METHOD_REGISTRY[m].one_pass and not METHOD_REGISTRY[m].cuts)
    lanes = {}  # the extra checkpoints run in `block`, the first one-pass lane that verifies every draft
    for method in engine.methods():
        entry = METHOD_REGISTRY[method]
        k = drafts_per_step.get(entry.drafting, entry.default_drafts or 1)
        for overlap in (False, True):
            config = GenerationConfig(method=method, max_new_tokens=max_new_tokens, drafts_per_step=k, overlap=overlap)
            lanes[f"{method}/overlap_{'on' if overlap else 'off'}"] = (method, config)
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


def verify_cost(engine: Engine, repeats: int, sizes=(1, 2, 4, 8, 16, 32, 64)) -> dict:
    """Milliseconds per target verify (the run's Target, as the loop runs it) of n tokens after a 128-token prompt,
    and relative to n = 1."""
    target = engine.new_target(None, 128 + max(sizes))
    seconds = time_verifies(target, engine.target.config.vocab_size, sizes, repeats=repeats)
    return {str(n): {"ms": round(t * 1e3, 3), "vs_one_token": round(t / seconds[0], 3)} for n, t in zip(sizes, seconds)}


class Check:
    """What the sections share: the arguments, the device, the prompts, and engines loaded once."""

    def __init__(self, args):
        self.args = args
        self.device = torch.device("cpu" if args.cpu else "cuda")
        self.prompts = load_prompts()[: args.prompts]
        self.tokens = args.max_new_tokens
        self.step_s = HEALTHY_STEP_S  # what the estimates assume until the facts section times this device's step
        self._engines: dict = {}

    def engine(self, dtype: str = "float32", cuda_graphs: str = "off") -> Engine:
        """The embedded models on this device in `dtype`, warmed up once (not in --smoke). In bfloat16 every verify
        runs at the fixed width, as on CUDA (on the CPU the engine verifies exact widths): what makes a run's
        bfloat16 numbers independent of how many rows were verified beside them, checked here on either device."""
        key = (dtype, cuda_graphs)
        if key not in self._engines:
            engine = Engine.load("tiny", str(self.device), dtype=dtype, cuda_graphs=cuda_graphs,
                                 fixed_width=True if dtype == "bfloat16" else None)
            if not self.args.smoke:
                engine.warm_up()
            self._engines[key] = engine
        return self._engines[key]

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _first_difference(ours, baseline) -> int | None:
    """The index of the first token where `ours` leaves `baseline` (None: identical)."""
    ours, baseline = list(ours), list(baseline)
    for i, (a, b) in enumerate(zip(ours, baseline)):
        if a != b:
            return i
    return None if len(ours) == len(baseline) else min(len(ours), len(baseline))


# --- the sections ---------------------------------------------------------------------------------------------

def section_facts(check: Check) -> dict:
    device, n = check.device, 200 if check.args.smoke else 2000
    x = torch.zeros(16, device=device)

    def per_call(work, calls: int) -> float:
        check.sync()
        start = time.perf_counter()
        for _ in range(calls):
            work()
        check.sync()
        return (time.perf_counter() - start) / calls * 1e6

    def costs() -> dict:
        return {"launch_us": round(per_call(lambda: x.add_(1), n), 2),
                "sync_us": round(per_call(lambda: x[0].item(), n // 4), 2),  # a kernel's value read on the host
                "host_to_device_us": round(per_call(lambda: torch.tensor([1, 2, 3], device=device), n // 4), 2)}

    quiet = costs()
    stop = threading.Event()

    def busy() -> None:  # a Python thread holding the interpreter lock in turns, as the app's UI thread does
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        loaded = costs()
    finally:
        stop.set()
        thread.join()
    facts = {"device": torch.cuda.get_device_name(device) if device.type == "cuda"
             else platform.processor() or platform.machine(),
             "torch": torch.__version__, "transformers": transformers.__version__,
             "python": platform.python_version(), "cuda": torch.version.cuda, "quiet": quiet,
             "beside_a_busy_python_thread": loaded}
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        facts["memory_gib"] = {"free": round(free / 2**30, 1), "total": round(total / 2**30, 1)}
    # a plain step of the embedded models, eager: the later sections' estimates are made at this rate
    summary = check.engine().generate(check.prompts[0], GenerationConfig(method=BASELINE, max_new_tokens=32)).summary
    check.step_s = summary.wall_s / max(summary.num_steps, 1)
    facts["plain_step_ms"] = round(check.step_s * 1e3, 3)
    return facts


def _identity_lanes(check: Check, dtype: str) -> dict:
    """Each group's lanes (chains, trees, batches) and their runs' configurations."""
    smoke, tokens = check.args.smoke, check.tokens
    engine = check.engine(dtype)
    chains = CHAINS if dtype == "float32" or not smoke else SMOKE  # smoke: bfloat16 is slow on a CPU
    groups = {"chains": {m: GenerationConfig(method=m, max_new_tokens=tokens) for m in chains if m in engine.methods()},
              "trees": {}, "batches": {}}
    for tree in TREES if dtype == "float32" or not smoke else ():
        if tree in engine.methods():
            for nodes in (16,) if smoke else (16, 64):
                groups["trees"][f"{tree}/{nodes}"] = GenerationConfig(method=tree, max_new_tokens=tokens,
                                                                      tree_nodes=nodes)
    for size in (2,) if smoke else BATCH_SIZES:
        for method in SMOKE[1:] if smoke else (BASELINE, *ONE_PASS):
            groups["batches"][f"{method}/batch_{size}"] = (size, GenerationConfig(method=method, max_new_tokens=tokens))
    return groups


def section_identity(check: Check) -> dict:
    """Every lane against the baseline, in float32 and bfloat16, in three groups with one status each: chains and
    trees (every single-request verify at the one fixed width on CUDA: identical by construction) and batches
    (a batch's verify runs its own shape, rows by the longest request: in bfloat16 another GEMM height may round a
    near-tie the other way, so bfloat16 batches are reported apart and do not fail the check)."""
    report, prompts = {}, check.prompts[: 2 if check.args.smoke else 3]
    for dtype in ("float32", "bfloat16"):
        engine, groups = check.engine(dtype), _identity_lanes(check, dtype)
        baselines = [engine.generate(p, groups["chains"][BASELINE]).output_ids for p in prompts]
        results = {}
        for group, lanes in groups.items():
            rows = {}
            for name, lane in lanes.items():
                if group == "batches":
                    size, config = lane
                    requests = [prompts[i % len(prompts)] for i in range(size)]
                    outputs = [r.output_ids for r in generate_batch(engine, requests, config).requests]
                    firsts = [_first_difference(o, baselines[prompts.index(p)]) for o, p in zip(outputs, requests)]
                else:
                    firsts = [_first_difference(engine.generate(p, lane).output_ids, b)
                              for p, b in zip(prompts, baselines)]
                rows[name] = {"identical": all(f is None for f in firsts), "first_difference": firsts}
            apart = group == "batches" and dtype == "bfloat16"
            results[group] = {"identical": all(r["identical"] for r in rows.values()), "required": not apart,
                              "lanes": rows}
        report[dtype] = {"device": engine.device_name, "verify_width": engine.verify_width, **results}
    return report


def section_census(check: Check) -> dict:
    engine = check.engine()
    prompt, report = check.prompts[0], {}
    debug = check.device.type == "cuda"
    for method in [*CHAINS, *TREES]:
        if method not in engine.methods():
            continue
        for temperature in (0.0, 1.0):
            config = GenerationConfig(method=method, max_new_tokens=check.tokens, temperature=temperature)
            request = engine.requests(prompt, [config])[0]  # checked once; the run checks nothing again
            prompt_ids, drafter = list(request.prompt_ids), Run(engine).prepare(request.config)
            steps = Run(engine).device_steps(prompt_ids, config, drafter, SpanClock(engine.device))
            per_step = []
            if debug:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                while True:
                    with warnings.catch_warnings(record=True) as caught, census() as counts:
                        warnings.simplefilter("always")
                        try:
                            next(steps)
                        except StopIteration:
                            break
                    row = {kind: counts[kind] for kind in KINDS}
                    if debug:
                        row["cuda_syncs"] = sum("synchroniz" in str(w.message) for w in caught)
                    per_step.append(row)
            finally:
                if debug:
                    torch.cuda.set_sync_debug_mode("default")
            steady = per_step[2:] or per_step[1:]
            report[f"{method}/T{temperature:g}"] = {
                kind: max((row[kind] for row in steady), default=0) for kind in steady[0]} if steady else {}
    return report


def section_profile(check: Check, out: Path) -> dict:
    from torch.profiler import ProfilerActivity, profile

    engine = check.engine()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if check.device.type == "cuda" else [])
    report = {}
    for method in SMOKE:
        config = GenerationConfig(method=method, max_new_tokens=max(check.tokens, 32))
        request = engine.requests(check.prompts[0], [config])[0]  # checked once; the run checks nothing again
        prompt_ids, drafter = list(request.prompt_ids), Run(engine).prepare(request.config)
        steps = Run(engine).device_steps(prompt_ids, config, drafter, SpanClock(engine.device))
        for _ in range(3):  # the prefill and two steps: caches made, kernels chosen
            next(steps)
        check.sync()
        with profile(activities=activities) as prof:
            next(steps)
            check.sync()
        steps.close()
        events = prof.key_averages()
        device_events = [e for e in events if getattr(e, "device_type", None) is not None
                         and str(e.device_type).endswith("CUDA")]
        by_name = {e.key: e.count for e in events}
        top = sorted(device_events or events, key=lambda e: -(getattr(e, "self_device_time_total", 0)
                                                               or e.self_cpu_time_total))[:10]
        trace = out / f"profile_{method}.json"
        prof.export_chrome_trace(str(trace))
        report[method] = {
            "kernel_launches": sum(c for name, c in by_name.items() if "LaunchKernel" in name),
            "syncs": sum(c for name, c in by_name.items()
                         if name in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")),
            "copies": sum(c for name, c in by_name.items() if name.startswith("cudaMemcpy")),
            "aten_ops": sum(c for name, c in by_name.items() if name.startswith("aten::")),
            "top": [{"name": e.key[:80], "count": e.count,
                     "us": round((getattr(e, "self_device_time_total", 0) or e.self_cpu_time_total), 1)}
                    for e in top],
            "chrome_trace": trace.name}
    return report


def _lane_times(engine: Engine, prompts: list[str], configs: dict) -> dict:
    """Per lane: ms per step (wall), draft and verify ms per step, τ and output ids, over `prompts`, lanes
    interleaved per prompt."""
    totals = {name: {"wall": 0.0, "draft": 0.0, "verify": 0.0, "steps": 0, "tokens": 0, "outputs": []}
              for name in configs}
    for prompt in prompts:
        for name, config in configs.items():
            r = engine.generate(prompt, config)
            t, s = totals[name], r.summary
            t["wall"] += s.wall_s
            t["draft"] += s.draft_s
            t["verify"] += s.verify_s
            t["steps"] += s.num_steps
            t["tokens"] += s.num_new_tokens
            t["outputs"].append(list(r.output_ids))
    return {name: {"ms_per_step": round(t["wall"] / max(t["steps"], 1) * 1e3, 3),
                   "draft_ms_per_step": round(t["draft"] / max(t["steps"], 1) * 1e3, 3),
                   "verify_ms_per_step": round(t["verify"] / max(t["steps"], 1) * 1e3, 3),
                   "tau": round(t["tokens"] / max(t["steps"], 1), 3),
                   "tokens_per_s": round(t["tokens"] / t["wall"], 2) if t["wall"] else None,
                   "outputs": t["outputs"]} for name, t in totals.items()}


def section_steps(check: Check) -> dict:
    prompts = check.prompts[: 2 if check.args.smoke else 4]
    modes = {"eager": "off"}
    if check.device.type == "cuda":
        modes["graphs"] = "on"
    report = {}
    for mode, graphs in modes.items():
        engine = check.engine(cuda_graphs=graphs)
        configs = {}
        for method in (BASELINE, *(m for m in CHAINS if reads_features(m))):
            if method in engine.methods():
                for overlap in (False, True):
                    configs[f"{method}/overlap_{'on' if overlap else 'off'}"] = GenerationConfig(
                        method=method, max_new_tokens=check.tokens, overlap=overlap)
        for name, config in configs.items():  # one round first: graphs captured, kernels chosen
            engine.generate(prompts[0], replace(config, max_new_tokens=8))
        report[mode] = _lane_times(engine, prompts, configs)
    eager = report["eager"]
    base = eager["baseline/overlap_off"]["outputs"]
    summary = {"plain_step_ms": {mode: lanes["baseline/overlap_off"]["ms_per_step"] for mode, lanes in report.items()},
               "dflash_draft_to_verify": {
                   mode: round(lanes["dflash/overlap_off"]["draft_ms_per_step"]
                               / lanes["dflash/overlap_off"]["verify_ms_per_step"], 3)
                   for mode, lanes in report.items() if "dflash/overlap_off" in lanes},
               "identical": {mode: {name: lane["outputs"] == base for name, lane in lanes.items()}
                             for mode, lanes in report.items()}}
    graphs = summary["identical"].get("graphs")
    if graphs and all(graphs.values()):  # the name engine/target/graphs.py GRAPHS_CHECKED_ON takes, for `auto`
        summary["graphs_checked_on"] = torch.cuda.get_device_name(check.device)
    for lanes in report.values():
        for lane in lanes.values():
            del lane["outputs"]
    return {"summary": summary, "lanes": report}


def section_trees(check: Check) -> dict:
    from engine.measure.sweep import budget_sweep

    engine = check.engine()
    budgets = (8, 16) if check.args.smoke else TREE_BUDGETS
    prompts = check.prompts[: 2 if check.args.smoke else 6]
    return budget_sweep(engine, prompts, check.tokens, budgets=budgets)


def section_concurrency(check: Check) -> dict:
    from engine.measure.concurrency import concurrency_sweep

    engine = check.engine()
    sizes = [2] if check.args.smoke else list(CONCURRENCY_SIZES)
    lanes = SMOKE if check.args.smoke else (BASELINE, *ONE_PASS)
    return concurrency_sweep(engine, check.prompts, min(check.tokens, 48), sizes, lanes=lanes,
                             log=lambda *a, **k: None, rounds=1)


def section_qwen3_4b(check: Check) -> dict:
    shaped, extra = qwen3_shaped_engine(load_tokenizer("tokenizer", local_files_only=True), check.device,
                                        narrow=check.args.cpu, smoke=check.args.smoke)
    return {"narrowed": check.args.cpu, "smoke": check.args.smoke, "dtype": str(default_dtype(check.device)),
            "verify_cost": verify_cost(shaped, check.args.repeats),
            "lanes": measure_lanes(shaped, check.prompts[:2], check.tokens, {"one_pass": 7}, extra,
                                   warm_up=not check.args.smoke)}


def section_recordings(check: Check, out: Path) -> dict:
    from scripts.device_recordings import write_recordings

    full = check.args.full
    written = write_recordings(out / "recordings", str(check.device), quick=not full or check.args.cpu,
                               engine=check.engine(), only=(full,) if full else ("comparison", "trees", "load"))
    return {"files": [str(p.relative_to(out)) for p in written],
            "bytes": sum(p.stat().st_size for p in written)}


SECTIONS = {
    "facts": lambda check, out: section_facts(check),
    "identity": lambda check, out: section_identity(check),
    "census": lambda check, out: section_census(check),
    "profile": section_profile,
    "steps": lambda check, out: section_steps(check),
    "trees": lambda check, out: section_trees(check),
    "recordings": section_recordings,
    "concurrency": lambda check, out: section_concurrency(check),
    "qwen3_4b": lambda check, out: section_qwen3_4b(check),
}
QUICK = ("facts", "identity", "census", "profile", "steps", "trees", "recordings")  # the default call
ALONE = ("concurrency",)  # a call of its own each (as are the recordings at full size: --only recordings --full)
MAX_FILES = 8  # what a lease hands back from one call: more files than this go into one archive

# The estimates' basis: seconds a step of the embedded models on a healthy GPU (eager; a plain step and a
# speculative one alike, an upper bound for the lanes that take fewer, heavier steps), until the facts section has
# timed this device's own; an engine's load and warm-up; the recorders' steps in all (scripts/device_recordings.py:
# the comparison, the trees' budgets and the load points).
HEALTHY_STEP_S = 0.008
LOAD_S = 15.0
RECORDING_STEPS = {"quick": 3_000, "comparison": 1_500, "trees": 45_000, "load": 45_000}


def estimate(name: str, check: Check) -> tuple[float, str]:
    """Seconds section `name` should take at the step time in hand (check.step_s), from its sizes; the sizes in
    words."""
    tokens, step, prompts = check.tokens, check.step_s, len(check.prompts)
    if name == "facts":
        return 10.0 + LOAD_S + 32 * step, "launch, sync and copy costs; one 32-token baseline run timed"
    if name == "identity":
        runs = (len(CHAINS) + 1 + 2 * len(TREES)) * min(prompts, 3)
        batch_steps = sum(tokens * (1 + size / 8) for size in BATCH_SIZES) * 3
        return 2 * LOAD_S + 2 * (runs * tokens + batch_steps) * step, \
            f"2 dtypes x ({runs} runs + 6 batches) x {tokens} tokens"
    if name == "census":
        runs = (len(CHAINS) + len(TREES)) * 2
        return runs * tokens * step, f"{runs} runs x {tokens} tokens"
    if name == "profile":
        return 10.0 + 80 * step, "2 profiled steps and their traces"
    if name == "steps":
        modes = 2 if check.device.type == "cuda" else 1
        runs = modes * 8 * (min(prompts, 4) + 1)
        return (modes - 1) * LOAD_S + runs * tokens * step, f"{modes} mode(s) x 8 lanes x {min(prompts, 4) + 1} runs"
    if name == "trees":
        runs = (3 + 2 * len(TREE_BUDGETS)) * min(prompts, 6)
        return runs * tokens * step, f"{runs} runs x {tokens} tokens"
    if name == "recordings":
        size = check.args.full or "quick"
        return LOAD_S + RECORDING_STEPS[size] * step, f"the {size} recording(s), about {RECORDING_STEPS[size]} steps"
    if name == "concurrency":  # each size: every request in batches of that size, 3 lanes and transformers' (≈ 2)
        requests, short = 2 * max(CONCURRENCY_SIZES), min(tokens, 48)
        steps = sum(-(-requests // size) * short * (1 + size / 8) * 5 for size in CONCURRENCY_SIZES)
        sizes = ", ".join(map(str, CONCURRENCY_SIZES))
        return steps * step, f"{requests} requests {short} tokens each, {sizes} at once"
    return 90.0, "a Qwen3-4B-shaped target's verify cost and every lane's draft cost"


def _sections(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(unknown) or '(none)'}; "
                                         f"choose among {', '.join(SECTIONS)}")
    return names


def _groups(report: dict) -> list[dict]:
    return [report[g] for g in ("chains", "trees", "batches") if g in report]


def _identity_line(result: dict) -> str:
    """One status a group and dtype, for the log: `float32 chains ok trees ok batches ok; bfloat16 ...`."""
    return "; ".join(dtype + " " + " ".join(
        f"{g} {'ok' if r['identical'] else 'DIFFER' if r['required'] else 'differ (reported apart)'}"
        for g, r in report.items() if g in ("chains", "trees", "batches"))
        for dtype, report in result.items() if isinstance(report, dict) and "chains" in report)


def _failed(name: str, result: dict) -> bool:
    """Whether a section's result says something is wrong (a lane that left the baseline), or it did not run."""
    if "error" in result or "skipped" in result:
        return True
    if name == "identity":
        return not all(group["identical"] for dtype in result.values() for group in _groups(dtype) if group["required"])
    if name == "steps":
        return not all(all(lanes.values()) for lanes in result["summary"]["identical"].values())
    return False


@contextlib.contextmanager
def _ticking(name: str, estimated: float, every: float = 30.0):
    """A log line every `every` seconds while a section runs: its time so far against its estimate."""
    done, began = threading.Event(), time.perf_counter()

    def tick() -> None:
        while not done.wait(every):
            print(f"[{name}] {time.perf_counter() - began:.0f} s of about {estimated:.0f} s", file=sys.stderr,
                  flush=True)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _bounded(out: Path, before: set[Path]) -> list[Path]:
    """The files this call wrote under `out`; more than MAX_FILES go into one archive, gpu_check.tar.gz."""
    import tarfile

    written = sorted(p for p in out.rglob("*") if p.is_file() and p not in before)
    if len(written) <= MAX_FILES:
        return written
    archive = out / "gpu_check.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in written:
            tar.add(path, arcname=str(path.relative_to(out)))
    for path in written:
        path.unlink()
    return [archive]


def _refused(args) -> str | None:
    """Why these arguments make no call (one line), or None."""
    if args.full and args.only != ["recordings"]:
        return f"--full records at full size in a call of its own: --only recordings --full {args.full}"
    alone = [name for name in args.only if name in ALONE]
    if alone and len(args.only) > 1 and not args.smoke:  # the smoke form: every code path, in seconds
        return f"{alone[0]} runs in a call of its own: --only {alone[0]}"
    if not args.cpu and not args.plan and not torch.cuda.is_available():
        return "no CUDA device here; pass --cpu to run the same checks on the CPU"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check",
                        help="folder for report.json, the profiles' traces and the recordings")
    parser.add_argument("--only", type=_sections, default=list(QUICK),
                        help=f"comma-separated sections (default the quick set: {', '.join(QUICK)}); "
                             f"among {', '.join(SECTIONS)}")
    parser.add_argument("--full", choices=("comparison", "trees", "load"),
                        help="one recording at the lesson's full sizes, in a call of its own (--only recordings)")
    parser.add_argument("--plan", action="store_true", help="print each section's estimate and run nothing")
    parser.add_argument("--budget-s", type=float, default=540.0,
                        help="skip a section whose estimate would take the call past this many seconds (default 540)")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (the 4B shape narrowed to width 256)")
    parser.add_argument("--prompts", type=int, default=4, help="held-out prompts")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9, help="timed forwards per size for the verify cost")
    parser.add_argument("--smoke", action="store_true",
                        help="8 target layers for the 4B shape, fewer prompts and sizes, no warm-up: every code path "
                             "quickly, no figures worth reading")
    args = parser.parse_args(argv)
    refused = _refused(args)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    check = Check(args)
    if args.plan:
        total = 0.0
        for name in args.only:
            seconds, words = estimate(name, check)
            total += seconds
            print(f"{name:12} about {seconds:4.0f} s  ({words})")
        print(f"{'in all':12} about {total:4.0f} s at {check.step_s * 1e3:.0f} ms a step")
        return 0
    try:
        args.out.mkdir(parents=True, exist_ok=True)  # fail before any section runs, not after
    except OSError as exc:
        print(f"error: cannot write to {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    before = {p for p in args.out.rglob("*") if p.is_file()}
    report: dict = {"device": str(check.device), "smoke": args.smoke, "sections": {}}
    failures, started = [], time.perf_counter()
    for name in args.only:
        estimated, words = estimate(name, check)
        spent, began = time.perf_counter() - started, time.perf_counter()
        if spent + estimated > args.budget_s:
            result = {"skipped": f"estimated {estimated:.0f} s at {check.step_s * 1e3:.1f} ms a step, "
                                 f"{max(args.budget_s - spent, 0):.0f} s left of the call's {args.budget_s:.0f}"}
        else:
            print(f"[{name}] about {estimated:.0f} s ({words})", file=sys.stderr, flush=True)
            try:
                with _ticking(name, estimated):
                    result = SECTIONS[name](check, args.out)
            except Exception as exc:  # a section that fails is written down; the others still run
                result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        seconds = round(time.perf_counter() - began, 1)
        report["sections"][name] = {"seconds": seconds, "estimated_s": round(estimated, 1),
                                    "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **result}
        (args.out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
        failed = _failed(name, result)
        failures += [name] if failed else []
        detail = (f": {result['error']}" if "error" in result else f": skipped, {result['skipped']}"
                  if "skipped" in result else f": {_identity_line(result)}" if name == "identity" else "")
        print(f"[{name}] {'FAILED' if failed else 'ok'} in {seconds} s (estimated {estimated:.0f} s){detail}",
              file=sys.stderr, flush=True)
    written = _bounded(args.out, before)
    print(f"{len(args.only) - len(failures)} of {len(args.only)} sections ok in "
          f"{time.perf_counter() - started:.0f} s" + (f"; failed: {', '.join(failures)}" if failures else "")
          + f"; {len(written)} file(s) written", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
