"""The K sweep: a serial drafter's speedup at every draft length K, against the baseline, on the same
prompts. One implementation for the bench (`python -m engine.bench --k-sweep`) and the app's Why tab.

Torch-free: it drives an Engine through `generate` and reads the plain results, so the app (which imports
no torch) can call it too. Every configuration runs on every prompt in turn, `rounds` times, and keeps its
fastest run per prompt (the least disturbed by whatever else the machine does), so machine noise hits all
K alike. Every output is checked against the baseline's.
"""

from __future__ import annotations

from .methods import BASELINE, DEFAULT_METHOD, METHOD_REGISTRY
from .summary import per_position_acceptance
from .types import EngineError, GenerationConfig

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


def k_sweep(engine, prompts: list[str], max_new_tokens: int, ks=SWEEP_KS, method: str | None = None,
            rounds: int = 1, one_pass: bool = False) -> dict:
    """Speedup, τ and draft cost of `method` (default: serial_method) at every K in `ks`; with `one_pass`,
    also every one-pass method at its default block length, for comparison."""
    method = method or serial_method(engine)
    ks = list(ks)
    configs = {(BASELINE, 0): GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens),
               **{(method, k): GenerationConfig(method=method, max_new_tokens=max_new_tokens, draft_len=k) for k in ks}}
    if one_pass:
        for m in engine.methods():
            entry = METHOD_REGISTRY[m]
            if entry.one_pass:
                configs[(m, entry.default_draft_len)] = GenerationConfig(
                    method=m, max_new_tokens=max_new_tokens, draft_len=entry.default_draft_len)
    engine.generate(prompts[0], configs[(method, ks[0])])  # warm-up, not measured
    fastest = {key: [None] * len(prompts) for key in configs}
    for _ in range(rounds):
        for i, prompt in enumerate(prompts):
            for key, config in configs.items():
                result = engine.generate(prompt, config)
                best = fastest[key][i]
                if best is None or result.summary.wall_s < best.summary.wall_s:
                    fastest[key][i] = result
    baseline = fastest.pop((BASELINE, 0))
    for (m, k), results in fastest.items():
        for result, reference in zip(results, baseline):
            if result.output_ids != reference.output_ids:
                raise EngineError(f"K sweep: {m} with K={k} differs from the baseline")
    baseline_wall = _costs(baseline)["wall_s"]

    def row(results: list) -> dict:
        costs = _costs(results)
        return {"speedup": round(baseline_wall / costs["wall_s"], 3), "tau": round(costs["tau"], 3),
                "draft_cost": round(costs["draft_cost"], 3)}

    rows = {k: row(fastest[(method, k)]) for k in ks}
    longest = [step for r in fastest[(method, ks[-1])] for step in r.steps]
    acceptance = [p for p in per_position_acceptance(longest) if p is not None] or [0.0]
    others = {m: {**row(results), "draft_len": k, "drafter": engine.drafter_label(m)}
              for (m, k), results in fastest.items() if m != method}
    return {"method": method, "drafter": engine.drafter_label(method), "rows": rows,
            "best_k": max(rows, key=lambda k: rows[k]["speedup"]), "acceptance": acceptance,
            # one draft forward over one verify forward, from the longest K's drafting time
            "per_forward_cost": rows[ks[-1]]["draft_cost"] / ks[-1], "others": others,
            "device": engine.device_name, "max_new_tokens": max_new_tokens, "num_prompts": len(prompts)}
