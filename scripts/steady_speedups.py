"""Do the page's speedups hold still from one run to the next on a shared machine?

    python scripts/steady_speedups.py [--runs 10] [--busy] [--json runs/steady.json]
    python scripts/steady_speedups.py --crowd 4 [--runs 4]

Starts the app twice (`python -m app`, the embedded models): once with `--timing-runs 1` (each lane run once,
never timed again) and once as shipped (each step's fastest timing over three runs, the lanes
taking turns). Against each, runs the default comparison `--runs` times through the app's queue, as a page
does (scripts/app_client.py), and reads every lane's two speedups off the page: on the compute time of the
decoding thread, and on wall time. Prints, per lane and per figure, the median and the largest deviation
from it. `--busy` keeps a second process spinning on one core throughout (engine/measure/bench.py BusyMachine): a
student's browser, another job.

`--crowd N` asks instead whether other visitors move them: against the app as shipped (the engine in a process of
its own) and with `--in-process`, the default comparison `--runs` times alone, then `--runs` times while N loops
reload the page as fast as the server answers (the page, its configuration and its load event, outside the queue);
prints each lane's median compute-time speedup in both conditions and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import threading
import uuid
from pathlib import Path

from engine.contract.methods import BASELINE, DEFAULT_LANES  # noqa: E402  torch-free
from scripts.app_client import App, start_app
from scripts.support import free_port

METHODS = list(DEFAULT_LANES)
SPEEDUP = re.compile(r'speedup <b>([0-9.]+)×')  # the spread may follow: 2.10× (1.90–2.30)
WALL = re.compile(r'wall <b>([0-9.]+)×')


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
        if method != BASELINE and compute and wall:
            found[method] = (float(compute.group(1)), float(wall.group(1)))
    return found


def default_controls(app: App, fn_index: int) -> list:
    """The run event's inputs as the page sends them on first load: every control at its default value."""
    values = {c["id"]: c.get("props", {}).get("value") for c in app.config["components"]}
    dep = next(d for d in app.config["dependencies"] if d["id"] == fn_index)
    return [values[i] for i in dep["inputs"]]


class PageReloaders:
    """`count` loops loading the page as a new visitor's browser does (the page, its configuration, its load
    event), each as fast as the server answers, for as long as the `with` block lasts."""

    def __init__(self, app: App, count: int):
        self.app, self.count, self.stop, self.loads = app, count, threading.Event(), 0
        self.load_event = app.fn_index(trigger="load")

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.app.request("GET", "/")
            self.app.request("GET", "/config")
            self.app.call_direct(self.load_event, [], uuid.uuid4().hex[:11])
            self.loads += 1

    def __enter__(self):
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.count)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def _runs(app: App, run: int, controls: list, count: int, figures: dict) -> None:
    for i in range(count):
        found = speedups(app, run, controls)
        for m, (compute, wall) in found.items():
            figures[m]["compute"].append(compute)
            figures[m]["wall"].append(wall)
        print(f"  run {i + 1}: " + ", ".join(f"{m} {c:.2f}× (wall {w:.2f}×)" for m, (c, w) in found.items()),
              flush=True)


def measure(args, timing_runs: int | None, server_args: tuple[str, ...] = (), crowd: int = 0
            ) -> dict[str, dict[str, list[float]]] | dict[str, dict[str, dict[str, list[float]]]]:
    """The default comparison `args.runs` times against a fresh server; with `crowd`, first alone and then beside
    that many page-reloading loops ({"alone": figures, "crowd": figures})."""
    port = free_port()
    server = start_app(port, args=(*server_args, *(() if timing_runs is None else ("--timing-runs", str(timing_runs)))))

    def empty():
        return {m: {"compute": [], "wall": []} for m in METHODS if m != BASELINE}

    try:
        app = App(f"http://127.0.0.1:{port}/")
        run = app.fn_index(api_name="run")
        controls = default_controls(app, run)
        speedups(app, run, controls)  # one run first: the page's first comparison pays for lazy imports
        if not crowd:
            figures = empty()
            _runs(app, run, controls, args.runs, figures)
            return figures
        report = {"alone": empty(), "crowd": empty()}
        print("  alone:", flush=True)
        _runs(app, run, controls, args.runs, report["alone"])
        with PageReloaders(app, crowd) as reloaders:
            print(f"  beside {crowd} page-reloading loops:", flush=True)
            _runs(app, run, controls, args.runs, report["crowd"])
        print(f"  ({reloaders.loads} page loads meanwhile)", flush=True)
        report["page_loads"] = reloaders.loads
        return report
    finally:
        server.terminate()
        server.wait(timeout=30)


def crowd_main(args) -> int:
    report = {}
    for name, server_args in (("engine in its own process (as shipped)", ()), ("engine in the server's process",
                                                                               ("--in-process",))):
        print(f"{name}:", flush=True)
        report[name] = measure(args, None, server_args, crowd=args.crowd)
    print(f"\n{args.runs} default comparisons alone, then {args.runs} beside {args.crowd} page-reloading loops: "
          "median compute-time speedup\n")
    print("| server | lane | alone | beside the crowd | ratio |\n|---|---|---|---|---|")
    for name, figures in report.items():
        for m in figures["alone"]:
            alone = statistics.median(figures["alone"][m]["compute"])
            crowded = statistics.median(figures["crowd"][m]["compute"])
            print(f"| {name} | {m} | {alone:.2f}× | {crowded:.2f}× | {crowded / alone:.2f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    worst = max(abs(v / median - 1) for v in values)
    return f"{median:.2f}× ({min(values):.2f}–{max(values):.2f}, ±{worst:.0%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a second process meanwhile")
    parser.add_argument("--crowd", type=int, default=0, metavar="N",
                        help="measure beside N page-reloading loops instead, for both ways of running the engine")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if args.crowd:
        return crowd_main(args)
    from engine.measure.bench import BusyMachine

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
