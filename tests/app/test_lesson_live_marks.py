"""After each point's "Run it live" on its slide, no panel says "live" over a recorded number: every mark of the chart
whose numbers moved from the recording's slide is named (its legend entry, its panel's title or the chart's title)
"live", every mark that kept the recording's numbers is not, and the footer says "measured live" only of the
recording that was measured and "recorded" of every other one the slide reads. The Why points' live measurements are
their recordings with every figure moved (so a mark that kept its numbers is one drawn from another recording); the
Compare points' are real comparisons on the tiny random models."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.lesson.stamps import SOURCE_NAMES, slide_sources  # noqa: E402

LIVE = re.compile(r"\blive\b", re.IGNORECASE)
MEASURE = {"lossless": "measure_check_live", "sweeps": "measure_sweeps_live", "parts": "measure_parts_live",
           "temperatures": "measure_temperatures_live", "trees": "measure_trees_live", "load": "measure_load_live"}


@pytest.fixture(scope="module")
def handlers(random_engine):
    from app.tabs.slides import SlideHandlers
    from compare_support import default_app

    demo = default_app(random_engine)  # built once per test process; each point's visitor is its own
    return next(o for o in (getattr(d.fn, "__self__", None) for d in demo.fns.values())
                if isinstance(o, SlideHandlers))


def moved(node, key: str = ""):
    """A measurement's data with every measured figure 7 % higher (the settings it was made with kept)."""
    if isinstance(node, dict):
        return {k: moved(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [moved(v, key) for v in node]
    if isinstance(node, float) and key not in ("temperature", "temperatures"):
        return node * 1.07
    return node


def panel_titles(figure) -> dict[str, str]:
    """Each x axis's panel title: the subplot title whose centre lies over that axis's domain."""
    layout, titles = figure.layout, {}
    for name in [k for k in layout.to_plotly_json() if k.startswith("xaxis")]:
        low, high = layout[name].domain or (0, 1)
        over = [a.text for a in layout.annotations or () if a.yref == "paper" and (a.y or 0) >= 1
                and a.x is not None and low <= a.x <= high]
        titles["x" + name[5:]] = " ".join(over)
    return titles


def marks(figure) -> list[tuple[tuple, str, tuple]]:
    """Each trace: (what matches it across drawings, its words, its numbers)."""
    titles, seen, found = panel_titles(figure), {}, []
    chart = f"{figure.layout.title.text or ''} {figure.layout.title.subtitle.text or ''}"
    for trace in figure.data:
        name = trace.name or ""
        base = re.sub(r" · (live|recorded)$", "", name)
        panel = titles.get(trace.xaxis or "x", "")
        key = (base, trace.xaxis, trace.yaxis, re.sub(r" · (live|recorded)", "", panel))
        seen[key] = seen.get(key, -1) + 1
        numbers = tuple(v for axis in ("x", "y", "base") for v in (getattr(trace, axis, None) or ())
                        if isinstance(v, (int, float)))
        errors = trace.error_y.array if getattr(trace, "error_y", None) is not None else None
        found.append(((*key, seen[key]), f"{name} | {panel} | {chart}", numbers + tuple(errors or ())))
    return found


def run_live(handlers, point, monkeypatch):
    visitor = SimpleNamespace(session_hash=f"marks-{point.number}")
    if point.tab == "compare":
        settings = handlers.lesson.live_settings
        monkeypatch.setattr(handlers.lesson, "live_settings", lambda p: replace(settings(p), max_new_tokens=4))
    else:
        recorded = lesson.recorded()[point.recording]
        fake = lesson.measurement(moved(recorded["data"]), "cpu (test)")
        measure = MEASURE.get(point.recording, f"measure_{point.recording}_live")  # a point's own, by that name
        monkeypatch.setattr(lesson, measure, lambda engine, *a, stop=None: fake)
    handlers.on_press(point.number, visitor)
    *_, last = handlers.run_live(point.number, visitor)
    assert "measured live" in str(last[4]), last[4]
    return last


@pytest.mark.parametrize("number", [p.number for p in lesson.POINTS])
def test_no_panel_says_live_over_a_recorded_number(handlers, number, monkeypatch):
    point = lesson.POINTS[number - 1]
    if point.recording not in lesson.recorded():
        pytest.skip(f"point {number}'s recording is not in assets/lessons/ yet")
    _, recorded_figure, _, _, _ = handlers.slide(number, dict(handlers.recordings))
    _, figure, _, takeaway, _ = run_live(handlers, point, monkeypatch)
    before = {key: numbers for key, _, numbers in marks(recorded_figure)}
    live_marks = recorded_marks = 0
    for key, words, numbers in marks(figure):
        if not numbers or "published" in words.split(" | ")[0].lower():
            continue  # a legend's key, or a paper's figure: no measurement of this machine's
        if before.get(key) == numbers:
            recorded_marks += 1
            assert not LIVE.search(words), f"slide {number}: a recorded mark says live: {words}"
        else:
            live_marks += 1
            assert LIVE.search(words), f"slide {number}: a live mark does not say so: {words}"
    assert live_marks, f"slide {number}: the live run moved no mark"
    sources = re.search(r'class="slide-source">\((.*); <a ', takeaway).group(1)
    others = [k for k in slide_sources(number, point.recording)[1:] if SOURCE_NAMES[k] in sources]
    for part in sources.split("; "):
        if "measured live" in part and others:
            assert part.startswith(SOURCE_NAMES[point.recording] + ":"), f"slide {number}: {part}"
    for key in others:
        part = next(p for p in sources.split("; ") if SOURCE_NAMES[key] in p)
        assert "recorded" in part and not LIVE.search(part), f"slide {number}: {part}"
    if recorded_marks:  # numbers drawn from another recording: the footer names it
        assert others, f"slide {number}: recorded marks, and a footer naming no recording: {sources}"


def test_a_moved_measurement_moves_its_numbers():
    data = {"a": [0.5, 2], "temperature": 1.0, "b": {"tau": 3.0}}
    assert moved(copy.deepcopy(data)) == {"a": [0.5 * 1.07, 2], "temperature": 1.0, "b": {"tau": 3.0 * 1.07}}
