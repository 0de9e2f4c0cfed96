"""The lesson's measurements as the engine makes them: the recipes behind every recorded lesson figure and every
"Run it live", each a function of the engine, its prompts and its sizes, returning one plain JSON document.

The app decides the sizes (its recorded and live ones, app/lesson) and sends one of these functions to where the
models are (engine/process.py run_on), so the engine's process runs only engine code. Torch-free on import: each
recipe imports its measurement tool when it runs, where the engine (and torch) is loaded already.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone

from ..contract.methods import METHOD_REGISTRY

FORMAT = "speclab-lesson/1"  # the sweeps, the distribution check, the variants and the other sweeps as recorded


def measurement(data: dict, device: str) -> dict:
    """A measurement as it is recorded: JSON's own types (a live run reads exactly as a recorded one)."""
    doc = {"format": FORMAT, "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "device": device, "data": data}
    return json.loads(json.dumps(doc))


def chain_methods(available) -> list[str]:
    """The drafting lanes the lesson's first points measure: every one but the trees (a point of their own)."""
    return [m for m in available if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].tree]


def serial_methods(available) -> list[str]:
    return [m for m in chain_methods(available) if not METHOD_REGISTRY[m].one_pass]


def parts_method(available) -> str | None:
    """The method whose parts the lesson takes apart: the first scheduled one with variants."""
    return next((m for m in available if METHOD_REGISTRY[m].cuts and METHOD_REGISTRY[m].variants), None)


def sweeps(engine, prompts: list[str], ks, max_new_tokens: int, rounds: int, stop=None) -> dict:
    """Every serial lane at every K, and the block drafters once at their default block (with the first lane),
    against the baseline on the same prompts (engine/measure/sweep.py k_sweep). stop (here and below): a
    threading.Event that ends the measurement (engine.contract.types.Stopped)."""
    from .sweep import k_sweep

    measured = {m: k_sweep(engine, prompts, max_new_tokens, tuple(ks), m, rounds=rounds, one_pass=i == 0, stop=stop)
                for i, m in enumerate(serial_methods(engine.methods()))}
    return measurement({"sweeps": measured, "rounds": rounds}, engine.device_name)


def one_pass_methods(available) -> list[str]:
    return [m for m in chain_methods(available) if METHOD_REGISTRY[m].one_pass]


def blocks(engine, prompts: list[str], ladder, max_new_tokens: int, rounds: int, temperatures=(0.0,),
           stop=None) -> dict:
    """Every one-pass lane at every block length of `ladder` up to the block its drafter was trained on (that
    block always included), at each temperature, against the baseline at the same temperature on the same
    prompts (engine/measure/sweep.py k_sweep): where a lane's speed peaks, beside where a serial lane's does.
    {"temperatures": {"0.0": {lane: k_sweep's row}}, "rounds"}."""
    from .sweep import k_sweep

    measured = {}
    for temperature in temperatures:
        lanes = {}
        for m in one_pass_methods(engine.methods()):
            trained = engine.max_drafts(m) or METHOD_REGISTRY[m].default_drafts
            ks = sorted({k for k in ladder if k <= trained} | {trained})
            lanes[m] = k_sweep(engine, prompts, max_new_tokens, tuple(ks), m, rounds=rounds, stop=stop,
                               temperature=float(temperature))
        measured[str(float(temperature))] = lanes
    return measurement({"temperatures": measured, "rounds": rounds}, engine.device_name)


def check(engine, prompt: str, samples: int, temperature: float, methods: list[str] | None = None,
          stop=None) -> dict:
    """The distribution check (engine/measure/lossless.py) on `prompt`, every chain lane (or `methods`)."""
    from .lossless import distribution_check

    methods = methods or chain_methods(engine.methods())
    return measurement(distribution_check(engine, prompt, methods=methods, samples=samples, temperature=temperature,
                                          stop=stop), engine.device_name)


def parts(engine, prompts: list[str], max_new_tokens: int, rounds: int, stop=None) -> dict:
    """The scheduled drafter beside each of its variants (engine/measure/sweep.py variant_sweep) on `prompts`."""
    from .sweep import variant_sweep

    method = parts_method(engine.methods())
    if method is None:
        raise ValueError("this engine runs no scheduled drafter with variants")
    measured = variant_sweep(engine, method, prompts, max_new_tokens, rounds=rounds, stop=stop)
    return measurement({**measured, "rounds": rounds}, engine.device_name)


def temperatures(engine, prompts: list[str], temperatures, max_new_tokens: int, argmax_at=(), stop=None,
                 kinds: list[str] | None = None) -> dict:
    """Every chain lane at every temperature against the baseline at the same temperature
    (engine/measure/sweep.py temperature_sweep), argmax proposals beside sampled ones at `argmax_at`; with each
    prompt's kind of text (`kinds`), τ and speedup by kind too."""
    from .sweep import temperature_sweep

    return measurement(temperature_sweep(engine, prompts, max_new_tokens, tuple(temperatures),
                                         chain_methods(engine.methods()), argmax_at=tuple(argmax_at), stop=stop,
                                         kinds=kinds), engine.device_name)


def trees(engine, prompts: list[str], budgets, max_new_tokens: int, rounds: int, stop=None) -> dict:
    """Every tree lane at every node budget beside the chain it grows from (engine/measure/sweep.py budget_sweep)."""
    from .sweep import budget_sweep

    measured = budget_sweep(engine, prompts, max_new_tokens, tuple(budgets), rounds=rounds, stop=stop)
    return measurement({**measured, "rounds": rounds}, engine.device_name)


def load(engine, prompts: list[str], requests_at_once, num_requests: int, max_new_tokens: int, rounds: int, lanes=None,
         pairs: int = 0, stop=None, references: bool = True) -> dict:
    """Every batched lane (or `lanes`) at every batch size over the same `num_requests` requests, beside the
    batched baseline and transformers' batched generate (engine/measure/concurrency.py), and at the largest size
    DSpark's scheduler against verifying everything over `pairs` adjacent pairs of runs; references: False leaves
    out transformers' generate and the batched-against-single check (a live measurement)."""
    from .concurrency import BATCHED_LANES, concurrency_sweep

    measured = concurrency_sweep(engine, prompts, max_new_tokens, list(requests_at_once), tuple(lanes or BATCHED_LANES),
                                 log=lambda line: None, rounds=rounds, num_requests=num_requests, stop=stop,
                                 pairs=pairs, references=references)
    return measurement(measured, engine.device_name)


def ablation_method(engine) -> str | None:
    """The first method with an ablation (methods.Method.ablations) whose checkpoint this engine holds: DFlash and
    its drafter trained without the target's features, where that is shipped."""
    return next((m for m in engine.methods() if METHOD_REGISTRY[m].ablations
                 and m in getattr(engine, "ablation_drafter_models", {})), None)


def kv_injection(engine, prompts: list[str], max_new_tokens: int, rounds: int, stop=None) -> dict:
    """What KV injection buys: DFlash beside the same recipe trained without the target's features (its registry
    ablation), against the baseline on the same prompts, each output checked against the baseline's. Per lane τ and
    the speedup (Σ baseline wall time / Σ its wall time), each with its 95 % interval over the prompts (the headline
    is the ratio the interval is around), and the per-position acceptance."""
    from ..contract.methods import BASELINE
    from ..contract.summary import per_position_acceptance
    from ..contract.types import GenerationConfig
    from .sweep import interval_row, measure, row

    method = ablation_method(engine)
    if method is None:
        raise ValueError("this engine holds no drafter trained without the target's features "
                         "(`python -m engine.train dflash --no-target-features` trains DFlash's)")
    entry = METHOD_REGISTRY[method]
    config = GenerationConfig(method=method, max_new_tokens=max_new_tokens, drafts_per_step=entry.default_drafts)
    names = {method: config, **{f"{method}_{v.suffix}": replace(config, **dict(v.overrides)) for v in entry.ablations}}
    configs = {BASELINE: GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens), **names}
    fastest = measure(engine, prompts, configs, rounds, stop, what="KV injection")
    baseline = fastest.pop(BASELINE)
    lanes = {}
    for name, results in fastest.items():
        steps = [step for r in results for step in r.steps]
        lanes[name] = {**row(results, baseline), "drafter": results[0].drafter,
                       "tau_interval": interval_row([sum(len(s.committed) for s in r.steps) for r in results],
                                                    [r.summary.num_steps for r in results]),
                       "speedup_interval": interval_row([r.summary.wall_s for r in baseline],
                                                        [r.summary.wall_s for r in results]),
                       "per_position_acceptance": [None if p is None else round(p, 3)
                                                   for p in per_position_acceptance(steps)]}
    words = {f"{method}_{v.suffix}": v.words for v in entry.ablations}
    return measurement({"method": method, "ablations": words, "lanes": lanes, "num_prompts": len(prompts),
                        "max_new_tokens": max_new_tokens, "rounds": rounds}, engine.device_name)
