"""Opening a large saved comparison, timed as the page does it, with the Compare tab's charts drawn by today's
app/draw/charts.py and by the same file at another commit, side by side in one process.

    .venv/bin/python -m scripts.open_timing [--before REV] [--rounds 5] [--mb 8.4]

The file is reliability.py's large valid comparison (the lesson's, its steps repeated). Each round reads it
(`read_comparison`), renders every lane's box (`lane_html`), draws the charts with one module then the other (in
alternating order), and turns each chart into the JSON Gradio sends (`to_json`). It prints each part's median CPU
seconds, the whole open with each charts module, and their ratio; and checks that both modules' charts are the
same JSON, for this file and for the lesson's own comparison (a picture changed would show here first).

Then each crafted kind of file inside the size cap (reliability.py `crafted_files`: trees 12,000 deep and 20,000
wide, edited texts, an impossible rate, the large file) is opened once as the page opens one: read, then every view
drawn (reliability.py `draw_everything`: the lanes, the charts, the Step-through tab's first and last step), after
one warm-up open of the lesson's comparison (the views' modules imported, as in a running server). Each one's CPU
seconds are printed against GOAL_S, with the machine's load: CPU seconds of this process, which a busy machine
still stretches (other work shares the caches and the cores' turbo).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.reliability import ROOT, SAVED, crafted_files, draw_everything, large_file

GOAL_S = 1.0  # opening any file inside the size cap, read and drawn


def charts_at(rev: str):
    """app/draw/charts.py as it was at `rev`, imported as a module of the app/draw package (its relative imports
    resolve to today's neighbours)."""
    source = subprocess.run(["git", "show", f"{rev}:app/draw/charts.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp())
    path = folder / "charts_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("app.draw.charts_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cpu(fn):
    started = time.process_time()
    value = fn()
    return value, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD", help="the commit whose app/draw/charts.py is 'before'")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=float, default=9.0, help="the size to aim at (the file comes out a little under)")
    args = parser.parse_args()

    from app.comparison import read_comparison
    from app.draw import charts as after
    from app.draw.render import lane_html

    before = charts_at(args.before)
    data = large_file(int(args.mb * 1e6))
    print(f"file: {len(data) / 1e6:.1f} MB; charts before: {args.before}, after: the working tree; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, doc in (("the lesson's comparison", SAVED.read_bytes()), ("the large file", data)):
        comparison = read_comparison(doc)
        same = all(a.to_json() == b.to_json() for projector in (False, True) for a, b in
                   zip(before.comparison_figures(comparison, projector), after.comparison_figures(comparison, projector)))
        print(f"  charts of {name}, page and projector: {'the same JSON' if same else 'DIFFERENT JSON'}")

    times: dict[str, list[float]] = {k: [] for k in ("read", "lanes", "charts before", "charts after")}
    for i in range(args.rounds):
        comparison, seconds = cpu(lambda: read_comparison(data))
        times["read"].append(seconds)
        times["lanes"].append(cpu(lambda: [lane_html(comparison, m) for m in comparison.lanes])[1])
        order = (("before", before), ("after", after)) if i % 2 == 0 else (("after", after), ("before", before))
        for name, module in order:
            times[f"charts {name}"].append(
                cpu(lambda: [f.to_json() for f in module.comparison_figures(comparison)])[1])
    median = {k: statistics.median(v) for k, v in times.items()}
    for k, v in median.items():
        print(f"  {k:<14} {v:.3f} s (median CPU of {args.rounds}; range {min(times[k]):.3f}-{max(times[k]):.3f})")
    opened = {k: median["read"] + median["lanes"] + median[f"charts {k}"] for k in ("before", "after")}
    print(f"  open and draw: before {opened['before']:.2f} s, after {opened['after']:.2f} s, "
          f"after/before {opened['after'] / opened['before']:.2f}×; charts alone "
          f"{median['charts after'] / median['charts before']:.2f}×")
    draw_everything(read_comparison(SAVED.read_bytes()))  # the views' modules imported, as in a running server
    print(f"crafted files, each opened once as the page opens one, every view drawn (load average "
          f"{os.getloadavg()[0]:.1f}):")
    for name, found in crafted_files().items():
        mark = "within" if found["cpu_s"] < GOAL_S else "OVER"
        print(f"  {name:<22} {found['mb']:>4.1f} MB  {found['cpu_s']:.2f} s ({mark} {GOAL_S:g} s)  "
              f"{found['answer'][:70]}")


if __name__ == "__main__":
    main()
