"""The Compare and Why charts as a room reads them: per-position charts draw conditional acceptance and survival,
named as such; captions on a chart are chosen from its numbers; each lane has one colour in every chart and in its
header; in projector mode every chart's text is at least 18 px through the figure's own layout, its legend below
the plot, horizontal."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app import lesson
from app.draw.charts import (CHART_IDS, PROJECTOR_FONT, acceptance_figure, comparison_figure, comparison_figures,
                             for_projector, lossless_figure, sweeps_figure, verify_cost_words)
from app.draw.render import lane_html
from app.draw.theme import lane_style

from lesson_data import baseline, comparison, lane


def test_the_per_position_chart_draws_conditional_acceptance_and_survival_named_as_such():
    fig = acceptance_figure({"dflash": (0.5, 1.0, 0.8)})
    solid = next(t for t in fig.data if t.name == "DFlash")
    dotted = next(t for t in fig.data if t.name == "DFlash: survival")
    assert list(solid.y) == [0.5, 1.0, 0.8]  # the conditional rate, which may rise
    assert list(dotted.y) == pytest.approx([0.5, 0.5, 0.4]) and dotted.line.dash == "dot"  # the product
    assert {"solid: conditional acceptance", "dotted: survival"} <= {t.name for t in fig.data}
    title = f"{fig.layout.title.text}: {fig.layout.title.subtitle.text}"  # a long title goes on in its subtitle
    assert "conditional acceptance and survival" in title.replace("<br>", " ")


def test_the_formula_charts_subtitle_says_what_a_verify_cost_from_the_costs_drawn():
    assert "(more than one), so the striped bar sits below" in verify_cost_words([1.2, 1.3])
    assert "(less than one), so the striped bar sits above" in verify_cost_words([0.8, 0.9])
    assert "0.99 baseline forwards (about as much as one)" in verify_cost_words([0.99])
    cheap = comparison({"baseline": baseline(), "eagle3": lane([(4, 3)] * 10, 2.0, 8.0)})
    dear = comparison({"baseline": baseline(), "eagle3": lane([(4, 3)] * 10, 2.0, 13.0)})
    assert "less than one" in comparison_figures(cheap)[5].layout.title.subtitle.text.replace("<br>", " ")
    assert "more than one" in comparison_figures(dear)[5].layout.title.subtitle.text.replace("<br>", " ")


@pytest.mark.parametrize("projector", [False, True])
def test_a_chart_drawn_alone_is_the_tabs_chart(projector):
    """A slide draws one Compare chart alone (comparison_figure): the very figure the tab draws among the others."""
    sampled = lesson.recorded()["sampled"]
    together = comparison_figures(sampled, projector)
    assert len(together) == len(CHART_IDS)
    for chart, figure in zip(CHART_IDS, together):
        assert comparison_figure(sampled, chart, projector).to_plotly_json() == figure.to_plotly_json(), chart


def _colours(fig) -> dict[str, str]:
    """{lane label: its colour} from a figure's traces (a line's colour, else a bar's)."""
    found = {}
    for trace in fig.data:
        if not trace.name or trace.name.startswith(("solid", "dotted", "dashed")):
            continue
        label = trace.name.split(":")[0].split(" (")[0]
        colour = (trace.line.color if getattr(trace, "line", None) is not None and trace.line.color
                  else trace.marker.color)
        found.setdefault(label, colour)
    return found


def test_each_lane_has_one_colour_in_every_chart_and_in_its_header():
    data = lesson.recorded()
    greedy = data["greedy"]
    figures = comparison_figures(greedy)
    charts = [figures[1], figures[2], figures[4], sweeps_figure(data["sweeps"]["data"]["sweeps"]),
              lossless_figure(data["lossless"]["data"])]
    labels = {"Baseline": "baseline", "AR": "eagle3", "Classic": "classic", "DFlash": "dflash", "DSpark": "dspark"}
    seen = 0
    for fig in charts:
        for label, colour in _colours(fig).items():
            if label in labels:
                assert colour == lane_style(labels[label])[0], (fig.layout.title.text, label)
                seen += 1
    assert seen >= 12
    assert len({lane_style(m)[0] for m in labels.values()}) == len(labels)  # no two lanes share a colour
    for method in greedy.lanes:
        assert f"--lane-colour:{lane_style(method)[0]}" in lane_html(greedy, method)


def _fonts(node, path=""):
    """Every font size set anywhere in a figure's JSON, with where."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "font" and isinstance(value, dict) and "size" in value:
                yield f"{path}.{key}", value["size"]
            if key in ("tickfont", "textfont") and isinstance(value, dict) and "size" in value:
                yield f"{path}.{key}", value["size"]
            yield from _fonts(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _fonts(value, f"{path}[{i}]")


def test_projector_mode_sets_every_charts_text_through_its_own_layout():
    data = lesson.recorded()
    figures = [*comparison_figures(data["sampled"], projector=True),
               for_projector(sweeps_figure(data["sweeps"]["data"]["sweeps"]))]
    for fig in figures:
        layout = fig.to_plotly_json()
        sizes = dict(_fonts(layout))
        assert layout["layout"]["font"]["size"] >= PROJECTOR_FONT
        assert sizes and all(size >= PROJECTOR_FONT for size in sizes.values()), sizes
        legend = layout["layout"]["legend"]
        assert legend["orientation"] == "h" and legend["yref"] == "container" and legend["y"] == 0  # below the plot
        assert layout["layout"]["xaxis"]["automargin"] and layout["layout"]["yaxis"]["automargin"]
        if fig.layout.title.text:
            assert fig.layout.title.automargin  # the title keeps room of its own: no axis title runs into it
    plain = comparison_figures(data["sampled"])[2].to_plotly_json()["layout"]
    assert plain.get("font", {}).get("size", 12) < PROJECTOR_FONT  # the desk's charts stay as they were


def test_the_projector_toggle_redraws_the_sessions_charts_for_a_room(random_engine):
    from compare_support import default_app

    demo = default_app(random_engine)  # built once per test process; this test's visitor is its own
    toggle = next(d for d in demo.fns.values() if d.name == "on_toggle")
    handler = toggle.fn.__self__
    visitor = SimpleNamespace(session_hash="projector-visitor")
    handler.sessions.get("projector-visitor").last = lesson.recorded()["greedy"]
    handler.sessions.get("projector-visitor").shown = lesson.recorded()["greedy"]
    on = handler.on_toggle(True, 1, None, visitor)
    assert len(on) == len(toggle.outputs)
    assert on[2].layout.font.size == PROJECTOR_FONT  # the per-position chart, now for a room
    assert handler.sessions.get("projector-visitor").projector
    assert all(fig.layout.font.size == PROJECTOR_FONT for fig in on[-3:])  # Step through's step and token too
    off = handler.on_toggle(False, 1, None, visitor)
    assert (off[2].layout.font.size or 12) < PROJECTOR_FONT


def test_step_through_and_the_prediction_draw_for_a_room_in_projector_mode():
    from app.run.sessions import SessionStore
    from app.tabs.step import StepHandlers
    from app.tabs.why import WhyHandlers

    sessions = SessionStore()
    visitor = SimpleNamespace(session_hash="room")
    sessions.get("room").projector = True
    step = StepHandlers(sessions)
    outputs = step.show(lesson.recorded()["sampled"], "room", "the lesson", start=1)
    assert all(fig.layout.font.size == PROJECTOR_FONT for fig in (outputs[3], outputs[5], outputs[6]))
    _, draft, target = step.on_token(1, None, visitor)
    assert draft.layout.font.size == target.layout.font.size == PROJECTOR_FONT
    assert WhyHandlers(None, sessions).predict(0.7, 0.1, 0.3, visitor).layout.font.size == PROJECTOR_FONT
    sessions.get("room").projector = False
    assert (WhyHandlers(None, sessions).predict(0.7, 0.1, 0.3, visitor).layout.font.size or 12) < PROJECTOR_FONT
