"""What KV injection buys (lesson point 7): DFlash as shipped beside its drafter trained by the same recipe without the
target's features, τ and speedup side by side, each a bar at its headline with its 95 % interval over the held-out
prompts (engine/measure/lesson.py kv_injection). Pure: a measurement in, a figure out (None without one)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.contract.methods import METHOD_REGISTRY, method_label

from .layout import _error_bars, for_projector
from .why_charts import variant_shades


def kv_rows(item: dict | None):
    """(method, its lane, its ablation's lane, number of prompts) of a KV measurement; None without both lanes."""
    data = (item or {}).get("data") or {}
    method, lanes = data.get("method"), data.get("lanes") or {}
    ablation = next(iter(data.get("ablations") or {}), None)
    if method not in METHOD_REGISTRY or method not in lanes or ablation not in lanes:
        return None
    return method, lanes[method], lanes[ablation], data["num_prompts"]


def kv_figure(item: dict | None) -> go.Figure | None:
    rows = kv_rows(item)
    if rows is None:
        return None
    method, kv, alone, prompts = rows
    names = [f"{method_label(method)},<br>no target features", f"{method_label(method)}<br>as shipped"]
    shades = variant_shades(method)
    colours = [shades[2], shades[0]]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("τ (tokens a step)", "speedup over the target alone"))
    for col, key, unit in ((1, "tau", ""), (2, "speedup", "×")):
        cells = [alone[f"{key}_interval"], kv[f"{key}_interval"]]
        fig.add_trace(go.Bar(x=names, y=[alone[key], kv[key]], marker=dict(color=colours, pattern=dict(shape=["x", ""])),
                             error_y={**_error_bars([{**c, "mean": v} for c, v in zip(cells, (alone[key], kv[key]))]),
                                      "color": "#444"},
                             text=[f"{alone[key]:.2f}{unit}", f"{kv[key]:.2f}{unit}"], textposition="inside",
                             insidetextanchor="start", showlegend=False), row=1, col=col)
        top = max(c["high"] for c in cells) if key == "tau" else max(1.0, *(c["high"] for c in cells))  # 1× shows
        fig.update_yaxes(rangemode="tozero", range=[0, 1.15 * top], row=1, col=col)
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot"), row=1, col=2)  # the target alone
    fig.update_layout(title=dict(text="What reading the target's features buys", font=dict(size=14),
                                 subtitle=dict(text=f"{prompts} held-out prompts; bars: the headline, whiskers: its "
                                                    "95 % interval", font=dict(size=12))),
                      height=320, plot_bgcolor="white", margin=dict(l=10, r=10, t=80, b=40),
                      uniformtext=dict(minsize=11, mode="show"))
    return fig


def kv_panel(item: dict | None) -> go.Figure | None:
    """The figure as the Lesson tab shows it: drawn as a room reads it (for_projector) in either mode, being drawn
    once when the page is built."""
    figure = kv_figure(item)
    return None if figure is None else for_projector(figure)
