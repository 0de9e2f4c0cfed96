"""Do the page's speedups hold still from one run to the next on a shared machine?

    python scripts/steady_speedups.py [--runs 10] [--busy] [--json runs/steady.json]

Starts the app twice (`python -m app`, the embedded models): once with `--timing-runs 1` (each lane run once,
as the page did before it timed lanes again) and once as shipped (each step's fastest timing over three runs, the lanes
taking turns). Against each, runs the default comparison `--runs` times through the app's queue, as a page
does (scripts/app_client.py), and reads every lane's two speedups off the page: on the compute time of the
decoding thread, and on wall time. Prints, per lane and per figure, the median and the largest deviation
from it. `--busy` keeps a second process spinning on one core throughout (engine/bench.py BusyMachine): a
student's browser, another job.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.methods import DEFAULT_LANES  # noqa: E402  torch-free
from app_client import App, free_port, start_app  # noqa: E402

METHODS = list(DEFAULT_LANES)
SPEEDUP = re.compile(r'speedup <b>([0-9.]+)×</b>')
WALL = re.compile(r'wall <b>([0-9.]+)×</b>')


def speedups(app: App, fn_index: int, controls: list) -> dict[str, tuple[float, float]]:
    """One default comparison through the app: each drafting lane's (compute, wall) speedup as the page shows it."""
    result = app.call(fn_index, controls)
    status = result["outputs"][0] if result["outputs"] else result["error"]
    if not result["ok"] or "done" not in status:
        raise SystemExit(f"the app's run did not finish: {status}")
    found = {}
    for lane in result["outputs"][1:]:
        if not isinstance(lane, str) or "data-method=" not in lane:
            continue
        method = re.search(r'data-method="([^"]+)"', lane).group(1)
        compute, wall = SPEEDUP.search(lane), WALL.search(lane)
        if method != "baseline" and compute and wall:
            found[method] = (float(compute.group(1)), float(wall.group(1)))
    return found


def default_controls(app: App, fn_index: int) -> list:
    """The run event's inputs as the page sends them on first load: every control at its default value."""
    values = {c["id"]: c.get("props", {}).get("value") for c in app.config["components"]}
    dep = next(d for d in app.config["dependencies"] if d["id"] == fn_index)
    return [values[i] for i in dep["inputs"]]


def measure(args, timing_runs: int | None) -> dict[str, dict[str, list[float]]]:
    port = free_port()
    server = start_app(port, args=() if timing_runs is None else ("--timing-runs", str(timing_runs)))
    figures = {m: {"compute": [], "wall": []} for m in METHODS if m != "baseline"}
    try:
        app = App(f"http://127.0.0.1:{port}/")
        run = app.fn_index(api_name="run")
        controls = default_controls(app, run)
        speedups(app, run, controls)  # one run first: the page's first comparison pays for lazy imports
        for i in range(args.runs):
            found = speedups(app, run, controls)
            for m, (compute, wall) in found.items():
                figures[m]["compute"].append(compute)
                figures[m]["wall"].append(wall)
            print(f"  run {i + 1}: " + ", ".join(f"{m} {c:.2f}× (wall {w:.2f}×)" for m, (c, w) in found.items()),
                  flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return figures


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    worst = max(abs(v / median - 1) for v in values)
    return f"{median:.2f}× ({min(values):.2f}–{max(values):.2f}, ±{worst:.0%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a second process meanwhile")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    from engine.bench import BusyMachine

    report = {}
    with BusyMachine() if args.busy else contextlib.nullcontext():
        for name, runs in (("each lane once", 1), ("fastest of three (as shipped)", None)):
            print(f"{name}:", flush=True)
            report[name] = measure(args, runs)
    print(f"\n{args.runs} identical default comparisons per row{', one core kept busy' if args.busy else ''}: "
          "median speedup (range, largest deviation from the median)\n")
    print("| timing | lane | compute time | wall time |\n|---|---|---|---|")
    for name, figures in report.items():
        for m, f in figures.items():
            print(f"| {name} | {m} | {spread(f['compute'])} | {spread(f['wall'])} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
