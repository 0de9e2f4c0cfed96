"""Recordings of one device: the Compare tab's default comparison, the lesson's trees and its load points, measured
on the embedded models on that device and written in the formats the app reads, each marked with the device, the
date and the versions. The app shows them beside its own live runs (app/device_recordings.py).

    python -m scripts.device_recordings --device cuda            # the lesson's recorded sizes
    python -m scripts.device_recordings --device cpu --quick     # the "Run it live" sizes (seconds on a CPU)

Writes DIR/<device>/ (default assets/device/): comparison.json (a saved comparison, each lane timed as the Compare
tab times it, in each of PROCESSES fresh processes one after another: its speedups' range spans them all), trees.json
and load.json (lesson measurements), each with a "provenance" block (the engine build, device, threads, the
baseline's speed beside it, date, command, duration: engine/measure/provenance.py). Imports the engine and the app's
plain-Python modules only (no gradio, no plotly): it runs on a GPU machine that has torch and transformers and nothing else.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "assets" / "device"
NAMES = {"comparison": "comparison.json", "trees": "trees.json", "load": "load.json"}
# The default comparison is measured in this many fresh processes, one after another, each loading the engine and
# timing every lane as the Compare tab does (TIMING_RUNS rounds): rounds in one process share its memory layout and
# its start, so their spread said little of what another process measures (a re-check in a new one fell outside it).
PROCESSES = 3


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
    """Every default lane on the default prompt, each timed as the Compare tab times it (app/run/runner.py)."""
    from app.comparison import Comparison, LaneResult, settings_dict
    from app.run.runner import LaneRun, run_lanes
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


def _same_run(a, b) -> bool:
    """Whether two traces drafted and committed alike, step by step (only their times differ)."""
    return len(a) == len(b) and all(x.committed == y.committed and x.drafted == y.drafted for x, y in zip(a, b))


def merged_comparison(docs: list[dict]) -> dict:
    """One saved comparison from the same comparison measured in several processes (`docs`, saved comparisons, in
    the order they ran). Each lane's timing rounds are every process's, in order, so its speedup is the median over
    them all and its spread runs from the lowest round of any process to the highest; its steps are each step's
    fastest timing over the processes that drafted alike with the first (as the Compare tab keeps a repeat's steps).
    Each process's rounds are cut to the count every one of its lanes has, so the rounds stay paired with the
    baseline's, process by process. A ValueError where a lane wrote other tokens in one process than in the first."""
    from app.comparison import Comparison, LaneResult, output_ids, read_comparison
    from engine.contract.summary import fastest_steps

    read = [read_comparison(json.dumps(doc)) for doc in docs]
    first = read[0]
    rounds = [min(len(lane.run_rates) for lane in c.lanes.values()) for c in read]
    lanes = {}
    for method, lane in first.lanes.items():
        runs = [c.lanes.get(method) for c in read]
        for number, other in enumerate(runs[1:], 2):
            if other is None or output_ids(other.steps) != output_ids(lane.steps):
                raise ValueError(f"process {number}'s {method} lane wrote other tokens than process 1's")
        alike = [list(other.steps) for other in runs if _same_run(other.steps, lane.steps)]
        rates = [rate for other, count in zip(runs, rounds) for rate in other.run_rates[:count]]
        shares = [other.engine_share for other in runs if other.engine_share is not None]
        lanes[method] = LaneResult.ended(method, fastest_steps(alike), lane.drafter, lane.state, len(rates), rates,
                                         median(shares) if shares else None)
    merged = Comparison(first.settings, lanes, first.device, first.preset, first.versions)
    return json.loads(merged.to_json())


def comparison_in_processes(device: str, quick: bool, processes: int, run=subprocess.run) -> tuple[dict, list[dict]]:
    """The default comparison measured in `processes` fresh processes, one after another (each this script with
    `--processes 1`, into a folder of its own): the merged comparison (merged_comparison) and each process's
    provenance block, in order. run: how a process is run (subprocess.run's signature)."""
    docs = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(1, processes + 1):
            out = Path(folder) / str(number)
            args = [sys.executable, "-m", "scripts.device_recordings", "--device", device, "--only", "comparison",
                    "--processes", "1", "--out", str(out), *(["--quick"] if quick else [])]
            print(f"comparison: process {number} of {processes}", flush=True)
            done = run(args, cwd=ROOT)
            found = sorted(out.rglob(NAMES["comparison"]))
            if done.returncode or not found:
                raise RuntimeError(f"comparison: process {number} of {processes} failed (status {done.returncode})")
            docs.append(json.loads(found[0].read_text(encoding="utf-8")))
    return merged_comparison(docs), [doc["provenance"] for doc in docs]


def record_trees(engine, quick: bool) -> dict:
    from app import lesson

    return lesson.measure_trees_live(engine) if quick else lesson.measure_trees(engine)


def record_load(engine, quick: bool) -> dict:
    from app import lesson

    return lesson.measure_load_live(engine) if quick else lesson.measure_load(engine)


def command_of(device: str, quick: bool, key: str, processes: int = 1) -> str:
    """The command that records `key` again."""
    spread = f" --processes {processes}" if key == "comparison" and processes != PROCESSES else ""
    return f"python -m scripts.device_recordings --device {device}{' --quick' if quick else ''} --only {key}{spread}"


def _write(path: Path, doc: dict, started: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(f"{path}: {path.stat().st_size / 1e3:.0f} kB in {time.monotonic() - started:.0f} s", flush=True)
    return path


def write_comparison_in_processes(out_dir: Path, device: str, quick: bool, processes: int = PROCESSES,
                                  run=subprocess.run) -> Path:
    """The default comparison measured in `processes` fresh processes (comparison_in_processes), written into
    out_dir/<device's folder>/ with a provenance block that says so ("processes") and keeps each process's baseline
    speed; its own baseline speed is their median."""
    from engine.measure.provenance import provenance
    from scripts.record_lessons import BASELINE_HOW

    started = time.monotonic()
    doc, blocks = comparison_in_processes(device, quick, processes, run)
    doc["versions"] = versions()
    doc["size"] = "quick" if quick else "recorded"
    speeds = [b["baseline_tokens_per_s"] for b in blocks if b.get("baseline_tokens_per_s")]
    how = f"{BASELINE_HOW}, in each of the {processes} processes: their median"
    doc["provenance"] = provenance(blocks[0]["device"], blocks[0]["threads"], command_of(device, quick, "comparison",
                                   processes), time.monotonic() - started, median(speeds) if speeds else None,
                                   how, processes=processes,
                                   process_baselines=[b.get("baseline_tokens_per_s") for b in blocks])
    return _write(Path(out_dir) / device_folder(doc["device"]) / NAMES["comparison"], doc, started)


def write_recordings(out_dir: Path, device: str, quick: bool, engine=None, only=tuple(NAMES),
                     processes: int = 1) -> list[Path]:
    """Record on `device` ("cpu", "cuda") the embedded models' default comparison, trees and load points into
    out_dir/<device's folder>/; each file carries "device", "recorded_at" and "versions". quick: the lesson's live
    sizes instead of its recorded ones. engine: one already loaded (the embedded models on that device). processes:
    above 1, the comparison is measured in that many fresh processes instead (write_comparison_in_processes).
    Returns the files written."""
    written = []
    if processes > 1 and "comparison" in only:
        written.append(write_comparison_in_processes(out_dir, device, quick, processes))
        only = [key for key in only if key != "comparison"]
        if not only:
            return written
    if engine is None:
        from engine.loop import Engine

        engine = Engine.load("tiny", device)
        engine.warm_up()
    folder = Path(out_dir) / device_folder(engine.device_name)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = {"comparison": lambda: record_comparison(engine), "trees": lambda: record_trees(engine, quick),
            "load": lambda: record_load(engine, quick)}
    from scripts.record_lessons import baseline_speed, stamped

    for key in only:
        started = time.monotonic()
        baseline = baseline_speed(engine)
        doc = jobs[key]()
        doc["versions"] = versions()
        doc["size"] = "quick" if quick else "recorded"
        doc = stamped(doc, engine, command_of(device, quick, key, processes), started, baseline)
        written.append(_write(folder / NAMES[key], doc, started))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.device_recordings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cpu or cuda")
    parser.add_argument("--quick", action="store_true", help="the lesson's live sizes (seconds), not its recorded ones")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", default=",".join(NAMES), help=f"some of {', '.join(NAMES)}")
    parser.add_argument("--processes", type=int, default=PROCESSES, help="measure the comparison in this many fresh "
                        f"processes, one after another, its range spanning them (default {PROCESSES}; 1: this one)")
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name]
    if not only or set(only) - set(NAMES):
        parser.error(f"--only takes {', '.join(NAMES)}")
    if args.processes < 1:
        parser.error("--processes takes 1 or more")
    write_recordings(args.out, args.device, args.quick, only=only, processes=args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
