"""Recordings of one device: the Compare tab's default comparison, the lesson's trees and its load points, measured
on the embedded models on that device and written in the formats the app reads, each marked with the device, the
date and the versions. The app shows them beside its own live runs (app/device_recordings.py).

    python -m scripts.device_recordings --device cuda            # the lesson's recorded sizes
    python -m scripts.device_recordings --device cpu --quick     # the "Run it live" sizes (seconds on a CPU)

Writes DIR/<device>/ (default assets/device/): comparison.json (a saved comparison, each lane timed as the Compare
tab times it), trees.json and load.json (lesson measurements), each with a "provenance" block (the engine build,
device, threads, the baseline's speed beside it, date, command, duration: engine/measure/provenance.py). Imports the engine and the app's plain-Python
modules only (no gradio, no plotly): it runs on a GPU machine that has torch and transformers and nothing else.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "assets" / "device"
NAMES = {"comparison": "comparison.json", "trees": "trees.json", "load": "load.json"}


def versions() -> dict:
    """The versions that shape the figures, from the installed packages."""
    found = {}
    for package in ("torch", "transformers"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def device_folder(device_name: str) -> str:
    """A folder name for a device: "cuda (NVIDIA H200)" -> "nvidia-h200", "cpu (1 thread)" -> "cpu"."""
    inner = re.search(r"\((.*)\)", device_name)
    words = inner.group(1) if inner and device_name.startswith("cuda") else device_name.split(" (")[0]
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-") or "device"


def record_comparison(engine) -> dict:
    """Every default lane on the default prompt, each timed as the Compare tab times it (app/runner.py)."""
    from app.comparison import Comparison, LaneResult, settings_dict
    from app.runner import LaneRun, run_lanes
    from app.settings import default_settings

    settings = default_settings(engine.methods())
    lanes = [LaneRun(m, settings.config(m)) for m in settings.methods]
    for _ in run_lanes(engine, settings.prompt, lanes, threading.Event()):
        pass
    hot = settings.temperature > 0
    results = {lane.method: LaneResult.ended(lane.method, lane.steps, engine.drafter_label(lane.method, float(hot)),
                                             lane.state, max(1, lane.timing_runs), lane.rates) for lane in lanes}
    comparison = Comparison(settings_dict(settings), results, engine.device_name, engine.preset, versions())
    return json.loads(comparison.to_json())


def record_trees(engine, quick: bool) -> dict:
    from app import lesson

    return lesson.measure_trees_live(engine) if quick else lesson.measure_trees(engine)


def record_load(engine, quick: bool) -> dict:
    from app import lesson

    return lesson.measure_load_live(engine) if quick else lesson.measure_load(engine)


def write_recordings(out_dir: Path, device: str, quick: bool, engine=None, only=tuple(NAMES)) -> list[Path]:
    """Record on `device` ("cpu", "cuda") the embedded models' default comparison, trees and load points into
    out_dir/<device's folder>/; each file carries "device", "recorded_at" and "versions". quick: the lesson's live
    sizes instead of its recorded ones. engine: one already loaded (the embedded models on that device). Returns
    the files written."""
    if engine is None:
        from engine.loop import Engine

        engine = Engine.load("tiny", device)
        engine.warm_up()
    folder = Path(out_dir) / device_folder(engine.device_name)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = {"comparison": lambda: record_comparison(engine), "trees": lambda: record_trees(engine, quick),
            "load": lambda: record_load(engine, quick)}
    from scripts.record_lessons import baseline_speed, stamped

    written = []
    for key in only:
        started = time.monotonic()
        baseline = baseline_speed(engine)
        doc = jobs[key]()
        doc["versions"] = versions()
        doc["size"] = "quick" if quick else "recorded"
        command = f"python -m scripts.device_recordings --device {device}{' --quick' if quick else ''} --only {key}"
        doc = stamped(doc, engine, command, started, baseline)
        path = folder / NAMES[key]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
        tmp.replace(path)
        written.append(path)
        print(f"{path}: {path.stat().st_size / 1e3:.0f} kB in {time.monotonic() - started:.0f} s", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.device_recordings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cpu or cuda")
    parser.add_argument("--quick", action="store_true", help="the lesson's live sizes (seconds), not its recorded ones")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", default=",".join(NAMES), help=f"some of {', '.join(NAMES)}")
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name]
    if not only or set(only) - set(NAMES):
        parser.error(f"--only takes {', '.join(NAMES)}")
    write_recordings(args.out, args.device, args.quick, only=only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
