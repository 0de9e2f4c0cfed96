"""Record the lesson's measurements on the embedded models: `python scripts/record_lessons.py`.

Writes assets/lessons/: two saved comparisons (every lane at temperature 0, and at temperature 1 under the
rejection rule), the K sweeps of the serial lanes over held-out prompts, the distribution check, the
scheduled drafter beside its variants, every lane at five temperatures over the held-out prompts, and the tree
lanes at every node budget beside their chains, and DFlash beside its drafter trained without the target's features
(kv.json: skipped until that drafter is shipped). The
settings are app/lesson's, the same "Run it live" uses. Takes about half an hour on 2 CPU cores, the temperature
sweep most of it (`python scripts/record_lessons.py KEY ...` records only those); run it on a quiet machine, since
the timings are what a class will see.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


from app import lesson  # noqa: E402
from app.lesson import kv  # noqa: E402
from app.comparison import Comparison, settings_dict  # noqa: E402
from app.tabs.compare import versions  # noqa: E402
from engine.loop import Engine  # noqa: E402


def record_comparison(engine: Engine, temperature: float) -> str:
    settings = lesson.comparison_settings(engine.methods(), temperature)
    steps, drafters = {}, {}
    for method in settings.methods:  # one after another, as the Compare tab runs them
        result = engine.generate(settings.prompt, settings.config(method))
        steps[method], drafters[method] = [result.prefill, *result.steps], result.drafter
    comparison = Comparison.of_steps(settings_dict(settings), steps, drafters, device=engine.device_name,
                                     preset=engine.preset, versions=dict(versions()))
    return comparison.to_json()


def main() -> int:
    engine = Engine.load("tiny")
    engine.warm_up()
    lesson.LESSONS_DIR.mkdir(exist_ok=True)
    jobs = {
        "greedy": lambda: record_comparison(engine, 0.0),
        "sampled": lambda: record_comparison(engine, 1.0),
        "sweeps": lambda: json.dumps(lesson.measure_sweeps(engine, lesson.sweep_prompts())),
        "lossless": lambda: json.dumps(lesson.measure_check(engine)),
        "parts": lambda: json.dumps(lesson.measure_parts(engine)),
        "temperatures": lambda: json.dumps(lesson.measure_temperatures(engine)),
        "trees": lambda: json.dumps(lesson.measure_trees(engine)),
        "load": lambda: json.dumps(lesson.measure_load(engine)),
        "kv": lambda: json.dumps(kv.measure_kv(engine)),
    }
    only = sys.argv[1:] or list(jobs)
    for key in only:
        if key == "kv" and not engine.ablation_drafter_models:
            print(f"kv: skipped: no drafter trained without the target's features is shipped (`{kv.TRAIN_COMMAND}`)")
            continue
        started = time.monotonic()
        text = jobs[key]()
        path = kv.KV_FILE if key == "kv" else lesson.LESSONS_DIR / lesson.RECORDINGS[key]
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}: "
              f"{len(text) / 1e3:.0f} kB in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
