"""Long outputs (lesson point 11): τ against the position in the output, one line per feature drafter and option, each
point a bin of output positions with its 95 % interval over the held-out prompts (engine/measure/positions.py), and a
mark where the drafters' trained window ends. Pure: a measurement in, a figure and a table out.
"""

from __future__ import annotations

import plotly.graph_objects as go

from engine.contract.methods import method_label

from .layout import for_projector, lane_line
from .long_values import long_lanes, tau_text, train_share

# Each option's second cue beside the lane's one colour: the drafter as shipped solid, cut to its window dashed,
# tuning itself dotted
OPTION_DASH = {"as shipped": "solid", "window": "dash", "self-tuning": "dot"}
MIN_STEPS = 8  # a bin with fewer steps over all the prompts is left out: its interval says little


def window_end(data: dict, trained: int) -> float:
    """Where the trained window ends in output positions: the trained length less the median prompt's tokens."""
    lengths = sorted(data.get("prompt_tokens") or [0])
    return trained - lengths[len(lengths) // 2]


def long_figure(item: dict | None) -> go.Figure | None:
    lanes = long_lanes(item)
    if not lanes:
        return None
    data = item["data"]
    fig = go.Figure()
    for (method, option), lane in lanes.items():
        bins = [b for b in lane["bins"] if b.get("tau") and b["steps"] >= MIN_STEPS]
        xs = [b["start"] + data["bin"] / 2 for b in bins]
        name = method_label(method) + ("" if option == "as shipped" else f", {option}")
        style = lane_line(method, line=dict(dash=OPTION_DASH.get(option, "solid"), width=2))
        fig.add_trace(go.Scatter(
            x=xs, y=[b["tau"]["mean"] for b in bins], mode="lines+markers", name=name, legendgroup=name,
            error_y=dict(type="data", symmetric=False, array=[b["tau"]["high"] - b["tau"]["mean"] for b in bins],
                         arrayminus=[b["tau"]["mean"] - b["tau"]["low"] for b in bins], thickness=1, width=3),
            hovertemplate=f"{name}: output positions %{{x:.0f}} ± {data['bin'] // 2}, τ %{{y:.2f}}<extra></extra>",
            **style))
    trained = {lane.get("trained_window") for lane in lanes.values()} - {None}
    for length in sorted(trained):
        x = window_end(data, length)
        fig.add_vline(x=x, line=dict(color="#444", dash="dashdot", width=1.5))
        fig.add_annotation(x=x, y=1, yref="paper", text=f"trained window ends ({length} positions, prompt included)",
                           showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=12))
    lengths = sorted(data.get("prompt_tokens") or [0])
    last = max((x for trace in fig.data for x in trace.x), default=data["bin"])
    top = max((y + e for trace in fig.data for y, e in zip(trace.y, trace.error_y.array)), default=2.0)
    # τ is at least 1, so the axis starts there; no tick at the corner, where the two axes' first labels would meet
    fig.update_xaxes(title=f"position in the output (bins of {data['bin']})", showgrid=True, gridcolor="#eee",
                     range=[0, last + data["bin"] / 2], tickvals=list(range(64, int(last) + 64, 64)))
    fig.update_yaxes(title="τ, tokens a step", showgrid=True, gridcolor="#eee", range=[1, 1.05 * top])
    fig.update_layout(title=dict(text="Acceptance by output position: τ inside and past the trained window",
                                 font=dict(size=14),
                                 subtitle=dict(text=f"{data['prompts']} held-out prompts of {lengths[0]}–{lengths[-1]} "
                                                    f"tokens, to the {data['context']}-position context; whiskers: "
                                                    "95 % intervals", font=dict(size=12))),
                      height=440, plot_bgcolor="white", margin=dict(l=10, r=10, t=90, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0))
    return fig


def long_panel(item: dict | None, projector: bool = False) -> go.Figure | None:
    figure = long_figure(item)
    return for_projector(figure) if figure is not None and projector else figure


def long_table(item: dict | None) -> str:
    """Each lane's τ and acceptance inside and past its trained window, and its time spent training, as Markdown."""
    lanes = long_lanes(item)
    if not lanes:
        return "*Not recorded yet: `python scripts/record_lessons.py long`.*"
    rows = ["| drafter | option | τ inside the window | τ past it | acceptance past it | time training |",
            "|---|---|---|---|---|---|"]
    for (method, option), lane in lanes.items():
        past = (lane.get("past") or {}).get("acceptance")
        accept = f"{past['mean']:.0%} ({past['low']:.0%}–{past['high']:.0%})" if past else "–"
        window = f"{option}, {lane['drafter_window']}" if lane.get("drafter_window") else option
        rows.append(f"| {method_label(method)} | {window} | {tau_text(lane.get('inside'))} | "
                    f"{tau_text(lane.get('past'))} | {accept} | {train_share(lane):.0%} |")
    return "\n".join(rows)
