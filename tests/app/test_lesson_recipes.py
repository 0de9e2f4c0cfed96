"""The lesson's measurements are the engine's: every recorded and live lesson figure is made by a recipe in
engine/measure/lesson.py, which imports no app module, so the engine's process never loads app code; the app only
sizes them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app import lesson

ROOT = Path(__file__).resolve().parents[2]
MEASURES = ["measure_sweeps_live", "measure_check_live", "measure_parts_live", "measure_temperatures_live",
            "measure_trees_live", "measure_load_live", "measure_check", "measure_parts", "measure_temperatures",
            "measure_trees", "measure_load"]


def test_the_recipes_import_no_app_module():
    tree = ast.parse((ROOT / "engine/measure/lesson.py").read_text(encoding="utf-8"))
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) if not n.level}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {n for n in names if n.split(".")[0] in ("app", "gradio", "plotly")}


@pytest.mark.parametrize("name", MEASURES)
def test_every_lesson_measurement_sends_an_engine_recipe_with_the_lessons_sizes(name, monkeypatch):
    sent = []

    def run_on(engine, fn, *args, **kwargs):
        sent.append((fn, args))
        return {"data": {}}

    monkeypatch.setattr(lesson, "run_on", run_on)
    monkeypatch.setattr(lesson, "load_prompts", lambda: [f"prompt {i}" for i in range(100)])
    getattr(lesson, name)(object(), *([["p"]] if name == "measure_sweeps_live" else []))
    (fn, args), = sent
    assert fn.__module__ == "engine.measure.lesson"
    expected = {"measure_sweeps_live": lesson.LIVE_SWEEP_KS, "measure_check_live": lesson.LIVE_LOSSLESS_SAMPLES,
                "measure_parts_live": ["prompt 0", "prompt 1"][:lesson.LIVE_PARTS_PROMPTS],
                "measure_temperatures_live": lesson.LIVE_TEMPERATURES, "measure_trees_live": lesson.LIVE_TREE_BUDGETS,
                "measure_load_live": lesson.LIVE_LOAD_SIZES, "measure_check": lesson.LOSSLESS_SAMPLES,
                "measure_temperatures": lesson.TEMPERATURES, "measure_trees": lesson.TREE_BUDGETS,
                "measure_load": lesson.LOAD_SIZES}.get(name)
    if expected is not None:  # the size this measurement is named for reaches the engine
        assert any(arg == expected or (isinstance(arg, tuple) and list(arg) == list(expected)) for arg in args
                   if not isinstance(expected, int) or isinstance(arg, int)), (name, args)
