"""Speculative decoding under load: every batched lane at each concurrency, measured side by side in one run.

    python -m engine.measure.bench --requests-at-once 1,2,4,8,16,32 --json runs/concurrency.json

The same held-out prompts at every concurrency B: N of them (twice the largest B; repeated where there are fewer),
decoded at most B at once, a finished request replaced by the next waiting one (continuous batching, as a serving
engine keeps its batch full), so each row measures the same requests and only how many run at once changes.
transformers' batched `generate` has no such refill: it decodes them in batches of B, one after another. Every
batched lane (engine/batch.py) and transformers run in turn, twice, each lane's faster round kept (so machine noise
hits them alike). Per lane and B: throughput (new tokens per second over all N), speedup over the batched baseline
at the same B, τ, drafted tokens verified per request per step, and whether every request wrote its own
single-request greedy output. At B = 1 the batched path is also timed against the single-request loop
(engine/run.py) on the first prompt.

With `pairs`, DSpark's scheduler is also set against DSpark verifying everything at the largest B in that many
adjacent pairs of runs, the order alternating (`scheduler_versus_all`): the ratio of their speeds with its 95 %
interval over the pairs, where the sweep's faster-of-two rounds give one figure and no spread (two such figures
for lanes a few percent apart can come out either way on this machine).
"""

from __future__ import annotations

import time

import torch

from ..batch import MAX_BATCH, generate_batch
from ..contract.methods import BASELINE, METHOD_REGISTRY, method as method_entry, methods_where
from ..contract.types import EngineError, GenerationConfig, check_stop
from ..loop import Engine
from .sweep import interval_row

ROUNDS = 2
REQUESTS_PER_SLOT = 2  # requests per place in the largest batch: the batch stays full for most of the run
VERIFY_ALL, VERIFY_N = "_verify_all", "_verify_"  # a cutting method's lane without its scheduler, or with a fixed cut


def scheduled_method() -> str | None:
    """The batched method whose scheduler may verify fewer tokens than were drafted (methods.Method.cuts)."""
    return next(iter(methods_where(batched=True, cuts=True)), None)


def batched_lanes() -> tuple[str, ...]:
    """Every method that runs batched (methods.Method.batched), and the scheduled one verifying its whole block
    beside its scheduler's choice."""
    scheduled = scheduled_method()
    return methods_where(batched=True) + ((scheduled + VERIFY_ALL,) if scheduled else ())


BATCHED_LANES = batched_lanes()


def lane_config(lane: str, max_new_tokens: int) -> GenerationConfig:
    """A lane's settings: its method's default draft length. `<method>_verify_all` is a cutting method (DSpark)
    with no scheduler, and `<method>_verify_N` it verifying its first N drafts every step (a fixed cut: what no
    scheduler can beat by much unless some fixed cut does)."""
    for name in methods_where(batched=True, cuts=True):
        fixed = lane.removeprefix(name + VERIFY_N)
        if lane.startswith(name + VERIFY_N) and fixed.isdigit():
            return GenerationConfig(method=name, max_new_tokens=max_new_tokens, drafts_per_step=int(fixed),
                                    scheduler="none")
        if lane == name + VERIFY_ALL:
            return GenerationConfig(method=name, max_new_tokens=max_new_tokens, drafts_per_step=max(
                method_entry(name).default_drafts, 1), scheduler="none")
    if lane not in METHOD_REGISTRY or not method_entry(lane).batched:
        raise EngineError(f"no batched lane {lane!r}; choose among {', '.join(batched_lanes())} or "
                          f"{scheduled_method()}{VERIFY_N}N")
    return GenerationConfig(method=lane, max_new_tokens=max_new_tokens, drafts_per_step=max(
        method_entry(lane).default_drafts, 1), scheduler="throughput")


def peak_rss_mib() -> float | None:
    """The process's peak resident memory so far, MiB (None where the platform does not say)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _sync(engine: Engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()


def hf_batched_generate(engine: Engine, prompt_ids: list[list[int]], max_new_tokens: int) -> tuple[list[list[int]], float]:
    """transformers' `generate` over the batch, left-padded, greedy: its outputs (cut at end-of-text) and wall time."""
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), engine.eos_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompt_ids):
        ids[b, width - len(p):] = torch.tensor(p)
        mask[b, width - len(p):] = 1
    _sync(engine)
    start = time.perf_counter()
    out = engine.target.generate(ids.to(engine.device), attention_mask=mask.to(engine.device), do_sample=False,
                                 max_new_tokens=max_new_tokens, pad_token_id=engine.eos_id,
                                 eos_token_id=engine.eos_id)
    _sync(engine)
    wall = time.perf_counter() - start
    outputs = []
    for row in out[:, width:].tolist():
        outputs.append(row[: row.index(engine.eos_id) + 1] if engine.eos_id in row else row)
    return outputs, wall


def check_requests_at_once(requests_at_once: list[int]) -> None:
    """One line for a number of requests at once the engine does not take."""
    for b in requests_at_once:
        if not 1 <= b <= MAX_BATCH:
            raise EngineError(f"{b} requests at once is outside 1 to {MAX_BATCH}")


def concurrency_sweep(engine: Engine, prompts: list[str], max_new_tokens: int, requests_at_once: list[int],
                      lanes: tuple[str, ...] | None = None, log=print, rounds: int = ROUNDS,
                      num_requests: int | None = None, stop=None, pairs: int = 0, references: bool = True) -> dict:
    """Every lane at every number of requests at once B in `requests_at_once` (see the module's docstring) over `num_requests` requests (default
    the largest size); plain values, JSON-ready. stop: a threading.Event seen after every batch. pairs: that many
    paired runs of DSpark's scheduler against verifying everything at the largest size (none when either lane is
    not among `lanes`). references: also transformers' batched generate at every size and, at B = 1, the batched
    path against the single-request loop (without them, about half the time: a live lesson measurement's size)."""
    check_requests_at_once(requests_at_once)
    lanes = tuple(lane for lane in lanes or batched_lanes() if lane_config(lane, 1).method in engine.methods())
    requests = [prompts[i % len(prompts)] for i in range(num_requests or REQUESTS_PER_SLOT * max(requests_at_once))]
    greedy = {p: engine.generate(p, GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens)).output_ids
              for p in set(requests)}
    rows = {}
    for size in requests_at_once:  # B
        batches = [requests[i: i + size] for i in range(0, len(requests), size)]  # transformers': one after another
        runs: dict[str, object] = {lane: None for lane in lanes}
        hf_runs = None
        for _ in range(rounds):
            for lane in lanes:
                result = generate_batch(engine, requests, lane_config(lane, max_new_tokens), requests_at_once=size)
                check_stop(stop)
                if runs[lane] is None or result.wall_s < runs[lane].wall_s:
                    runs[lane] = result
            if references:
                hf_round = [hf_batched_generate(engine, [engine.encode_prompt(p) for p in batch], max_new_tokens)
                            for batch in batches]
                check_stop(stop)
                if hf_runs is None or sum(w for _, w in hf_round) < sum(w for _, w in hf_runs):
                    hf_runs = hf_round
        row = {"batches": len(batches), "lanes": {}}
        if hf_runs is not None:
            hf_tokens = sum(len(o) for outputs, _ in hf_runs for o in outputs)
            row["hf_generate"] = {
                "tokens_per_s": hf_tokens / sum(wall for _, wall in hf_runs),
                "identical": [tuple(o) for outputs, _ in hf_runs for o in outputs] == [tuple(greedy[p]) for p in requests]}
        for lane, result in runs.items():
            row["lanes"][lane] = _lane_row(result, [greedy[p] for p in requests])
        base = row["lanes"][BASELINE]
        for lane in row["lanes"].values():
            lane["speedup"] = steady_ratio(lane, base)
            lane["speedup_all"] = lane["tokens_per_s"] / base["tokens_per_s"]
        if hf_runs is not None:
            row["baseline_vs_hf"] = base["tokens_per_s"] / row["hf_generate"]["tokens_per_s"]
        if size == 1 and references:
            row["batched_vs_single_path"] = _batched_vs_single(engine, requests[0], lanes, max_new_tokens)
        rows[str(size)] = row
        log(f"B = {size}: " + ", ".join(f"{lane} {v['speedup']:.2f}× (τ {v['tau']:.2f})"
                                        for lane, v in row["lanes"].items()))
    sweep = {"sizes": list(requests_at_once), "requests": len(requests), "batching": "continuous",
             "max_new_tokens": max_new_tokens, "rounds": rounds, "lanes": list(lanes), "rows": rows,
             "identical_outputs": all(v["identical"] for r in rows.values() for v in r["lanes"].values())}
    scheduled = scheduled_method()
    if pairs and scheduled and {scheduled, scheduled + VERIFY_ALL} <= set(lanes):
        paired = scheduler_versus_all(engine, requests, [greedy[p] for p in requests], max_new_tokens, max(requests_at_once),
                                      pairs, stop)
        log(f"B = {max(requests_at_once)}: DSpark's scheduler / verifying everything {paired['mean']:.3f} "
            f"(95 % interval {paired['low']:.3f}–{paired['high']:.3f})")
        sweep["scheduler_vs_all"] = paired
        sweep["identical_outputs"] = sweep["identical_outputs"] and paired["identical"]
    return {**sweep, "peak_rss_mib": peak_rss_mib()}


def scheduler_versus_all(engine: Engine, requests: list[str], greedy: list, max_new_tokens: int, size: int,
                         pairs: int, stop=None) -> dict:
    """DSpark's scheduler against DSpark verifying everything at batch size `size`: `pairs` adjacent pairs of runs
    over the same requests, the order alternating so that a drift of the machine's speed falls on both. Each pair
    gives the ratio of their steady speeds; returned with their mean and its 95 % interval (Student's t over the
    pairs), and whether every request wrote its greedy output in every run."""
    ratios, identical, scheduled = [], True, scheduled_method()
    for i in range(pairs):
        rows = {}
        for lane in (scheduled, scheduled + VERIFY_ALL)[:: 1 if i % 2 == 0 else -1]:
            rows[lane] = _lane_row(generate_batch(engine, requests, lane_config(lane, max_new_tokens), size), greedy)
            check_stop(stop)
            identical = identical and rows[lane]["identical"]
        ratios.append(steady_ratio(rows[scheduled], rows[scheduled + VERIFY_ALL]))
    return {"size": size, "pairs": pairs, "ratios": [round(r, 4) for r in ratios],
            **interval_row(ratios, [1.0] * len(ratios)), "identical": identical}


def steady_ratio(lane: dict, base: dict) -> float:
    """A lane's speed over the baseline's while all B places were taken (a server's steady state), or over the whole
    run where either never filled them."""
    if lane["steady_tokens_per_s"] and base["steady_tokens_per_s"]:
        return lane["steady_tokens_per_s"] / base["steady_tokens_per_s"]
    return lane["tokens_per_s"] / base["tokens_per_s"]


def _lane_row(result, greedy: list) -> dict:
    """One lane's figures at one concurrency, from its faster run (a BatchResult)."""
    return {"tokens_per_s": result.tokens_per_s, "wall_s": result.wall_s,
            "steady_tokens_per_s": result.steady_tokens_per_s, "tau": result.tau,
            "verified_per_request": result.verified_per_request, "steps": result.steps,
            "draft_s": result.draft_s, "verify_s": result.verify_s,
            "identical": [r.output_ids for r in result.requests] == [tuple(g) for g in greedy]}


def _batched_vs_single(engine: Engine, prompt: str, lanes: tuple[str, ...], max_new_tokens: int) -> dict:
    """At B = 1, the batched path's wall time over the single-request loop's on the same prompt, per lane: faster
    of three interleaved runs each: the batched path's speed over the single loop's (below 1: it is slower)."""
    ratios = {}
    for lane in lanes:
        config = lane_config(lane, max_new_tokens)
        single, batched = float("inf"), float("inf")
        for _ in range(3):
            start = time.perf_counter()
            engine.generate(prompt, config)
            single = min(single, time.perf_counter() - start)
            batched = min(batched, generate_batch(engine, [prompt], config).wall_s)
        ratios[lane] = single / batched  # speed of the batched path relative to the single one
    return ratios


def concurrency_table(sweep: dict) -> list[str]:
    lanes = list(next(iter(sweep["rows"].values()))["lanes"])
    lines = [f"Concurrency sweep ({sweep['requests']} requests of {sweep['max_new_tokens']} new tokens, at most B at "
             f"once, the next joining as one finishes; faster of {sweep['rounds']} rounds). Speedup while all B places "
             "were taken, over all the requests in brackets, then τ and drafts verified a request a step",
             "", "| B | " + " | ".join(f"{lane} speedup (all; τ, verified/req)" for lane in lanes[1:])
             + " | baseline tok/s | HF generate tok/s |", "|---" * (len(lanes) + 2) + "|"]
    for size, row in sweep["rows"].items():
        cells = [f"{row['lanes'][lane]['speedup']:.2f}× ({row['lanes'][lane].get('speedup_all', 0):.2f}×; "
                 f"{row['lanes'][lane]['tau']:.2f}, {row['lanes'][lane]['verified_per_request']:.2f})"
                 for lane in lanes[1:]]
        lines.append(f"| {size} | " + " | ".join(cells) + f" | {row['lanes'][BASELINE]['tokens_per_s']:.0f} | "
                     f"{row['hf_generate']['tokens_per_s']:.0f} |")
    single = next((r["batched_vs_single_path"] for r in sweep["rows"].values() if "batched_vs_single_path" in r), None)
    if single:
        lines += ["", "B = 1, batched path speed / single-request loop: "
                  + ", ".join(f"{lane} {ratio:.2f}" for lane, ratio in single.items())]
    paired = sweep.get("scheduler_vs_all")
    if paired:
        lines += ["", f"B = {paired['size']}, DSpark's scheduler / verifying everything over {paired['pairs']} "
                  f"adjacent pairs of runs: {paired['mean']:.3f} (95 % interval "
                  f"{paired['low']:.3f}–{paired['high']:.3f}; pairs "
                  + ", ".join(f"{r:.3f}" for r in paired["ratios"]) + ")"]
    lines.append(f"every request identical to its single-request greedy run: {sweep['identical_outputs']}")
    if sweep.get("peak_rss_mib") is not None:
        lines.append(f"the process's peak resident memory: {sweep['peak_rss_mib']:.0f} MiB")
    return lines
