"""Record the lesson's measurements on the embedded models: `python -m scripts.record_lessons [KEY ...]`.

Writes assets/lessons/: two saved comparisons (every lane at temperature 0, and at temperature 1 under the
rejection rule), the K sweeps of the serial lanes over held-out prompts, the distribution check, the
scheduled drafter beside its variants, every lane at five temperatures over the held-out prompts, and the tree
lanes at every node budget beside their chains, and DFlash beside its drafter trained without the target's features
(kv.json: skipped until that drafter is shipped). The settings are app/lesson's, the same "Run it live" uses. Each
file carries a "provenance" block (engine/measure/provenance.py): the engine build, device, threads, the baseline's
speed measured beside it, date, command and duration. A job registered in JOBS below is recorded by
`python -m scripts.record` too, with no second list. Takes about half an hour on 2 CPU cores, the temperature sweep
most of it (KEY ... records only those; `--out DIR` writes elsewhere, as the re-check does); run it on a quiet
machine, since the timings are what a class will see.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from app import lesson
from app.lesson import kv, long
from engine.measure.provenance import provenance

# Each lesson recording: key -> the measurement as a JSON-able document, from a loaded, warmed engine.
JOBS: dict[str, Callable] = {
    # The comparisons' one prompt is the Compare tab's first example prompt (app/lesson/choice.py's rule without a
    # recorded choice). The held-out prompt nearest every lane's median speedup (choice.measure_prompt_choice) was 170
    # tokens on the shipped family: longer than a slide's lanes show whole, and than the tests' models hold.
    "greedy": lambda engine: record_comparison(engine, 0.0),
    "sampled": lambda engine: record_comparison(engine, 1.0),
    "sweeps": lambda engine: lesson.measure_sweeps(engine, lesson.sweep_prompts()),
    "blocks": lambda engine: lesson.measure_blocks(engine),
    "lossless": lambda engine: lesson.measure_check(engine),
    "parts": lambda engine: lesson.measure_parts(engine),
    "temperatures": lambda engine: lesson.measure_temperatures(engine),
    "trees": lambda engine: lesson.measure_trees(engine),
    "load": lambda engine: lesson.measure_load(engine),
    "kv": lambda engine: kv.measure_kv(engine),
    "long": lambda engine: long.measure_long(engine),  # about 5 minutes on one core (app/lesson/long.py)
}
BASELINE_RUNS = 3  # the baseline's speed beside a recording: the fastest of these runs of the lesson's prompt


def output_path(key: str, out_dir: Path | None = None) -> Path:
    """Where a job's recording goes: assets/lessons/ (or out_dir) under its RECORDINGS name."""
    path = kv.KV_FILE if key == "kv" else lesson.LESSONS_DIR / lesson.RECORDINGS.get(key, f"{key}.json")
    return path if out_dir is None else Path(out_dir) / path.name


def skipped(key: str, engine) -> str | None:
    """Why a job cannot run on this engine, or None."""
    if key == "kv" and not engine.ablation_drafter_models:
        return f"no drafter trained without the target's features is shipped (`{kv.TRAIN_COMMAND}`)"
    return None


def record_comparison(engine, temperature: float) -> dict:
    from app.comparison import Comparison, settings_dict
    from app.tabs.compare import versions

    settings = lesson.comparison_settings(engine.methods(), temperature)
    steps, drafters = {}, {}
    for method in settings.methods:  # one after another, as the Compare tab runs them
        result = engine.generate(settings.prompt, settings.config(method))
        steps[method], drafters[method] = [result.prefill, *result.steps], result.drafter
    comparison = Comparison.of_steps(settings_dict(settings), steps, drafters, device=engine.device_name,
                                     preset=engine.preset, versions=dict(versions()))
    return json.loads(comparison.to_json())


def baseline_speed(engine) -> float:
    """The target alone on the lesson's prompt, NEW_TOKENS new tokens at temperature 0: its tokens per second, the
    fastest of BASELINE_RUNS runs (a yardstick of the machine beside each recording)."""
    from engine.contract.types import GenerationConfig

    config = GenerationConfig(method="baseline", max_new_tokens=lesson.NEW_TOKENS)
    return max(engine.generate(lesson.lesson_prompt(), config).summary.tokens_per_s for _ in range(BASELINE_RUNS))


BASELINE_HOW = (f"the target alone on the lesson's prompt, {lesson.NEW_TOKENS} new tokens, temperature 0, the fastest "
                f"of {BASELINE_RUNS} runs, just before the recording")


def stamped(doc: dict, engine, command: str, started: float, baseline: float | None) -> dict:
    """`doc` with its provenance block."""
    import torch

    return {**doc, "provenance": provenance(engine.device_name, torch.get_num_threads(), command,
                                            time.monotonic() - started, baseline, BASELINE_HOW)}


def write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(path)  # whole or not at all: a recording cut off leaves the one before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.record_lessons", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("keys", nargs="*", metavar="KEY", help=f"some of {', '.join(JOBS)} (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write here instead of assets/lessons/")
    args = parser.parse_args(argv)
    unknown = [key for key in args.keys if key not in JOBS]
    if unknown:
        parser.error(f"unknown recording {unknown[0]!r}: choose from {', '.join(JOBS)}")
    from engine.loop import Engine

    engine = Engine.load("tiny")
    engine.warm_up()
    for key in args.keys or list(JOBS):
        why = skipped(key, engine)
        if why:
            print(f"{key}: skipped: {why}", flush=True)
            continue
        started = time.monotonic()
        baseline = baseline_speed(engine)
        command = f"python -m scripts.record_lessons {key}"
        doc = stamped(JOBS[key](engine), engine, command, started, baseline)
        path = output_path(key, args.out)
        write(path, doc)
        print(f"{path}: {path.stat().st_size / 1e3:.0f} kB in {time.monotonic() - started:.0f} s "
              f"(baseline {baseline:.1f} tokens/s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
