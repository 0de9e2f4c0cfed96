"""Run results -> plotly figures. Pure functions: a comparison (or its steps) in, figure out.

`comparison_figures` draws the Compare tab's charts from one Comparison, reading each lane's summary as
it was computed when the lane ended.
"""

from __future__ import annotations

import plotly.graph_objects as go

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label
from engine.contract.survival import survival
from engine.contract.types import Step

from ..comparison import verify_cost
from .render import chart_label
from ..words import more_or_less, span as value_span
from ..words import survival as survival_along
from .theme import WORK_COLOURS, lane_style

HERE_COLOUR = "#555555"  # a figure measured on this machine, beside published ones
PUBLISHED_COLOUR = "#BBBBBB"  # a published figure (a paper's, on its GPU)
PREDICTION_DARK = "#8A3F73"  # a second prediction beside the first, in a darker shade of the same hue
PREDICTION_COLOUR = "#CC79A7"  # predictions beside measurements (reddish purple)
PREDICTION_DASH = "dash"  # predictions are dashed, measurements solid with markers (predictions are labelled)
BUBBLE_MIN_MS = 0.05  # gaps shorter than this are clock noise, not worth a hover label
DRAFT_ALTERNATE = "draft, every second forward"  # the timeline's key for a step's 2nd, 4th, ... draft forward
DRAFT_ALTERNATE_COLOUR = "#9C6B00"  # a darker orange beside DRAFT_WORK, so adjacent draft forwards stay apart
AR_COLOUR = lane_style("eagle3")[0]  # the prediction tab's measured sweep is the AR lane's
WORK_NAMES = {"draft": "draft", "verify": "verify (and prefill)", "host": "host (bookkeeping)"}
SURVIVAL_DASH = "dot"  # survival (positions 1..k all passing) beside a lane's solid conditional acceptance


def lane_line(method: str, **extra) -> dict:
    """A lane's line and markers in its one colour and marker (app/draw/theme.py lane_style)."""
    colour, marker = lane_style(method)
    return dict(line=dict(color=colour, **extra.pop("line", {})), marker=dict(color=colour, symbol=marker, size=8),
                **extra)


# --- projector mode: every chart's text through its own layout, for the back row -----------------------------

PROJECTOR_FONT = 18  # the smallest text of any chart in projector mode
PROJECTOR_TITLE_FONT = 24
PROJECTOR_TITLE_CHARS = 48  # characters of a 24-pixel title that fit a chart of the page at 1024 pixels
PROJECTOR_SUBTITLE_CHARS = 84


def for_projector(fig: go.Figure) -> go.Figure:
    """The figure as a room reads it: all its text at least PROJECTOR_FONT pixels (axes, ticks, legend, bar labels,
    annotations, hover), the legend below the plot in wrapped horizontal rows, margins grown to fit every label
    (automargin), the title above the plot area with room of its own, and a taller plot. Set through the
    figure's layout, so plotly lays the larger text out itself."""
    height = fig.layout.height or 300
    fig.update_layout(
        font=dict(size=PROJECTOR_FONT), height=int(max(460, height * 1.6)),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0, xanchor="left",
                    font=dict(size=PROJECTOR_FONT), entrywidthmode="pixels"),
        margin=dict(l=10, r=20, t=90 if fig.layout.title.text else 30, b=10, autoexpand=True),
        uniformtext=dict(minsize=PROJECTOR_FONT, mode="show"),
        hoverlabel=dict(font=dict(size=PROJECTOR_FONT)))
    for trace in fig.data:  # one chart a row: a legend entry on one line again
        if trace.name and "<br>" in trace.name:
            trace.name = trace.name.replace("<br>", " ")
    if fig.layout.title.text:
        title, subtitle = split_title(fig.layout.title.text, fig.layout.title.subtitle.text or "",
                                      PROJECTOR_TITLE_CHARS)
        fig.layout.title.text = title  # the subtitle's own line breaks kept (a half-width chart's), long lines broken
        fig.layout.title.subtitle.text = "<br>".join(wrapped(line, PROJECTOR_SUBTITLE_CHARS)
                                                     for line in subtitle.split("<br>"))
        above = [a for a in fig.layout.annotations or () if a.yref == "paper" and (a.y or 0) >= 1]
        if above and subtitle:  # panel titles sit above the plot, under the subtitle's lines: room for both
            fig.update_layout(margin_t=90 + 30 * (1 + fig.layout.title.subtitle.text.count("<br>")))
        fig.update_layout(title=dict(font=dict(size=PROJECTOR_TITLE_FONT), automargin=True, yref="container",
                                     y=0.98, yanchor="top", x=0, xanchor="left", xref="container",
                                     subtitle=dict(font=dict(size=PROJECTOR_FONT))))
    fig.update_xaxes(automargin=True, tickfont=dict(size=PROJECTOR_FONT), title=dict(font=dict(size=PROJECTOR_FONT),
                                                                                        standoff=12))
    fig.update_yaxes(automargin=True, tickfont=dict(size=PROJECTOR_FONT), title=dict(font=dict(size=PROJECTOR_FONT),
                                                                                        standoff=12))
    fig.update_traces(textfont=dict(size=PROJECTOR_FONT), selector=dict(type="bar"))
    fig.update_traces(textfont=dict(size=PROJECTOR_FONT), selector=dict(type="scatter"))
    for annotation in fig.layout.annotations or ():
        annotation.font.size = max(annotation.font.size or 0, PROJECTOR_FONT)
    # the legend's rows below the plot: plotly wraps them; the bottom margin leaves room for the x-axis title
    legend_rows = _legend_rows(fig)
    fig.update_layout(margin=dict(b=40 + 34 * legend_rows))
    return fig


def _legend_rows(fig: go.Figure) -> int:
    """About how many rows a wrapped horizontal legend takes in a chart one projector row wide."""
    names = [t.name or "" for t in fig.data if t.showlegend is not False and t.name]
    if not names:
        return 0
    per_row, rows, used = 90, 1, 0  # characters of legend text one row holds at PROJECTOR_FONT
    for name in names:
        width = len(name) + 6
        if used and used + width > per_row:
            rows, used = rows + 1, 0
        used += width
    return rows


def styled(fig: go.Figure, projector: bool) -> go.Figure:
    return for_projector(fig) if projector else fig


def timeline_figure(lanes: dict[str, list[Step]]) -> go.Figure:
    """One row per method on a shared time axis (each lane's own run starts at 0 ms): draft, verify and
    host spans as bars, gaps between them as empty, hoverable bubbles. A step's draft forwards alternate two
    shades of orange, so K forwards one after another stay K bars instead of one (zoom in to count them)."""
    rows = [method_label(m) for m in lanes]
    bars = {work: {"y": [], "base": [], "x": [], "text": []} for work in (*WORK_COLOURS, DRAFT_ALTERNATE)}
    bubbles = {"y": [], "base": [], "x": [], "text": []}
    for method, steps in lanes.items():
        row = method_label(method)
        last_end_ms = 0.0
        for step in steps:
            num_drafts = 0
            for span in step.spans:
                start_ms, end_ms = span.start_s * 1e3, span.end_s * 1e3
                if start_ms - last_end_ms > BUBBLE_MIN_MS:
                    _add(bubbles, row, last_end_ms, start_ms,
                         f"{row} · bubble: nothing running<br>{start_ms - last_end_ms:.2f} ms before step {step.index}")
                work = DRAFT_ALTERNATE if span.work == "draft" and num_drafts % 2 else span.work
                num_drafts += span.work == "draft"
                _add(bars[work], row, start_ms, end_ms,
                     f"{row} · step {step.index} · {span.label or span.work}<br>{end_ms - start_ms:.2f} ms")
                last_end_ms = max(last_end_ms, end_ms)
    fig = go.Figure()
    for work, data in bars.items():
        alternate = work == DRAFT_ALTERNATE
        fig.add_trace(go.Bar(orientation="h", y=data["y"], x=data["x"], base=data["base"],
                             name=WORK_NAMES["draft" if alternate else work], showlegend=not alternate,
                             legendgroup="draft" if alternate else work,
                             marker_color=DRAFT_ALTERNATE_COLOUR if alternate else WORK_COLOURS[work],
                             marker_line_width=0, hovertext=data["text"], hoverinfo="text"))
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


SMALL_CHART_CHARS = 44  # characters of 14-pixel title text that fit a chart three to a row at 1024 pixels
LEGEND_CHARS = 30  # characters of a legend entry that fit one line of such a chart


def wrapped(text: str, width: int) -> str:
    """Text broken into lines of at most `width` characters at its spaces (plotly's <br>): plotly never wraps."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join(lines + [line])


def split_title(title: str, subtitle: str, chars: int) -> tuple[str, str]:
    """A title of one line of at most `chars` characters (plotly draws a title of several lines above its own
    anchor, out of the figure): its words before a colon, or the first that fit, stay; the rest opens the
    subtitle, which may take several lines (`wrapped`)."""
    title = title.replace("<br>", " ")
    if len(title) <= chars:
        return title, subtitle
    colon = title.find(": ")
    head = title[:colon] if 0 < colon <= chars else title[:chars + 1].rsplit(" ", 1)[0]
    rest = title[len(head):].lstrip(": ")
    return head, f"{rest}. {subtitle}" if subtitle else rest


def _small_layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> go.Figure:
    """A chart of the page's (three to a row at 1024 pixels, one a row in projector mode): a title longer than a
    row keeps one line and opens its subtitle with the rest; legend entries wrap to fit."""
    title, subtitle = split_title(title, "", SMALL_CHART_CHARS)
    for trace in fig.data:
        if trace.name and len(trace.name) > LEGEND_CHARS and "<br>" not in trace.name:
            trace.name = wrapped(trace.name, LEGEND_CHARS)
    legend_lines = sum(1 + (t.name or "").count("<br>") for t in fig.data if t.showlegend is not False and t.name)
    below = 50 + 9 * legend_lines  # about two entries a row: the legend's rows under the x-axis title
    fig.update_layout(title=dict(text=title, font=dict(size=14), automargin=True,
                                 yref="container", y=0.98, yanchor="top", x=0.01, xanchor="left", xref="container",
                                 subtitle=dict(text=wrapped(subtitle, SMALL_CHART_CHARS + 8), font=dict(size=12))),
                      height=300 + 9 * legend_lines, margin=dict(l=10, r=10, t=40, b=below),
                      uniformtext=dict(minsize=11, mode="show"),  # bar labels never shrunk below the page's 11 px
                      xaxis_title=x_title, yaxis_title=y_title, plot_bgcolor="white",
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0))
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig


def acceptance_figure(lanes: dict[str, tuple[float | None, ...]],
                      ceilings: dict[str, tuple[float | None, ...]] | None = None) -> go.Figure:
    """Per position k of the block, two measured figures per drafting lane ({method: its per-position
    acceptance}): the conditional acceptance P(k passes | 1..k−1 passed), solid, and the survival P(1..k all
    pass), their running product, dotted in the same colour: the first may rise along the block while the
    second can only fall. With `ceilings` (a run above temperature 0 under the rejection rule), each lane's
    predicted 1 − TV beside its conditional acceptance, dashed."""
    fig = go.Figure()
    for method, rates in lanes.items():
        if not rates:
            continue
        label = method_label(method)
        fig.add_trace(go.Scatter(x=list(range(1, len(rates) + 1)), y=list(rates), mode="lines+markers",
                                 name=label, connectgaps=False, legendgroup=method,
                                 hovertemplate="conditional acceptance at %{x}: %{y:.2f}<extra>" + label + "</extra>",
                                 **lane_line(method)))
        alive = survival_along(rates)
        if alive:
            fig.add_trace(go.Scatter(x=list(range(1, len(alive) + 1)), y=alive, mode="lines",
                                     name=f"{label}: survival", connectgaps=False, legendgroup=method,
                                     showlegend=False, hovertemplate="survival to %{x}: %{y:.2f}<extra>" + label +
                                     "</extra>", **lane_line(method, line=dict(dash=SURVIVAL_DASH))))
        ceiling = (ceilings or {}).get(method)
        if ceiling and any(c is not None for c in ceiling):  # in the lane's legend entry, not one of its own
            fig.add_trace(go.Scatter(x=list(range(1, len(ceiling) + 1)), y=list(ceiling), mode="lines",
                                     name=f"{label}: 1 − TV (predicted)", connectgaps=False, legendgroup=method,
                                     showlegend=False, hovertemplate="1 − TV: %{y:.2f}<extra>%{fullData.name}</extra>",
                                     **lane_line(method, line=dict(dash=PREDICTION_DASH))))
    keys = [("solid: conditional acceptance", "solid"), ("dotted: survival", SURVIVAL_DASH)]
    if ceilings:
        keys.append(("dashed: 1 − TV (predicted)", PREDICTION_DASH))
    for name, dash in keys:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=name, line=dict(color="#777", dash=dash)))
    fig.update_yaxes(range=[0, 1.05])
    return _small_layout(fig, "Per position: conditional acceptance and survival", "position k in the block",
                         "share of steps")


def survival_figure(steps: list[Step]) -> go.Figure:
    """DSpark: predicted survival ∏ c_i (from the confidences) against realised acceptance, per position,
    over the steps that sent position k to the target."""
    decode = [s for s in steps if s.kind == "decode" and s.drafted  # steps with every confidence
              and all(token.confidence is not None for token in s.drafted)]
    longest = max((len(s.drafted) for s in decode), default=0)
    predicted, realised, positions = [], [], []
    for k in range(1, longest + 1):
        verified = [s for s in decode if s.num_verified >= k]
        if not verified:
            continue
        alive = [survival([token.confidence for token in s.drafted[:k]])[-1] for s in verified]
        positions.append(k)
        predicted.append(sum(alive) / len(alive))
        realised.append(sum(s.num_accepted >= k for s in verified) / len(verified))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=positions, y=predicted, name="predicted survival ∏ c (a prediction)",
                         marker_color=PREDICTION_COLOUR))
    fig.add_trace(go.Bar(x=positions, y=realised, name="realised: tokens 1..k all accepted (measured)",
                         marker_color="#009E73"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.05])
    return _small_layout(fig, "DSpark: predicted vs realised survival", "position k", "share of steps")


def progress_figure(lanes: dict[str, list[Step]]) -> go.Figure:
    """Tokens committed against measured wall time, one line per lane: the steeper, the faster."""
    fig = go.Figure()
    for method, steps in lanes.items():
        times, counts, total = [0.0], [0], 0
        for step in steps:
            total += len(step.committed)
            times.append(step.spans[-1].end_s * 1e3 if step.spans else times[-1])
            counts.append(total)
        fig.add_trace(go.Scatter(x=times, y=counts, mode="lines", name=method_label(method),
                                 line_shape="hv", **lane_line(method)))
    return _small_layout(fig, "Tokens vs wall time", "time since the lane's start (ms)", "tokens committed")


def accepted_length_figure(lanes: dict[str, list[Step]]) -> go.Figure:
    """How many drafted tokens each step got accepted, per drafting lane: the papers' τ histograms (τ is
    this number plus one)."""
    fig = go.Figure()
    for method, steps in lanes.items():
        accepted = [s.num_accepted for s in steps if s.kind == "decode"]
        if not accepted:
            continue
        longest = max(accepted)
        shares = [accepted.count(a) / len(accepted) for a in range(longest + 1)]
        colour, marker = lane_style(method)
        fig.add_trace(go.Bar(x=list(range(longest + 1)), y=shares, name=method_label(method), marker_color=colour))
    fig.update_layout(barmode="group")
    return _small_layout(fig, "Accepted drafts per step", "drafted tokens accepted in a step", "share of steps")


def predicted_vs_measured_figure(comparison) -> go.Figure:
    """Each lane's measured speedup beside the seed's formula τ / (1 + cost_draft / cost_target), fed with the
    same run's measured τ and draft and verify time per step. The formula counts a verify as one baseline
    forward; a striped bar divides the formula by what one of the lane's verifies cost in baseline forwards
    (`verify_cost`), printed on it as "÷ 1.17", and the subtitle says, from those costs, whether a verify cost
    more or less than one forward here. What is left between that bar and the measured one is host work,
    bubbles and the prefill."""
    from ..theory import speedup

    names, measured, predicted, costs = [], [], [], []
    for method, lane in comparison.lanes.items():
        s, ratio, cost = lane.summary, comparison.speedup(method), verify_cost(comparison, method)
        if method == BASELINE or s is None or ratio is None or cost is None:
            continue
        names.append(method_label(method))
        measured.append(ratio)
        predicted.append(speedup(s.tau, s.draft_s / s.verify_s))
        costs.append(cost)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=predicted, name="formula from this run's τ and costs (a prediction)",
                         marker_color=PREDICTION_COLOUR))
    fig.add_trace(go.Bar(x=names, y=[p / c for p, c in zip(predicted, costs)],
                         name="formula ÷ a verify's cost in baseline forwards",
                         text=[f"÷ {c:.2f}" for c in costs], textposition="outside", cliponaxis=False,
                         hovertext=[f"{n}: one verify cost {c:.2f} baseline forwards" for n, c in zip(names, costs)],
                         hoverinfo="text+y", marker=dict(color="white", line=dict(color=PREDICTION_COLOUR, width=1.5),
                                                         pattern=dict(shape="/", fgcolor=PREDICTION_COLOUR))))
    fig.add_trace(go.Bar(x=names, y=measured, name="measured speedup", marker_color=HERE_COLOUR))
    fig.update_layout(barmode="group")
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    _small_layout(fig, "Speedup: measured vs the formula", "lane", "speedup (×)")
    if costs:
        fig.update_layout(title_subtitle=dict(text=wrapped(verify_cost_words(costs), SMALL_CHART_CHARS + 8),
                                              font=dict(size=12)))
    return fig


def verify_cost_words(costs: list[float]) -> str:
    """The formula chart's subtitle: what one verify cost against one baseline forward, from the costs drawn."""
    mean = sum(costs) / len(costs)
    how = more_or_less(mean, 1.0, 0.05)
    shift = {"more than": "below", "less than": "above", "about as much as": "level with"}[how]
    return (f"one verify cost {value_span(costs)} baseline forwards ({how} one), so the striped bar sits {shift} "
            "the formula's")


def bubble_share_figure(comparison) -> go.Figure:
    """Share of each lane's wall time spent drafting, verifying, on host work and in bubbles (no span)."""
    fig = go.Figure()
    parts = {"draft": [], "verify": [], "host": [], "bubble": []}
    names = []
    for method, lane in comparison.lanes.items():
        s = lane.summary
        if s is None or s.wall_s <= 0:
            continue
        names.append(method_label(method))
        for part, value in (("draft", s.draft_s), ("verify", s.verify_s + s.prefill_s), ("host", s.host_s),
                            ("bubble", s.bubble_s)):
            parts[part].append(value / s.wall_s)
    colours = {**WORK_COLOURS, "bubble": "rgba(0,0,0,0.08)"}
    for part, values in parts.items():
        fig.add_trace(go.Bar(y=names, x=values, orientation="h", name=WORK_NAMES.get(part, "bubble (nothing ran)"),
                             marker_color=colours[part]))
    fig.update_layout(barmode="stack")
    return _small_layout(fig, "Where the time went", "share of wall time", "lane")


# The element ids of the Compare tab's charts, in comparison_figures' order (a lesson point names its chart by one)
CHART_IDS = ("timeline", "progress", "acceptance", "survival", "accepted-histogram", "formula-vs-measured",
             "time-split")
NUM_CHARTS = len(CHART_IDS)  # comparison_figures draws this many


def comparison_figures(comparison, projector: bool = False) -> tuple[go.Figure, ...]:
    """The Compare tab's charts of one comparison, in the page's order: the timeline, tokens against time,
    per-position acceptance and survival, a scheduled drafter's survival, accepted drafts per step, measured
    speedup against the formula, and where the time went; projector: each laid out for a room (for_projector)."""
    steps = {m: list(lane.steps) for m, lane in comparison.lanes.items()}
    drafting = {m: s for m, s in steps.items() if METHOD_REGISTRY.get(m) is None or METHOD_REGISTRY[m].drafts}
    cutting = next((s for m, s in steps.items() if m in METHOD_REGISTRY and METHOD_REGISTRY[m].cuts), [])
    acceptance = {m: comparison.lanes[m].per_position_acceptance for m in drafting}
    sampled = not comparison.greedy and comparison.settings.get("verify_rule") == "rejection"
    ceilings = {m: comparison.lanes[m].per_position_ceiling for m in drafting} if sampled else None
    figures = (timeline_figure(steps), progress_figure(steps), acceptance_figure(acceptance, ceilings),
               survival_figure(cutting), accepted_length_figure(drafting), predicted_vs_measured_figure(comparison),
               bubble_share_figure(comparison))
    return tuple(styled(f, projector) for f in figures)


# --- the Why tab: the seed's formula against measurements -----------------------------------------------



def label_positions(points: dict[str, tuple[int, float]], max_k: int | None = None) -> list[str]:
    """Where each point's label goes, in the order of `points` ({name: (K, speedup)}): to the right of a point
    alone at its K; where lanes share a K (DFlash and DSpark at one block length), above the highest and below the
    lowest (ties broken by order), so their labels do not print over each other. With `max_k` (the axis' last K),
    points in its last quarter are labelled on their left, so the label is not cut off at the chart's edge."""
    items = list(points.values())
    positions = []
    for i, (k, y) in enumerate(items):
        group = sorted((v, -j) for j, (kk, v) in enumerate(items) if kk == k)  # lowest first
        rank = group.index((y, -i))
        side = "left" if max_k is not None and k > 0.75 * max_k else "right"
        if len(group) == 1 or 0 < rank < len(group) - 1:
            positions.append(f"middle {side}")
        else:
            positions.append(f"{'top' if rank == len(group) - 1 else 'bottom'} {side}")
    return positions


def theory_figure(serial: list[float], one_pass: list[float], measured: dict[int, float] | None = None,
                  measured_prediction: list[float] | None = None,
                  run_points: dict[str, tuple[int, float]] | None = None) -> go.Figure:
    """Predicted speedup against K for a serial and a one-pass drafter, each optimum marked; optionally a
    measured K sweep and the formula's curve from that sweep's own measured acceptance and cost."""
    from ..theory import best_k

    ks = list(range(1, len(serial) + 1))
    fig = go.Figure()
    # Each optimum is named in its curve's legend entry and marked on the curve: labels printed at the points
    # fell over each other (and over the crosses) wherever two optima shared a K.
    for name, curve, colour in (("serial drafter (K forwards), predicted", serial, PREDICTION_COLOUR),
                                ("one-pass drafter (1 forward), predicted", one_pass, PREDICTION_DARK)):
        k = best_k(curve)
        fig.add_trace(go.Scatter(x=ks, y=curve, mode="lines", name=f"{name}, best K = {k} ◆", legendgroup=name,
                                 line=dict(color=colour, dash=PREDICTION_DASH)))
        fig.add_trace(go.Scatter(x=[k], y=[curve[k - 1]], mode="markers", legendgroup=name,
                                 marker=dict(color=colour, size=10, symbol="diamond"),
                                 showlegend=False, hovertext=f"{name}: optimum K = {k}, {curve[k - 1]:.2f}×",
                                 hoverinfo="text"))
    if measured:
        mk = sorted(measured)
        best = max(mk, key=measured.get)
        fig.add_trace(go.Scatter(x=mk, y=[measured[k] for k in mk], mode="lines+markers",
                                 name=f"AR lane, measured here, best K = {best} ★", line=dict(color=AR_COLOUR)))
        fig.add_trace(go.Scatter(x=[best], y=[measured[best]], mode="markers", showlegend=False,
                                 hovertext=f"measured best K = {best}, {measured[best]:.2f}×", hoverinfo="text",
                                 marker=dict(color=AR_COLOUR, size=12, symbol="star")))
    if measured_prediction:
        fig.add_trace(go.Scatter(x=ks[: len(measured_prediction)], y=measured_prediction, mode="lines",
                                 name="formula from the measured acceptance and cost",
                                 line=dict(color=AR_COLOUR, dash="dot")))
    if run_points:  # the last Compare run: each lane at its draft length, its measured speedup
        names = list(run_points)
        fig.add_trace(go.Scatter(x=[run_points[n][0] for n in names], y=[run_points[n][1] for n in names],
                                 mode="markers+text", text=names, textposition=label_positions(run_points, len(ks)),
                                 name="your last run (measured)", marker=dict(color="#000", size=9, symbol="x")))
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=30, b=40), xaxis_title="draft length K",
                      yaxis_title="speedup over the target alone (×)", plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    top = max([len(ks), *(k for k, _ in (run_points or {}).values()), *(measured or {})])
    fig.update_xaxes(showgrid=True, gridcolor="#eee", dtick=1, range=[0.5, top + 0.5])  # no K = 0 at the origin
    fig.update_yaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    return fig


def machine_vs_gpu_figure(here: dict[str, dict], published) -> go.Figure:
    """Draft cost over verify cost and speedup: measured on this machine (per lane) beside the published
    datacenter-GPU figures (cost implied by their τ and speedup through the formula), each with its source."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, subplot_titles=("draft cost / verify cost", "speedup (×)"),
                        vertical_spacing=0.18)  # one above the other: the bars' long names fit a projector's row
    names = [f"{lane} (here, measured)" for lane in here] + [f"{p.method} · {p.setting}" for p in published]
    costs = [r["draft_cost"] for r in here.values()] + [p.implied_draft_cost for p in published]
    speeds = [r["speedup"] for r in here.values()] + [p.speedup for p in published]
    colours = [HERE_COLOUR] * len(here) + [PUBLISHED_COLOUR] * len(published)  # greys: no hue of a token or a lane
    sources = ["measured in this run on this machine"] * len(here) + \
              [f"{p.source}; cost implied by τ {p.tau} and {p.speedup}×" for p in published]
    for row, values in ((1, costs), (2, speeds)):
        fig.add_trace(go.Bar(y=names, x=values, orientation="h", marker_color=colours, showlegend=False,
                             hovertext=[f"{n}<br>{v:.2f}<br>{s}" for n, v, s in zip(names, values, sources)],
                             hoverinfo="text"), row=row, col=1)
    fig.update_layout(height=160 + 2 * 24 * len(names), margin=dict(l=10, r=10, t=40, b=30), plot_bgcolor="white")
    fig.update_yaxes(autorange="reversed")
    return fig


def sweeps_figure(sweeps: dict[str, dict]) -> go.Figure:
    """K sweeps of several serial lanes ({method: engine.measure.sweep.k_sweep's result}): each lane's measured speedup
    against K (solid, its best K starred) beside the formula fed with that sweep's own acceptance and cost
    (dotted)."""
    from ..theory import serial_curve

    fig = go.Figure()
    for method, sweep in sweeps.items():
        (colour, _), name = lane_style(method), f"{method_label(method)} ({sweep['drafter']})"
        ks = sorted(int(k) for k in sweep["rows"])
        speedups = [sweep["rows"][str(k)]["speedup"] if str(k) in sweep["rows"] else sweep["rows"][k]["speedup"]
                    for k in ks]
        best = ks[speedups.index(max(speedups))]
        # the best K in the legend, not printed at the star: lanes whose optima share a K printed over each other
        fig.add_trace(go.Scatter(x=ks, y=speedups, mode="lines+markers", name=f"{name}, measured, best K = {best} ★",
                                 legendgroup=method, line=dict(color=colour)))
        fig.add_trace(go.Scatter(x=[best], y=[max(speedups)], mode="markers", showlegend=False, legendgroup=method,
                                 hovertext=f"{method_label(method)}: best K = {best}, {max(speedups):.2f}×",
                                 hoverinfo="text", marker=dict(color=colour, size=13, symbol="star")))
        curve = serial_curve(sweep["acceptance"], sweep["per_forward_cost"], max(ks))
        fig.add_trace(go.Scatter(x=list(range(1, max(ks) + 1)), y=curve, mode="lines",
                                 name=f"{method_label(method)}: formula from its measured acceptance and cost",
                                 legendgroup=method, line=dict(color=colour, dash="dot")))
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    max_k = max((int(k) for sweep in sweeps.values() for k in sweep["rows"]), default=1)
    fig.update_layout(height=400, margin=dict(l=10, r=10, t=30, b=40), xaxis_title="draft length K",
                      yaxis_title="speedup over the target alone (×)", plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0))
    fig.update_xaxes(showgrid=True, gridcolor="#eee", dtick=1, range=[0.5, max_k + 0.5])  # no K = 0 at the origin
    fig.update_yaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    return fig


def lossless_figure(check: dict) -> go.Figure:
    """The distribution check (engine.measure.lossless): for the likeliest first-two-token pairs, the target's exact
    probability (a prediction) beside each lane's share of its samples (measured)."""
    labels = [f"{chart_label(a)} {chart_label(b)}" for a, b in check["pairs"]]
    fig = go.Figure(go.Bar(x=labels, y=check["target_probs"], name="the target's exact probability",
                           marker_color=PREDICTION_COLOUR))
    for method, lane in check["lanes"].items():
        fig.add_trace(go.Bar(x=labels, y=[c / check["samples"] for c in lane["counts"]],
                             name=f"{method_label(method)}: share of {check['samples']} seeds (p = {lane['p_value']:.2f})",
                             marker_color=lane_style(method)[0]))
    fig.update_layout(barmode="group")
    return _small_layout(fig, "First two tokens: counted against the target's probabilities", "the pair of tokens",
                         "probability / share of seeds")


def parts_figure(parts: dict) -> go.Figure:
    """A method beside its variants (engine.measure.sweep.variant_sweep): per position, each one's conditional acceptance
    (solid) and survival (dotted, in the same colour)."""
    fig = go.Figure()
    palette = variant_shades(parts["method"])
    for i, (name, row) in enumerate(parts["rows"].items()):
        rates, colour = row["per_position_acceptance"], palette[i % len(palette)]
        label = f"{variant_label(parts['method'], name)} (τ {row['tau']:.2f})"
        fig.add_trace(go.Scatter(x=list(range(1, len(rates) + 1)), y=rates, mode="lines+markers", connectgaps=False,
                                 name=label, legendgroup=name, line=dict(color=colour)))
        alive = survival_along(rates)
        fig.add_trace(go.Scatter(x=list(range(1, len(alive) + 1)), y=alive, mode="lines", name=f"{label}: survival",
                                 legendgroup=name, showlegend=False, line=dict(color=colour, dash=SURVIVAL_DASH)))
    for name, dash in (("solid: conditional acceptance", "solid"), ("dotted: survival", SURVIVAL_DASH)):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=name, line=dict(color="#777", dash=dash)))
    fig.update_yaxes(range=[0, 1.05])
    return _small_layout(fig, "Each variant per position: conditional acceptance and survival",
                         "position k in the block", "share of steps")


def variant_shades(method: str) -> tuple[str, ...]:
    """A method's variants in shades of its own lane colour (darker, lighter, then grey): one hue, one method."""
    base = lane_style(method)[0].lstrip("#")
    r, g, b = (int(base[i:i + 2], 16) for i in (0, 2, 4))
    mix = lambda t, to: "#" + "".join(f"{round(c + (to - c) * t):02X}" for c in (r, g, b))  # noqa: E731
    return (f"#{base}", mix(0.45, 0), mix(0.5, 255), "#777777", mix(0.7, 0))


def variant_label(method: str, name: str) -> str:
    """'DSpark, without its Markov head, ...' for dspark_no_markov (the registry's words for the variant);
    'DSpark as shipped' for the method itself."""
    entry = METHOD_REGISTRY[method]
    words = {f"{method}_{v.suffix}": v.words or v.suffix for v in entry.variants}
    return entry.label + (f", {words[name]}" if name in words else " as shipped")


def _temperature_axis(sweep: dict) -> tuple[list[float], list[str]]:
    """The sweep's temperatures, each labelled with the target's mean entropy there (how sure it is)."""
    temperatures = sorted(sweep["temperatures"], key=float)
    labels = [f"T = {float(t):g}<br>H {sweep['temperatures'][t]['target_entropy']['mean']:.2f}" for t in temperatures]
    return [float(t) for t in temperatures], labels


def _sweep_lanes(sweep: dict) -> list[str]:
    """The lanes as shipped (no variant rows), in the sweep's order."""
    first = next(iter(sweep["temperatures"].values()))["lanes"]
    return [m for m in first if m in METHOD_REGISTRY]


def _error_bars(cells: list[dict]) -> dict:
    return dict(type="data", symmetric=False, array=[c["high"] - c["mean"] for c in cells],
                arrayminus=[c["mean"] - c["low"] for c in cells], thickness=1.2, width=4)


def temperature_tau_figure(sweep: dict) -> go.Figure:
    """τ of every lane against the temperature (engine.measure.sweep.temperature_sweep), with its 95 % interval over the
    prompts; under each temperature the target's mean entropy per token (nats)."""
    xs, labels = _temperature_axis(sweep)
    fig = go.Figure()
    for method in _sweep_lanes(sweep):
        cells = [sweep["temperatures"][str(t)]["lanes"][method]["tau"] for t in xs]
        fig.add_trace(go.Scatter(x=xs, y=[c["mean"] for c in cells], error_y=_error_bars(cells), mode="lines+markers",
                                 name=method_label(method), line=dict(color=lane_style(method)[0]),
                                 marker=dict(symbol=lane_style(method)[1], size=8)))
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    _small_layout(fig, "τ against temperature (95 % intervals; H: the target's mean entropy, nats)", "",
                  "τ, tokens per step")
    fig.update_xaxes(tickvals=xs, ticktext=labels)
    fig.update_yaxes(rangemode="tozero")
    return fig


def temperature_acceptance_figure(sweep: dict) -> go.Figure:
    """Every lane's expected acceptance (the mean of min(1, p/q) over judged drafts, solid) beside its mean overlap
    1 − TV (dashed) against the temperature, each with its 95 % interval."""
    xs, labels = _temperature_axis(sweep)
    fig = go.Figure()
    for method in _sweep_lanes(sweep):
        rows = [sweep["temperatures"][str(t)]["lanes"][method] for t in xs]
        colour, marker = lane_style(method)
        fig.add_trace(go.Scatter(x=xs, y=[r["expected_acceptance"]["mean"] for r in rows], mode="lines+markers",
                                 error_y=_error_bars([r["expected_acceptance"] for r in rows]), legendgroup=method,
                                 name=f"{method_label(method)}: expected acceptance", line=dict(color=colour),
                                 marker=dict(symbol=marker, size=8)))
        hot = [(x, r) for x, r in zip(xs, rows) if x > 0]  # at 0 the rule is greedy: 1 − TV bounds nothing
        fig.add_trace(go.Scatter(x=[x for x, _ in hot], y=[r["one_minus_tv"]["mean"] for _, r in hot], mode="lines",
                                 legendgroup=method, name=f"{method_label(method)}: 1 − TV",
                                 line=dict(color=colour, dash=PREDICTION_DASH)))
    _small_layout(fig, "Acceptance is the overlap 1 − TV of the two distributions (above T = 0)", "",
                  "mean over judged drafts")
    fig.update_xaxes(tickvals=xs, ticktext=labels)
    fig.update_yaxes(range=[0, 1.05])
    return fig


# --- draft trees: the budget sweep (engine.measure.sweep.budget_sweep) -------------------------------------------

CHAIN_DASH = "dash"  # a chain's value beside its tree's budgets: a flat dashed line in the chain's colour


def _budgets(lane: dict) -> list[int]:
    return sorted(int(b) for b in lane["rows"])


def _budget_row(lane: dict, budget: int) -> dict:
    return lane["rows"][str(budget)] if str(budget) in lane["rows"] else lane["rows"][budget]


def budget_figure(sweep: dict) -> go.Figure:
    """τ (left) and speedup (right) of every tree lane against its node budget (solid, its marker; the best budget
    starred), each chain it grows from as a flat dashed line in the chain's colour."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("τ, tokens per step", "speedup over the target alone (×)"),
                        horizontal_spacing=0.1)
    budgets = sorted({b for lane in sweep["lanes"].values() for b in _budgets(lane)})
    for tree, lane in sweep["lanes"].items():
        chain, xs = lane["chain"], _budgets(lane)
        best = int(lane["best_budget"])
        for col, key in ((1, "tau"), (2, "speedup")):
            ys = [_budget_row(lane, b)[key] for b in xs]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"{method_label(tree)}, by budget",
                                     legendgroup=tree, showlegend=col == 1, **lane_line(tree),
                                     hovertemplate=f"{method_label(tree)}: %{{x}} nodes, %{{y:.2f}}<extra></extra>"),
                          row=1, col=col)
            flat = lane["chain_row"][key]
            fig.add_trace(go.Scatter(x=[budgets[0], budgets[-1]], y=[flat, flat], mode="lines",
                                     name=f"{method_label(chain)}, the chain (K = {lane['drafts_per_step']})",
                                     legendgroup=chain, showlegend=col == 1,
                                     line=dict(color=lane_style(chain)[0], dash=CHAIN_DASH),
                                     hovertemplate=f"{method_label(chain)} chain: %{{y:.2f}}<extra></extra>"),
                          row=1, col=col)
        at_best = _budget_row(lane, best)["speedup"]
        fig.add_trace(go.Scatter(x=[best], y=[at_best], mode="markers", showlegend=False, legendgroup=tree,
                                 marker=dict(color=lane_style(tree)[0], size=14, symbol="star"),
                                 hovertemplate=f"{method_label(tree)}: best budget {best} nodes, {at_best:.2f}×"
                                               "<extra></extra>"), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999", width=1), row=1, col=2)
    fig.update_xaxes(type="log", tickvals=budgets, ticktext=[str(b) for b in budgets], title="node budget",
                     showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    fig.update_layout(title=dict(text="Trees against their chains: τ and speedup by node budget (★ best)",
                                 font=dict(size=14)),
                      height=380, margin=dict(l=10, r=10, t=60, b=40), plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def tree_costs_figure(sweep: dict) -> go.Figure:
    """Left: each budget's verify ms per step against its verified nodes per step (tree lanes in their markers, the
    chains too), with the least-squares line through the trees' points: what one more verified node costs here.
    Right: one draft forward of each tree lane in verified nodes' worth, and a step's draft forwards."""
    from plotly.subplots import make_subplots

    from ..theory import tree_costs

    costs = tree_costs(sweep)
    base_ms, node_ms = costs["verify"]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.14,
                        subplot_titles=("verify ms per step against nodes verified",
                                        "one draft forward, in verified nodes"))
    nodes = []
    for tree, lane in sweep["lanes"].items():
        xs = _budgets(lane)
        rows = [_budget_row(lane, b) for b in xs]
        nodes += [r["verified_per_step"] for r in rows] + [lane["chain_row"]["verified_per_step"]]
        fig.add_trace(go.Scatter(x=[r["verified_per_step"] for r in rows], y=[r["verify_ms_per_step"] for r in rows],
                                 mode="markers", name=method_label(tree), legendgroup=tree, **lane_line(tree),
                                 text=[f"{b} nodes" for b in xs],
                                 hovertemplate=f"{method_label(tree)}, %{{text}}: %{{x:.1f}} verified, %{{y:.1f}} ms"
                                               "<extra></extra>"), row=1, col=1)
        chain, row = lane["chain"], lane["chain_row"]
        fig.add_trace(go.Scatter(x=[row["verified_per_step"]], y=[row["verify_ms_per_step"]], mode="markers",
                                 name=f"{method_label(chain)}, the chain", legendgroup=chain, **lane_line(chain),
                                 hovertemplate=f"{method_label(chain)} chain: %{{x:.1f}} verified, %{{y:.1f}} ms"
                                               "<extra></extra>"), row=1, col=1)
    low, top = min(nodes), max(nodes)
    fig.add_trace(go.Scatter(x=[low, top], y=[base_ms + node_ms * low, base_ms + node_ms * top], mode="lines",
                             name=f"least-squares line: {base_ms:.1f} ms + {node_ms:.2f} ms a node",
                             line=dict(color="#777", dash="dot")), row=1, col=1)
    trees = list(sweep["lanes"])
    lanes = costs["lanes"]
    fig.add_trace(go.Bar(y=[f"{method_label(t)}<br>{lanes[t]['forwards']:.1f} a step" for t in trees],
                         x=[lanes[t]["forward_nodes"] for t in trees],
                         orientation="h", marker_color=[lane_style(t)[0] for t in trees], showlegend=False,
                         text=[f"{lanes[t]['forward_nodes']:.1f}" for t in trees], textposition="outside",
                         hovertemplate="%{y}: one draft forward %{customdata:.2f} ms = %{x:.1f} verified nodes"
                                       "<extra></extra>", customdata=[lanes[t]["forward_ms"] for t in trees]),
                  row=1, col=2)
    # the node axis starts just short of the fewest nodes verified: its ticks keep off the time axis's 0 at the corner
    pad = 0.04 * (top - low) + 0.2
    fig.update_xaxes(title="verified nodes per step", range=[low - pad, top + pad], showgrid=True, gridcolor="#eee",
                     row=1, col=1)
    fig.update_yaxes(title="verify ms per step", rangemode="tozero", showgrid=True, gridcolor="#eee", row=1, col=1)
    widest = max((lanes[t]["forward_nodes"] for t in trees), default=1.0)
    fig.update_xaxes(title="verified nodes' worth", range=[0, 1.3 * widest], showgrid=True, gridcolor="#eee", row=1,
                     col=2)  # room for each bar's number beyond its end
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    fig.update_layout(title=dict(text="What a bigger tree costs here: verified nodes and draft forwards",
                                 font=dict(size=14)),
                      height=380, margin=dict(l=10, r=10, t=60, b=40), plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def tree_published_figure(sweep: dict, published) -> go.Figure:
    """Speedup of each chain and its tree (at its best budget): measured here, beside DDTree's published figures
    (hatched, each with its target, benchmark and source)."""
    names, values, colours, patterns, hovers = [], [], [], [], []
    for tree, lane in sweep["lanes"].items():
        best = _budget_row(lane, int(lane["best_budget"]))
        chain = lane["chain"]
        for method, speed, words in ((chain, lane["chain_row"]["speedup"], "chain"),
                                     (tree, best["speedup"], f"{lane['best_budget']} nodes")):
            names.append(f"{method_label(method)} ({words}) · here")
            values.append(speed)
            colours.append(lane_style(method)[0])
            patterns.append("")
            hovers.append(f"measured here, on {sweep.get('device', 'this machine')}")
    for p in published:
        for method, speed, tau in ((p.chain, p.chain_speedup, p.chain_tau), (p.tree, p.tree_speedup, p.tree_tau)):
            names.append(f"{'DDTree' if method == p.tree else method_label(method)} · {p.setting}")
            values.append(speed)
            colours.append(lane_style(method)[0])
            patterns.append("/")
            hovers.append(f"published: {p.source}; τ {tau}")
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker=dict(color=colours, pattern_shape=patterns),
                           text=[f"{v:.2f}×" for v in values], textposition="auto", hovertext=hovers,
                           hoverinfo="text+x", showlegend=False))
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(title="speedup over the target alone (×)", rangemode="tozero", showgrid=True, gridcolor="#eee")
    fig.update_layout(title=dict(text="Chain and tree: here (plain) and published on GPUs (hatched)",
                                 font=dict(size=14)),
                      height=120 + 30 * len(names), margin=dict(l=10, r=10, t=50, b=40), plot_bgcolor="white")
    return fig


# --- under load: speedup and τ against requests at once ----------------------------------------------------------

def _load_lane(lane: str) -> tuple[str, str, dict]:
    """A load lane's method, its name in the legend, and its line: DSpark verifying everything dotted in DSpark's
    colour."""
    if lane == "dspark_verify_all":
        return "dspark", f"{method_label('dspark')}, verifying everything", {"line": {"dash": "dot"}}
    return lane, method_label(lane), {}


PUBLISHED_STYLES = (("dash", "circle"), ("dashdot", "square"), ("longdash", "diamond"))  # grey, told apart by these


def load_figure(sweep: dict, published=()) -> go.Figure:
    """Speedup over the batched target alone (left) and τ (right) of every batched lane against how many requests
    run at once; `published` (theory.PUBLISHED_LOAD) in dashed grey on the speedup side, labelled with their
    hardware."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("speedup over the target alone (×)", "τ, tokens per step"),
                        horizontal_spacing=0.1)
    sizes = sorted(map(int, sweep["rows"]))
    for lane in next(iter(sweep["rows"].values()))["lanes"]:
        if lane == BASELINE:
            continue
        method, name, extra = _load_lane(lane)
        for col, key in ((1, "speedup"), (2, "tau")):
            ys = [sweep["rows"][str(b)]["lanes"][lane][key] for b in sizes]
            fig.add_trace(go.Scatter(x=sizes, y=ys, mode="lines+markers", name=name, legendgroup=lane,
                                     showlegend=col == 1, **lane_line(method, **dict(extra)),
                                     hovertemplate=f"{name}: B = %{{x}}, %{{y:.2f}}<extra></extra>"), row=1, col=col)
    for paper, (dash, symbol) in zip(published, PUBLISHED_STYLES):
        xs, ys = zip(*paper.speedups)
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name=f"published: {paper.setting}",
                                 line=dict(color="#9a9a9a", dash=dash), marker=dict(color="#9a9a9a", size=7,
                                                                                     symbol=symbol),
                                 hovertemplate=f"{paper.setting} ({paper.source}): B = %{{x}}, %{{y:.2f}}×"
                                               "<extra></extra>"), row=1, col=1)
    ticks = sorted(set(sizes) | {c for paper in published for c, _ in paper.speedups})
    fig.add_hline(y=1.0, line=dict(color="#999", width=1), row=1, col=1)
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(b) for b in ticks], title="requests at once (B)",
                     showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    fig.update_layout(title=dict(text="Under load: speedup and τ against requests at once", font=dict(size=14)),
                      height=420, margin=dict(l=10, r=10, t=70, b=40), plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig
