"""Sweeps against the baseline on the same prompts: a serial drafter's speedup at every draft length K (the
K sweep: the bench's `--k-sweep` and the app's Why tab), a method with each of its registry variants
(what each part of it buys), and the tree lanes at every node budget (the bench's `--budget-sweep`). One
implementation each, for the bench, the app and the recorded lessons.

Torch-free: it drives an Engine through `generate` and reads the plain results, so the app (which imports
no torch) can call it too. Every configuration runs on every prompt in turn, `rounds` times, and keeps its
fastest run per prompt (the least disturbed by whatever else the machine does), so machine noise hits all
K alike. Every output is checked against the baseline's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

from ..contract.methods import BASELINE, DEFAULT_METHOD, METHOD_REGISTRY
from ..contract.summary import per_position_acceptance
from ..contract.types import EngineError, GenerationConfig, Stopped

SWEEP_KS = tuple(range(1, 9))


def serial_method(engine) -> str:
    """The method a sweep measures by default: the CLI's default method when it drafts serially here, else
    the first serial drafting method this engine runs."""
    serial = [m for m in engine.methods()
              if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].one_pass and not METHOD_REGISTRY[m].tree]
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


def measure(engine, prompts: list[str], configs: dict, rounds: int = 1, stop=None,
            what: str = "measurement") -> dict:
    """Run every configuration ({key: GenerationConfig}, the baseline under the key BASELINE) on every prompt
    in turn, `rounds` times, after one unmeasured warm-up run; returns {key: its fastest result per prompt}.
    At temperature 0 every output must equal the baseline's on the same prompt. An EngineError (bad input, an
    output that differs) comes back as one line led by `what`, the measurement's name. stop: a threading.Event
    seen after every step of every run (Stopped once it is set, as it is)."""
    try:
        return _fastest_runs(engine, prompts, configs, rounds, stop)
    except Stopped:
        raise
    except EngineError as exc:
        raise EngineError(f"{what}: {exc}") from None


def _fastest_runs(engine, prompts: list[str], configs: dict, rounds: int, stop) -> dict:
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
        if configs[key].temperature > 0:  # samples: each lane's own draws, equal in distribution only
            continue
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
            rounds: int = 1, one_pass: bool = False, stop=None, temperature: float = 0.0) -> dict:
    """Speedup, τ and draft cost of `method` (default: serial_method) at every K in `ks`; with `one_pass`,
    also every one-pass method at its default block length, for comparison. Above temperature 0 every lane and
    the baseline sample with the same seed per prompt."""
    method = method or serial_method(engine)
    ks = list(ks)
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens, temperature=temperature),
               **{(method, k): GenerationConfig(method=method, max_new_tokens=max_new_tokens, drafts_per_step=k,
                                                temperature=temperature)
                  for k in ks}}
    if one_pass:
        for m in engine.methods():
            entry = METHOD_REGISTRY[m]
            if entry.one_pass and not entry.tree:  # the chains; trees have their own sweep (budget_sweep)
                configs[(m, entry.default_drafts)] = GenerationConfig(
                    method=m, max_new_tokens=max_new_tokens, drafts_per_step=entry.default_drafts,
                    temperature=temperature)
    fastest = measure(engine, prompts, configs, rounds, stop, what="K sweep")
    baseline = fastest.pop(BASELINE)
    rows = {k: row(fastest[(method, k)], baseline) for k in ks}
    longest = [step for r in fastest[(method, ks[-1])] for step in r.steps]
    acceptance = [p for p in per_position_acceptance(longest) if p is not None] or [0.0]
    # each lane's label as its runs give it: above temperature 0 it names the weights trained for sampling
    others = {m: {**row(results, baseline), "drafts_per_step": k, "drafter": results[0].drafter}
              for (m, k), results in fastest.items() if m != method}
    return {"method": method, "drafter": fastest[(method, ks[-1])][0].drafter, "rows": rows, "temperature": temperature,
            "best_k": max(rows, key=lambda k: rows[k]["speedup"]), "acceptance": acceptance,
            # one draft forward over one verify forward, from the longest K's drafting time
            "per_forward_cost": rows[ks[-1]]["draft_cost"] / ks[-1], "others": others,
            "device": engine.device_name, "max_new_tokens": max_new_tokens, "num_prompts": len(prompts)}


def variant_sweep(engine, method: str, prompts: list[str], max_new_tokens: int, rounds: int = 1, stop=None) -> dict:
    """`method` at its default draft length and with each of its registry variants (one switch changed:
    DSpark without its Markov head, or verifying the whole block), against the baseline on the same prompts:
    what each part of the method buys, measured side by side."""
    entry = METHOD_REGISTRY[method]
    config = GenerationConfig(method=method, max_new_tokens=max_new_tokens, drafts_per_step=entry.default_drafts)
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens), method: config,
               **{f"{method}_{v.suffix}": replace(config, **dict(v.overrides)) for v in entry.variants}}
    fastest = measure(engine, prompts, configs, rounds, stop, what="variant sweep")
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


SWEEP_TEMPERATURES = (0.0, 0.25, 0.5, 0.75, 1.0)


# Student's t at 97.5 % for 1, 2, … 30 degrees of freedom (beyond: the normal 1.96): over few clusters (a live
# measurement's few prompts) the spread between them is itself uncertain, and the interval must say so.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_critical(dof: int) -> float:
    """Student's t at 97.5 % for `dof` degrees of freedom (the normal's 1.96 beyond 30): every interval over
    prompts here, and engine/measure/decide.py's and positions.py's, reads this one."""
    return T_975[dof - 1] if 1 <= dof <= len(T_975) else 1.96


def ratio_interval(numerators: list[float], denominators: list[float], z: float | None = None
                   ) -> tuple[float, float, float]:
    """Σ numerators / Σ denominators over clusters (one per prompt: the tokens of one run are not independent),
    with its 95 % interval by the delta method over the clusters (Student's t for n − 1 degrees of freedom unless
    `z` is given); (nan, nan, nan) when the denominators sum to 0."""
    n, total = len(numerators), sum(denominators)
    if not total:
        return float("nan"), float("nan"), float("nan")
    ratio = sum(numerators) / total
    if n < 2:
        return ratio, ratio, ratio
    mean_den = total / n
    residual = sum((a - ratio * b) ** 2 for a, b in zip(numerators, denominators)) / (n - 1)
    critical = z if z is not None else t_critical(n - 1)
    half = critical * (residual / n) ** 0.5 / mean_den
    return ratio, ratio - half, ratio + half


def interval_row(numerators: list[float], denominators: list[float]) -> dict:
    """ratio_interval as plain values: {"mean", "low", "high"}, rounded to four places."""
    mean, low, high = ratio_interval(numerators, denominators)
    return {"mean": round(mean, 4), "low": round(low, 4), "high": round(high, 4)}


def acceptance_row(results: list) -> dict:
    """Over the judged drafted tokens of `results` (one run per prompt): how many, the expected acceptance (the
    mean of the rule's accept probability, min(1, p/q) under the rejection rule), the verdict rate (accepted
    among judged) and the mean overlap 1 − TV, each with its 95 % interval over prompts; τ likewise."""
    judged = [[t for s in r.steps for t in s.drafted if t.accept_prob is not None] for r in results]
    counts = [len(tokens) for tokens in judged]
    return {"judged": sum(counts),
            "expected_acceptance": interval_row([sum(t.accept_prob for t in ts) for ts in judged], counts),
            "verdict_rate": interval_row([sum(t.verdict == "accepted" for t in ts) for ts in judged], counts),
            "one_minus_tv": interval_row([sum(1 - (t.tv or 0.0) for t in ts) for ts in judged], counts),
            "tau": interval_row([sum(len(s.committed) for s in r.steps) for r in results],
                             [r.summary.num_steps for r in results])}


def survival_rows(results: list) -> dict:
    """A scheduled drafter's predicted survival (the product of its confidences up to position k) against the
    realised one (positions 1..k all accepted), per block position, over the steps of `results` that drafted a
    whole block (the longest drafted) and verified all of it: the same blocks at every position."""
    blocks = [s for r in results for s in r.steps
              if s.drafted and s.drafted[0].confidence is not None and s.num_verified == len(s.drafted)]
    longest = max((len(s.drafted) for s in blocks), default=0)
    blocks = [s for s in blocks if len(s.drafted) == longest]
    rows = {}
    for k in range(1, longest + 1):
        predicted = [math.prod(t.confidence for t in s.drafted[:k]) for s in blocks]
        realised = [float(s.num_accepted >= k) for s in blocks]
        rows[k] = {"predicted": round(sum(predicted) / len(blocks), 4), "realised": round(sum(realised) / len(blocks), 4),
                   "blocks": len(blocks)}
    return rows


def temperature_sweep(engine, prompts: list[str], max_new_tokens: int, temperatures=SWEEP_TEMPERATURES,
                      methods: list[str] | None = None, seed: int = 0, verify_rule: str = "rejection",
                      argmax_at=(), stop=None, kinds: list[str] | None = None) -> dict:
    """Every drafting method (default: all this engine runs) at every temperature, each against the baseline at
    the same temperature on the same prompts, one run per prompt: τ, speedup, the acceptance figures of
    acceptance_row; for a method that cuts (DSpark), also verifying every drafted token, with its predicted
    survival against the realised one; at each temperature in `argmax_at`, also every method proposing its
    argmax (`<method>_argmax`). Above 0 outputs are samples (the same seed per prompt for every lane); at 0
    every output must equal the baseline's. stop: a threading.Event seen after every step (Stopped once set).
    kinds: each prompt's kind of text; then each lane's row also splits τ and speedup by kind (kind_rows)."""
    if kinds is not None and len(kinds) != len(prompts):
        raise EngineError(f"temperature sweep: {len(kinds)} kinds for {len(prompts)} prompts")
    methods = [m for m in (methods or engine.methods()) if METHOD_REGISTRY[m].drafts]
    report = {"temperatures": {}, "max_new_tokens": max_new_tokens, "num_prompts": len(prompts),
              "verify_rule": verify_rule, "device": engine.device_name}
    for temperature in temperatures:
        def config(m: str, **changes) -> GenerationConfig:
            return GenerationConfig(method=m, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                                    verify_rule=verify_rule, drafts_per_step=METHOD_REGISTRY[m].default_drafts, **changes)
        configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens,
                                              temperature=temperature, seed=seed),
                   **{m: config(m) for m in methods},
                   **{f"{m}_verify_all": config(m, scheduler="none") for m in methods if METHOD_REGISTRY[m].cuts}}
        if temperature in argmax_at and temperature > 0:
            configs.update({f"{m}_argmax": config(m, proposal="argmax") for m in methods})
        results = {key: [engine.generate(prompt, c, stop) for prompt in prompts] for key, c in configs.items()}
        if temperature == 0:
            for key, runs in results.items():
                if any(r.output_ids != b.output_ids for r, b in zip(runs, results[BASELINE])):
                    raise EngineError(f"temperature sweep: {key} differs from the baseline at temperature 0")
        baseline = results.pop(BASELINE)
        serial = [m for m in methods if not METHOD_REGISTRY[m].one_pass]  # the lanes each lane's lead is paired with
        rows = {}
        for key, runs in results.items():
            by_prompt = sorted(b.summary.wall_s / r.summary.wall_s for r, b in zip(runs, baseline))
            rows[key] = {**row(runs, baseline), **acceptance_row(runs), "drafter": runs[0].drafter,
                         # each prompt's own speedup: how far one prompt's figure can sit from the whole set's
                         "speedup_by_prompt": {"min": round(by_prompt[0], 3), "median": round(by_prompt[len(by_prompt) // 2], 3),
                                               "max": round(by_prompt[-1], 3)}}
            if key.endswith("_verify_all"):
                rows[key]["survival"] = survival_rows(runs)
            if kinds is not None:
                rows[key]["by_kind"] = kind_rows(runs, baseline, kinds, {m: results[m] for m in serial
                                                                          if m != key and m in results})
        entropies = [engine.target_entropy(r.prompt_ids, r.output_ids, temperature) for r in baseline]
        report["temperatures"][str(temperature)] = {
            "lanes": rows, "target_entropy": interval_row([sum(e) for e in entropies], [len(e) for e in entropies])}
    return report


def kind_rows(results: list, baseline: list, kinds: list[str], others: dict[str, list] | None = None) -> dict:
    """τ and speedup within each kind of prompt (`kinds`, one a prompt, in the order of `results`), each with its
    95 % interval over that kind's prompts: {kind: {"prompts", "tau", "speedup", "vs"}}; the speedup is the
    baseline's summed wall time over the lane's, as `row`'s. "vs": for each lane in `others` (its runs on the same
    prompts), this lane's speed over that one's, paired prompt by prompt (their summed wall times' ratio, its
    interval over the kind's prompts): whether a lead within a kind is larger than the noise."""
    groups: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        groups.setdefault(kind, []).append(i)

    def walls(runs: list, picked: list[int]) -> list[float]:
        return [runs[i].summary.wall_s for i in picked]

    return {kind: {"prompts": len(picked),
                   "tau": interval_row([sum(len(s.committed) for s in results[i].steps) for i in picked],
                                       [results[i].summary.num_steps for i in picked]),
                   "speedup": interval_row(walls(baseline, picked), walls(results, picked)),
                   "vs": {m: interval_row(walls(runs, picked), walls(results, picked))
                          for m, runs in (others or {}).items()}}
            for kind, picked in sorted(groups.items())}


TREE_BUDGETS = (4, 8, 16, 32, 64)


def budget_sweep(engine, prompts: list[str], max_new_tokens: int, budgets=TREE_BUDGETS, rounds: int = 1,
                 stop=None) -> dict:
    """Every tree lane here at every node budget in `budgets`, beside the chain it grows from, against the baseline
    on the same prompts: τ and speedup against the budget, each tree lane's best budget, and what a step costs —
    a tree's verify against its node count, a draft forward against a verified node."""
    trees = [m for m in engine.methods() if METHOD_REGISTRY[m].tree]
    if not trees:
        raise EngineError("this engine has no tree lane to sweep")
    budgets = list(budgets)
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens)}
    for tree in trees:
        chain = METHOD_REGISTRY[tree].grows_from
        drafts = METHOD_REGISTRY[chain].default_drafts
        configs[(chain, 0)] = GenerationConfig(method=chain, max_new_tokens=max_new_tokens, drafts_per_step=drafts)
        for budget in budgets:
            configs[(tree, budget)] = GenerationConfig(method=tree, max_new_tokens=max_new_tokens,
                                                       drafts_per_step=drafts, tree_nodes=budget)
    fastest = measure(engine, prompts, configs, rounds, stop, what="budget sweep")
    baseline = fastest.pop(BASELINE)
    lanes = {}
    for tree in trees:
        chain = METHOD_REGISTRY[tree].grows_from
        rows = {budget: _with_walls(row(fastest[(tree, budget)], baseline), fastest[(tree, budget)])
                for budget in budgets}
        lanes[tree] = {"chain": chain, "drafter": engine.drafter_label(tree), "rows": rows,
                       "chain_row": _with_walls(row(fastest[(chain, 0)], baseline), fastest[(chain, 0)]),
                       "drafts_per_step": configs[(chain, 0)].drafts_per_step,
                       "best_budget": max(rows, key=lambda b: rows[b]["speedup"]),
                       "draft_forwards_per_step": _draft_forwards(fastest[(tree, budgets[-1])])}
    return {"budgets": budgets, "lanes": lanes, "device": engine.device_name, "max_new_tokens": max_new_tokens,
            "num_prompts": len(prompts)}


def _with_walls(cells: dict, results: list) -> dict:
    """A sweep row with its wall time on each prompt (the fastest run), so two rows on the same prompts can be
    compared prompt by prompt (ratio_interval)."""
    return {**cells, "wall_by_prompt": [round(r.summary.wall_s, 5) for r in results]}


def _draft_forwards(results: list) -> float:
    """Draft spans per decode step that drafted: the forwards a tree lane pays each step (1 for one pass)."""
    counts = [sum(span.work == "draft" for span in step.spans) for r in results for step in r.steps if step.drafted]
    return round(sum(counts) / len(counts), 3) if counts else 0.0
