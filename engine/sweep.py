"""Sweeps against the baseline on the same prompts: a serial drafter's speedup at every draft length K (the
K sweep: the bench's `--k-sweep` and the app's Why tab), and a method with each of its registry variants
(what each part of it buys). One implementation each, for the bench, the app and the recorded lessons.

Torch-free: it drives an Engine through `generate` and reads the plain results, so the app (which imports
no torch) can call it too. Every configuration runs on every prompt in turn, `rounds` times, and keeps its
fastest run per prompt (the least disturbed by whatever else the machine does), so machine noise hits all
K alike. Every output is checked against the baseline's.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from .methods import BASELINE, DEFAULT_METHOD, METHOD_REGISTRY
from .summary import per_position_acceptance
from .types import EngineError, GenerationConfig, Stopped

SWEEP_KS = tuple(range(1, 9))


def serial_method(engine) -> str:
    """The method a sweep measures by default: the CLI's default method when it drafts serially here, else
    the first serial drafting method this engine runs."""
    serial = [m for m in engine.methods() if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].one_pass]
    if not serial:
        raise EngineError("this engine has no serial drafter to sweep")
    return DEFAULT_METHOD if DEFAULT_METHOD in serial else serial[0]


def _costs(results: list) -> dict:
    """Totals over runs: speedup needs the wall time; τ and the draft cost come from the steps."""
    steps = sum(r.summary.num_steps for r in results)
    committed = sum(len(step.committed) for r in results for step in r.steps)
    draft_s, verify_s = sum(r.summary.draft_s for r in results), sum(r.summary.verify_s for r in results)
    return {"wall_s": sum(r.summary.wall_s for r in results), "tau": committed / steps if steps else 0.0,
            "draft_cost": draft_s / verify_s if verify_s else 0.0}


def measure(engine, prompts: list[str], configs: dict, rounds: int = 1, stop=None) -> dict:
    """Run every configuration ({key: GenerationConfig}, the baseline under the key BASELINE) on every prompt
    in turn, `rounds` times, after one unmeasured warm-up run; returns {key: its fastest result per prompt}.
    Every output must equal the baseline's on the same prompt (EngineError otherwise). stop: a threading.Event
    seen after every step of every run (Stopped once it is set)."""
    engine.generate(prompts[0], next(c for k, c in configs.items() if k != BASELINE), stop)  # warm-up, not measured
    fastest = {key: [None] * len(prompts) for key in configs}
    for _ in range(rounds):
        for i, prompt in enumerate(prompts):
            for key, config in configs.items():
                result = engine.generate(prompt, config, stop)
                best = fastest[key][i]
                if best is None or result.summary.wall_s < best.summary.wall_s:
                    fastest[key][i] = result
    for key, results in fastest.items():
        for result, reference in zip(results, fastest[BASELINE]):
            if result.output_ids != reference.output_ids:
                raise EngineError(f"{key} differs from the baseline")
    return fastest


def row(results: list, baseline: list) -> dict:
    """Speedup over the baseline (wall time over wall time, summed over the prompts), τ, the draft cost over
    the verify cost, and time per step drafting and verifying."""
    costs = _costs(results)
    steps = sum(r.summary.num_steps for r in results) or 1
    return {"speedup": round(_costs(baseline)["wall_s"] / costs["wall_s"], 3), "tau": round(costs["tau"], 3),
            "draft_cost": round(costs["draft_cost"], 3),
            "draft_ms_per_step": round(sum(r.summary.draft_s for r in results) / steps * 1e3, 3),
            "verify_ms_per_step": round(sum(r.summary.verify_s for r in results) / steps * 1e3, 3),
            "verified_per_step": round(sum(s.num_verified for r in results for s in r.steps) / steps, 3)}


def k_sweep(engine, prompts: list[str], max_new_tokens: int, ks=SWEEP_KS, method: str | None = None,
            rounds: int = 1, one_pass: bool = False, stop=None) -> dict:
    """Speedup, τ and draft cost of `method` (default: serial_method) at every K in `ks`; with `one_pass`,
    also every one-pass method at its default block length, for comparison."""
    method = method or serial_method(engine)
    ks = list(ks)
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens),
               **{(method, k): GenerationConfig(method=method, max_new_tokens=max_new_tokens, draft_len=k) for k in ks}}
    if one_pass:
        for m in engine.methods():
            entry = METHOD_REGISTRY[m]
            if entry.one_pass:
                configs[(m, entry.default_draft_len)] = GenerationConfig(
                    method=m, max_new_tokens=max_new_tokens, draft_len=entry.default_draft_len)
    try:
        fastest = measure(engine, prompts, configs, rounds, stop)
    except Stopped:
        raise
    except EngineError as exc:
        raise EngineError(f"K sweep: {exc}") from None
    baseline = fastest.pop(BASELINE)
    rows = {k: row(fastest[(method, k)], baseline) for k in ks}
    longest = [step for r in fastest[(method, ks[-1])] for step in r.steps]
    acceptance = [p for p in per_position_acceptance(longest) if p is not None] or [0.0]
    others = {m: {**row(results, baseline), "draft_len": k, "drafter": engine.drafter_label(m)}
              for (m, k), results in fastest.items() if m != method}
    return {"method": method, "drafter": engine.drafter_label(method), "rows": rows,
            "best_k": max(rows, key=lambda k: rows[k]["speedup"]), "acceptance": acceptance,
            # one draft forward over one verify forward, from the longest K's drafting time
            "per_forward_cost": rows[ks[-1]]["draft_cost"] / ks[-1], "others": others,
            "device": engine.device_name, "max_new_tokens": max_new_tokens, "num_prompts": len(prompts)}


def variant_sweep(engine, method: str, prompts: list[str], max_new_tokens: int, rounds: int = 1, stop=None) -> dict:
    """`method` at its default draft length and with each of its registry variants (one switch changed:
    DSpark without its Markov head, or verifying the whole block), against the baseline on the same prompts:
    what each part of the method buys, measured side by side."""
    entry = METHOD_REGISTRY[method]
    config = GenerationConfig(method=method, max_new_tokens=max_new_tokens, draft_len=entry.default_draft_len)
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens), method: config,
               **{f"{method}_{v.suffix}": replace(config, **dict(v.overrides)) for v in entry.variants}}
    try:
        fastest = measure(engine, prompts, configs, rounds, stop)
    except Stopped:
        raise
    except EngineError as exc:
        raise EngineError(f"variant sweep: {exc}") from None
    baseline = fastest.pop(BASELINE)
    rows = {}
    for name, results in fastest.items():
        steps = [step for r in results for step in r.steps]
        rows[name] = {**row(results, baseline), "config": {k: v for k, v in asdict(results[0].config).items()
                                                            if getattr(config, k) != v},
                      "per_position_acceptance": [None if p is None else round(p, 3)
                                                  for p in per_position_acceptance(steps)]}
    return {"method": method, "drafter": engine.drafter_label(method), "rows": rows, "device": engine.device_name,
            "max_new_tokens": max_new_tokens, "num_prompts": len(prompts)}
