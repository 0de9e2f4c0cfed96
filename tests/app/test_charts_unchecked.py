"""The timeline's traces skip plotly's per-element checks (a large file's thousands of spans cost them most of its
drawing): what they draw is what the checked figure would, and the figure's layout is still checked."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import pytest

from app.comparison import read_comparison
from app.draw.charts import comparison_figures, timeline_figure, unchecked_figure

SAVED = Path(__file__).resolve().parents[2] / "assets" / "lessons" / "sampled.json"


@pytest.fixture(scope="module")
def saved():
    return read_comparison(SAVED.read_bytes())


@pytest.mark.parametrize("projector", [False, True])
def test_the_timeline_is_the_json_a_checked_figure_gives(saved, projector):
    """Every trace added unchecked, checked again by a plotly figure built from it, gives the same JSON: a
    property plotly does not know or a value it would change fails here."""
    fig = comparison_figures(saved, projector)[0]
    checked = go.Figure(data=[trace.to_plotly_json() for trace in fig.data], layout=fig.layout)
    assert json.loads(fig.to_json()) == json.loads(checked.to_json())
    spans = sum(len(step.spans) for lane in saved.lanes.values() for step in lane.steps)
    assert sum(len(t.x) for t in fig.data if t.name != "bubble (gap)") == spans


def test_a_trace_plotly_does_not_know_is_caught_by_that_check():
    fig = unchecked_figure([dict(type="bar", x=[1], hovertxt=["a typo"])])  # unchecked: kept as given
    assert fig.data[0].to_plotly_json()["hovertxt"] == ["a typo"]
    with pytest.raises(ValueError):
        go.Figure(data=[trace.to_plotly_json() for trace in fig.data])


def test_the_layout_is_still_checked_after_unchecked_traces(saved):
    fig = timeline_figure({m: list(lane.steps) for m, lane in saved.lanes.items()})
    with pytest.raises(ValueError):
        fig.update_layout(not_a_layout_property=1)
    with pytest.raises(ValueError):
        fig.add_trace(dict(type="bar", x=[1], hovertxt=["a typo"]))  # traces added the usual way are checked too
