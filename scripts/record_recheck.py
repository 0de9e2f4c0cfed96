"""Re-measure a few cheap recordings beside the shipped ones: `python -m scripts.record --recheck N`.

Runs N re-checkable jobs (scripts/record.py, `cheap`; those whose recordings state ranges first, ORDER) with their
own commands, each writing into a temporary folder (the shipped recordings stay as they are), and prints a markdown
table: each recorded speedup with the range the recording states for it (the spread over its timing runs, or its
95 % interval over prompts), beside the one measured again, and whether it falls inside. For docs/benchmarks.md.
The default comparison, recorded in several fresh processes (its range spans their rounds), is measured again in
one more (a job's recheck_args: `--processes 1`), as a new server process would measure it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.measure.provenance import read_provenance

ROOT = Path(__file__).resolve().parent.parent
MAX_FIGURES = 6  # figures a recording gives to the table
# Which cheap recordings to re-measure first: those that state a range for their speedups (the spread over the
# Compare tab's timing runs; 95 % intervals over prompts), then the quickest.
ORDER = ("device:comparison", "lesson:kv", "lesson:greedy", "lesson:sampled", "device:trees", "lesson:parts",
         "device:load", "lesson:sweeps")


def figures(path: Path) -> dict[str, tuple[float, tuple[float, float] | None]]:
    """A recording's speedups by name, each with its stated range (or None): a saved comparison's lanes (the median
    over the timing runs and their spread), else each "speedup" in a measurement (its interval, where it has one)."""
    from app.comparison import RecordError, read_comparison
    from engine.contract.methods import BASELINE

    text = path.read_text(encoding="utf-8")
    try:
        comparison = read_comparison(text)
    except RecordError:
        comparison = None
    if comparison is not None:
        found = {}
        for method in comparison.lanes:
            value = comparison.speedup(method)
            if method != BASELINE and value:
                found[f"{method} speedup"] = (value, comparison.speedup_spread(method))
        return found
    found: dict = {}

    def walk(node, name: str) -> None:
        if isinstance(node, dict):
            value = node.get("speedup")
            if isinstance(value, (int, float)) and name:
                interval = node.get("speedup_interval")
                bounds = (interval["low"], interval["high"]) if isinstance(interval, dict) else None
                found[f"{name} speedup"] = (float(value), bounds)
            for key, child in node.items():
                if key not in ("speedup_interval",) and isinstance(child, (dict, list)):
                    walk(child, f"{name} {key}".strip() if key not in ("rows", "lanes", "data") else name)
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{name}[{index}]")

    walk(json.loads(text).get("data", {}), "")
    ranged = [k for k, (_, bounds) in found.items() if bounds]
    keep = (ranged + [k for k in found if k not in ranged])[:MAX_FIGURES]
    return {key: found[key] for key in keep}


def row(recording: str, name: str, recorded: tuple[float, tuple | None], again: float | None, over: str = "") -> str:
    """One figure's line; over: what the range spans, in words ("3 processes")."""
    value, bounds = recorded
    stated = f"{value:.2f}×" + (f" ({bounds[0]:.2f}–{bounds[1]:.2f}{' over ' + over if over else ''})" if bounds
                                else " (no range stated)")
    if again is None:
        return f"| {recording} | {name} | {stated} | — | not measured again |"
    verdict = (("inside" if bounds[0] <= again <= bounds[1] else "outside") if bounds
               else f"{(again / value - 1) * 100:+.0f} %")
    return f"| {recording} | {name} | {stated} | {again:.2f}× | {verdict} |"


RECHECK_BEGIN = "<!-- written by `python -m scripts.record --recheck N`: re-check -->"
RECHECK_END = "<!-- end of re-check -->"
DOC = ROOT / "docs" / "benchmarks.md"


def write_table(table: str, count: int) -> None:
    """The table into docs/benchmarks.md's re-check block, with when, on which build and how busy the machine was."""
    import os
    from datetime import datetime, timezone

    from engine.measure.provenance import build_digest, short

    text = DOC.read_text(encoding="utf-8")
    start, stop = text.find(RECHECK_BEGIN), text.find(RECHECK_END)
    if start < 0 or stop < start:
        raise ValueError(f"{DOC.name} has no re-check block")
    head = (f"Re-checked {datetime.now(timezone.utc):%Y-%m-%d} on build {short(build_digest())} "
            f"(`python -m scripts.record --recheck {count}`; load average {os.getloadavg()[0]:.1f} at its end):")
    DOC.write_text(text[:start] + RECHECK_BEGIN + "\n" + head + "\n\n" + table + "\n" + text[stop:], encoding="utf-8")


def recheck(jobs, count: int) -> str:
    """The table for the `count` quickest cheap jobs of `jobs`."""
    order = {key: index for index, key in enumerate(ORDER)}
    chosen = sorted((job for job in jobs if job.cheap),
                    key=lambda job: (order.get(job.key, len(order)), job.estimate_s()))[:count]
    lines = ["| recording | figure | recorded (its range) | measured again | |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for job in chosen:
            out = Path(folder) / job.key.replace(":", "-")
            args = [*job.args, *job.recheck_args, "--out", str(out)]
            print(f"re-measuring {job.key}: python {' '.join(job.args)} --out {out}", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=sys.stderr, stderr=sys.stderr)
            shipped = job.stamps[0]
            again_path = next(iter(out.rglob(shipped.name)), None)
            if done.returncode or again_path is None:
                lines.append(f"| {job.key} | — | — | — | failed (status {done.returncode}) |")
                continue
            before, after = figures(shipped), figures(again_path)
            made = read_provenance(shipped) or {}
            over = f"{made['processes']} processes" if isinstance(made.get("processes"), int) else ""
            for name, recorded in before.items():
                lines.append(row(shipped.relative_to(ROOT).as_posix(), name, recorded,
                                 after.get(name, (None,))[0], over))
    return "\n".join(lines)
