"""Run results -> plotly figures. Pure functions: steps in, figure out."""

from __future__ import annotations

import plotly.graph_objects as go

from engine.types import Step

from .render import METHOD_LABELS
from .theme import LANE_COLOURS

BUBBLE_MIN_MS = 0.05  # gaps shorter than this are clock noise, not worth a hover label
LANE_NAMES = {"draft": "draft", "verify": "verify (and prefill)", "host": "host (bookkeeping)"}


def timeline_figure(lanes: dict[str, list[Step]]) -> go.Figure:
    """One row per method on a shared time axis (each lane's own run starts at 0 ms): draft, verify and
    host spans as bars, gaps between them as empty, hoverable bubbles."""
    rows = [METHOD_LABELS.get(m, m) for m in lanes]
    bars = {lane: {"y": [], "base": [], "x": [], "text": []} for lane in LANE_COLOURS}
    bubbles = {"y": [], "base": [], "x": [], "text": []}
    for method, steps in lanes.items():
        row = METHOD_LABELS.get(method, method)
        last_end_ms = 0.0
        for step in steps:
            for span in step.spans:
                start_ms, end_ms = span.start_s * 1e3, span.end_s * 1e3
                if start_ms - last_end_ms > BUBBLE_MIN_MS:
                    _add(bubbles, row, last_end_ms, start_ms,
                         f"{row} · bubble: nothing running<br>{start_ms - last_end_ms:.2f} ms before step {step.index}")
                label = span.label or span.lane
                _add(bars[span.lane], row, start_ms, end_ms,
                     f"{row} · step {step.index} · {label}<br>{end_ms - start_ms:.2f} ms")
                last_end_ms = max(last_end_ms, end_ms)
    fig = go.Figure()
    for lane, data in bars.items():
        fig.add_trace(go.Bar(orientation="h", y=data["y"], x=data["x"], base=data["base"], name=LANE_NAMES[lane],
                             marker_color=LANE_COLOURS[lane], marker_line_width=0, hovertext=data["text"],
                             hoverinfo="text"))
    fig.add_trace(go.Bar(orientation="h", y=bubbles["y"], x=bubbles["x"], base=bubbles["base"],
                         name="bubble (gap)", marker_color="rgba(0,0,0,0)", marker_line_color="rgba(0,0,0,0.25)",
                         marker_line_width=0.5, hovertext=bubbles["text"], hoverinfo="text"))
    fig.update_layout(
        barmode="overlay", height=120 + 70 * max(1, len(rows)), margin=dict(l=10, r=10, t=30, b=40),
        xaxis_title="time since the lane's start (ms)", bargap=0.35,
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(rows))),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), plot_bgcolor="white",
        hoverlabel=dict(align="left"))
    fig.update_xaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    return fig


def _add(data: dict, row: str, start_ms: float, end_ms: float, text: str) -> None:
    data["y"].append(row)
    data["base"].append(start_ms)
    data["x"].append(max(end_ms - start_ms, 1e-3))
    data["text"].append(text)
