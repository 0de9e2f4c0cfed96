"""The slides show their claims: each slide's chart is its own (no two the same), slide 3's sets every lane's
acceptance beside 1 − TV over thousands of judged drafts with intervals and takes its title from them, slide 1 says
which figures are one prompt's with the held-out mean beside them, and slide 6 gives each bottleneck a chart."""

from __future__ import annotations

import copy
import json
import re

import pytest

pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.tabs.slides import evidence_figure  # noqa: E402


def fingerprint(figure) -> str:
    """What a chart shows: its title and every trace's kind, name and values."""
    traces = [(t.type, t.name, json.dumps(t.x, default=str), json.dumps(t.y, default=str)) for t in figure.data]
    return json.dumps([figure.layout.title.text, traces], default=str)


def test_no_two_slides_show_the_same_chart():
    recorded = lesson.recorded()
    prints = {p.number: fingerprint(evidence_figure(p, recorded)) for p in lesson.POINTS}
    assert len(set(prints.values())) == len(prints), [n for n in prints if list(prints.values()).count(prints[n]) > 1]


def test_slide_3_sets_each_lanes_acceptance_beside_the_overlap_over_thousands_of_judged_drafts():
    recorded = lesson.recorded()
    point = lesson.POINTS[2]
    figure = evidence_figure(point, recorded)
    marks = {t.name: t for t in figure.data if t.x and t.x[0] is not None}
    for name in ("measured rate", "expected min(1, p/q)", "1 − TV, the overlap"):
        assert len(marks[name].y) >= 4 and marks[name].error_y.array is not None  # every lane, with its interval
    # the rule passes 1 − TV on average, so a rate lies either side of it by chance: the line is no cap, and not so named
    words = [figure.layout.title.text, figure.layout.title.subtitle.text, *(t.name for t in figure.data)]
    assert not any("cap" in (w or "") for w in words), words
    judged = [int(n.replace(",", "")) for n in
              re.search(r"([\d,]+)–([\d,]+) judged drafts", figure.layout.title.subtitle.text).groups()]
    assert min(judged) >= 2000
    assert "4 of 4 lanes" in lesson.slide_claim(point, recorded)
    # the title follows the numbers: a lane whose rate leaves its 1 − TV's interval is counted out
    moved = copy.deepcopy(recorded)
    sweep = moved["temperatures"]["data"]["temperatures"]
    lane = next(iter(sweep[max(sweep, key=float)]["lanes"].values()))
    lane["verdict_rate"]["mean"] = lane["one_minus_tv"]["high"] + 0.05
    assert "3 of 4 lanes" in lesson.slide_claim(point, moved) and "overlap" not in lesson.slide_claim(point, moved)


def test_slide_1_says_which_figures_are_one_prompts_and_shows_the_held_out_mean_beside_them():
    recorded = lesson.recorded()
    figure = evidence_figure(lesson.POINTS[0], recorded)
    names = [t.name for t in figure.data]
    assert any("held-out" in n for n in names) and any("one prompt" in n for n in names)
    words = lesson.takeaway(lesson.POINTS[0], slide=True)
    heldout = recorded["temperatures"]["data"]["temperatures"]["0.0"]["lanes"]["eagle3"]["speedup"]
    assert f"AR {heldout:.2f}×" in words and "One prompt alone" in words
    assert words.index("held-out") < words.index("One prompt alone")


def test_slide_6_draws_each_bottleneck_in_a_panel_of_its_own():
    figure = evidence_figure(lesson.POINTS[5], lesson.recorded())
    panels = {t.xaxis or "x" for t in figure.data}
    assert panels == {"x", "x2", "x3"}
    words = lesson.takeaway(lesson.POINTS[5], slide=True)
    assert "grows with K" in words and "survival" in words and "no order" in words and "one prompt" in words


def test_a_recorded_slide_is_drawn_once_and_the_others_ahead_of_their_asking():
    """Building the app draws no slide; the first slide asked for is drawn at once, the rest in the background, so
    the next slide's chart is ready as the JSON Gradio sends whatever the server is doing when it is asked for."""
    import time

    from gradio.components.plot import PlotData

    from app.run.sessions import SessionStore
    from app.tabs.slides import SlideHandlers

    sessions = SessionStore()
    handlers = SlideHandlers(lesson.recorded(), sessions, lesson_handlers=None)
    assert sessions.replays.drawn == 0
    first = handlers.slide(4)
    assert isinstance(first[1], PlotData) and "Here:" in first[3]
    deadline = time.monotonic() + 20
    while sessions.replays.drawn < len(lesson.POINTS) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sessions.replays.drawn == len(lesson.POINTS)  # every slide, each once
    charts = [handlers.slide(p.number)[1] for p in lesson.POINTS]
    assert sessions.replays.drawn == len(lesson.POINTS) and charts[3] is first[1]  # none drawn again
    assert len({c.plot for c in charts}) == len(charts)
