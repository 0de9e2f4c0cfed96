"""Acceptance by output position: each feature drafter's per-step acceptance and τ against how far into its output a
step drafts, generating to the target's whole context, with 95 % intervals over held-out prompts (one cluster a
prompt: engine/measure/sweep.py ratio_interval). Beside each drafter as shipped: the same drafter with its view of
the context cut to its trained window (GenerationConfig.drafter_window), and tuning itself as it goes
(GenerationConfig.self_tuning, engine/online.py). The drafters' trained window is read from their training record
(assets/<drafter>/training.json, its sequence length), and every step is also counted as inside or past it by its
anchor's position in the sequence, prompt included.

    python -m engine.measure.positions --prompts 16 --json positions.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass

from ..contract.methods import METHOD_REGISTRY, reads_features
from ..contract.presets import ASSETS_DIR, DEFAULT_PRESET, PRESETS, load_prompts
from ..contract.types import EngineError, GenerationConfig, check_stop
from .sweep import interval_row, t_critical

FEATURE_METHODS = tuple(m for m in METHOD_REGISTRY if reads_features(m))  # the chains that read the target's features
OPTIONS = ("as shipped", "window", "self-tuning")
BIN = 32  # output positions a bin


@dataclass(frozen=True)
class Lane:
    method: str
    option: str  # one of OPTIONS

    @property
    def name(self) -> str:
        return self.method if self.option == "as shipped" else f"{self.method} · {self.option}"


def trained_window(preset: str, method: str) -> int | None:
    """The sequence length `method`'s drafter was trained on (its training.json in assets/), None where unknown."""
    folder = PRESETS[preset].drafters.get(method) if preset in PRESETS else None
    path = ASSETS_DIR / folder / "training.json" if folder else None
    if path is None or not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    seq_len = (record.get("train_config") or {}).get("seq_len", record.get("seq_len"))
    return int(seq_len) if seq_len else None


def default_lanes(available, options=OPTIONS) -> list[Lane]:
    return [Lane(m, o) for o in options for m in FEATURE_METHODS if m in available]


def config_of(engine, lane: Lane, max_new_tokens: int, temperature: float = 0.0) -> GenerationConfig:
    window = trained_window(engine.preset, lane.method) if lane.option == "window" else None
    if lane.option == "window" and window is None:
        raise EngineError(f"no trained window is recorded for {lane.method}'s drafter (its training.json)")
    return GenerationConfig(method=lane.method, max_new_tokens=max_new_tokens, temperature=temperature,
                            drafts_per_step=METHOD_REGISTRY[lane.method].default_drafts, drafter_window=window,
                            self_tuning=lane.option == "self-tuning")


def step_rows(result) -> list[tuple[int, int, int, int, float]]:
    """(output position, accepted, verified, committed, train seconds) of each decode step of a run."""
    rows, position = [], len(result.prefill.committed)
    for step in result.steps:
        train = sum(s.end_s - s.start_s for s in step.spans if s.work == "train")
        rows.append((position, step.num_accepted, step.num_verified, len(step.committed), train))
        position += len(step.committed)
    return rows


def _interval(runs: list[list[tuple]], keep, numerator: int, denominator: int) -> dict | None:
    """Acceptance: Σ accepted / Σ verified over the prompts, its interval kept within 0..1."""
    nums = [sum(r[numerator] for r in rows if keep(r)) for rows in runs]
    dens = [sum(r[denominator] for r in rows if keep(r)) for rows in runs]
    return _within(interval_row(nums, dens), 0.0, 1.0) if sum(dens) else None


def _within(row: dict, low: float, high: float) -> dict:
    """An interval cut to what its figure can be (τ is at least 1, an acceptance at most 1)."""
    return {**row, "low": max(low, row["low"]), "high": min(high, row["high"])}


def lane_summary(runs: list[list[tuple]], prompt_lengths: list[int], window: int | None, bin_size: int) -> dict:
    """Per bin of output positions and inside / past the trained window: acceptance (accepted among verified drafts)
    and τ (tokens a step), each with its 95 % interval over the prompts (clusters)."""
    last = max((r[0] for rows in runs for r in rows), default=0)
    bins = []
    for start in range(0, last + 1, bin_size):
        keep = (lambda r, s=start: s <= r[0] < s + bin_size)
        bins.append({"start": start, "steps": sum(keep(r) for rows in runs for r in rows),
                     "acceptance": _interval(runs, keep, 1, 2), "tau": _tau(runs, keep)})
    summary = {"bins": bins}
    if window is not None:
        for side, inside in (("inside", True), ("past", False)):
            marked = [[(*r, (n + r[0] < window) == inside) for r in rows] for rows, n in zip(runs, prompt_lengths)]
            keep = (lambda r: r[5])
            summary[side] = {"steps": sum(r[5] for rows in marked for r in rows),
                             "acceptance": _interval(marked, keep, 1, 2), "tau": _tau(marked, keep),
                             "tau_by_prompt": [_ratio(rows, keep) for rows in marked]}
        summary["fall"] = paired(summary["inside"]["tau_by_prompt"], summary["past"]["tau_by_prompt"])
    return summary


def _ratio(rows: list[tuple], keep) -> float | None:
    """One prompt's τ over the steps `keep` takes (None: none)."""
    steps = [r for r in rows if keep(r)]
    return round(sum(r[3] for r in steps) / len(steps), 4) if steps else None


def paired(before: list[float | None], after: list[float | None]) -> dict | None:
    """after − before, prompt by prompt (the prompts where both exist), with its 95 % interval (Student's t): the
    same prompt on both sides, so what differs between prompts cancels. None for fewer than 2 such prompts."""
    diffs = [b - a for a, b in zip(before, after) if a is not None and b is not None]
    n = len(diffs)
    if n < 2:
        return None
    mean = sum(diffs) / n
    sd = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5
    half = t_critical(n - 1) * sd / n ** 0.5
    return {"mean": round(mean, 4), "low": round(mean - half, 4), "high": round(mean + half, 4), "prompts": n}


def _tau(runs: list[list[tuple]], keep) -> dict | None:
    nums = [sum(r[3] for r in rows if keep(r)) for rows in runs]
    dens = [sum(1 for r in rows if keep(r)) for rows in runs]
    return _within(interval_row(nums, dens), 1.0, float("inf")) if sum(dens) else None


def by_position(engine, prompts: list[str], lanes: list[Lane] | None = None, bin_size: int = BIN,
                max_new_tokens: int | None = None, temperature: float = 0.0, stop=None, progress=None) -> dict:
    """Every lane on every prompt, each run to the target's context (or `max_new_tokens`); see the module's words.
    progress: called with a line after each run."""
    lanes = lanes if lanes is not None else default_lanes(engine.methods())
    if len(prompts) < 2:
        raise EngineError("acceptance by position needs at least 2 prompts for its intervals")
    lengths = [len(engine.encode_prompt(p)) for p in prompts]
    out = []
    for lane in lanes:
        runs, walls, trains, verifies, drafts, cpus = [], [], [], [], [], []
        for i, (prompt, n) in enumerate(zip(prompts, lengths)):
            room = engine.context_length - n
            config = config_of(engine, lane, min(room, max_new_tokens or room), temperature)
            started = time.perf_counter()
            result = engine.generate(prompt, config, stop=stop)
            walls.append(time.perf_counter() - started)
            rows = step_rows(result)
            runs.append(rows)
            trains.append(sum(r[4] for r in rows))
            verifies.append(result.summary.verify_s)
            drafts.append(result.summary.draft_s)
            cpus.append(result.summary.cpu_s or 0.0)
            check_stop(stop)
            if progress is not None:
                progress(f"{lane.name}: prompt {i + 1}/{len(prompts)}, {len(result.output_ids)} tokens, "
                         f"τ {result.summary.tau:.2f}, {walls[-1]:.1f} s")
        window = trained_window(engine.preset, lane.method)
        out.append({"name": lane.name, "method": lane.method, "option": lane.option, "trained_window": window,
                    "drafter_window": config_of(engine, lane, 1).drafter_window,
                    "seconds": {"wall": round(sum(walls), 3), "draft": round(sum(drafts), 3),
                                "verify": round(sum(verifies), 3), "train": round(sum(trains), 3),
                                "cpu": round(sum(cpus), 3)},  # the runs' CPU time (the CPU only): steadier when busy
                    **lane_summary(runs, lengths, window, bin_size)})
    for lane in out:  # each option against its drafter as shipped, past the window, prompt by prompt
        shipped = next((x for x in out if x["method"] == lane["method"] and x["option"] == "as shipped"), None)
        if lane["option"] != "as shipped" and shipped is not None and "past" in lane and "past" in shipped:
            lane["gain_past"] = paired(shipped["past"]["tau_by_prompt"], lane["past"]["tau_by_prompt"])
    return {"bin": bin_size, "prompts": len(prompts), "context": engine.context_length, "temperature": temperature,
            "prompt_tokens": lengths, "lanes": out}  # prompt_tokens: in the prompts' order, as tau_by_prompt


def lesson_measurement(engine, prompts: list[str], lanes: list[tuple[str, str]] | None = None, bin_size: int = BIN,
                       max_new_tokens: int | None = None, stop=None) -> dict:
    """The lesson's recipe (app/lesson/long.py): `by_position` over (method, option) lanes as a lesson measurement
    (engine/measure/lesson.py), the lanes every feature drafter here under every option by default, each run to the
    context or `max_new_tokens`."""
    from .lesson import measurement

    chosen = default_lanes(engine.methods()) if lanes is None else \
        [Lane(m, o) for m, o in lanes if m in engine.methods()]
    data = by_position(engine, prompts, chosen, bin_size, max_new_tokens, stop=stop)
    return measurement({**data, "max_new_tokens": max_new_tokens}, engine.device_name)


def table(data: dict) -> str:
    """The measurement as text: each lane's τ inside and past its trained window, and per bin."""
    lines = [f"{data['prompts']} prompts of {min(data['prompt_tokens'])}–{max(data['prompt_tokens'])} tokens, "
             f"generated to the {data['context']}-position context; τ (95 % interval) per {data['bin']} output "
             "positions"]
    for lane in data["lanes"]:
        sides = "  ".join(f"{side} the window: τ {lane[side]['tau']['mean']:.2f} ({lane[side]['tau']['low']:.2f}–"
                          f"{lane[side]['tau']['high']:.2f})"
                          for side in ("inside", "past") if lane.get(side, {}).get("tau"))
        seconds = lane["seconds"]
        lines.append(f"{lane['name']:<22} {sides}  train {seconds['train']:.1f} s of {seconds['wall']:.1f} s")
        lines.append("    " + " ".join(f"{b['tau']['mean']:.2f}" if b["tau"] else "  -  " for b in lane["bins"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.measure.positions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default=DEFAULT_PRESET)
    parser.add_argument("--prompts", type=int, default=16, help="the first N held-out prompts (at least 2)")
    parser.add_argument("--lanes", default=",".join(FEATURE_METHODS), help="methods, comma-separated")
    parser.add_argument("--options", default=",".join(OPTIONS), help=f"of: {', '.join(OPTIONS)}")
    parser.add_argument("--bin", type=int, default=BIN, help="output positions a bin")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: to the target's context")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="write the measurement here")
    args = parser.parse_args(argv)
    try:
        options = [o.strip() for o in args.options.split(",") if o.strip()]
        if any(o not in OPTIONS for o in options):
            raise EngineError(f"options are {', '.join(OPTIONS)}; got {args.options!r}")
        if args.prompts < 2:
            raise EngineError("acceptance by position needs at least 2 prompts for its intervals")
        from ..loop import Engine  # torch only once the arguments are good

        engine = Engine.load(args.preset, threads=args.threads)
        methods = [m.strip() for m in args.lanes.split(",") if m.strip()]
        missing = [m for m in methods if m not in engine.methods() or m not in FEATURE_METHODS]
        if missing:
            raise EngineError(f"no feature drafter here for {', '.join(missing)}; choose from "
                              f"{', '.join(m for m in FEATURE_METHODS if m in engine.methods())}")
        lanes = [Lane(m, o) for o in options for m in methods]
        engine.warm_up()
        data = by_position(engine, load_prompts()[: args.prompts], lanes, args.bin, args.max_new_tokens,
                           progress=lambda line: print(line, file=sys.stderr, flush=True))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(data))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": engine.device_name, "data": data}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
