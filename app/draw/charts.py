"""Run results -> plotly figures. Pure functions: a comparison (or its steps) in, figure out.

`comparison_figures` draws the Compare tab's charts from one Comparison, reading each lane's summary as
it was computed when the lane ended. What every chart shares (colours, layouts, projector mode) is in
`layout`, the Why tab's charts in `why_charts`; both are importable from here too.
"""

from __future__ import annotations

import plotly.graph_objects as go

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label
from engine.contract.survival import survival
from engine.contract.types import Step

from ..comparison import verify_cost
from ..words import more_or_less, span as value_span
from ..words import survival as survival_along
from .theme import WORK_COLOURS, lane_style
from .layout import (AR_COLOUR, HERE_COLOUR, LEGEND_CHARS, PREDICTION_COLOUR, PREDICTION_DARK,  # noqa: F401
                     PREDICTION_DASH, PROJECTOR_FONT, PROJECTOR_SUBTITLE_CHARS, PROJECTOR_TITLE_CHARS,
                     PROJECTOR_TITLE_FONT, PUBLISHED_COLOUR, SMALL_CHART_CHARS, SURVIVAL_DASH, _error_bars,
                     _small_layout, for_projector, lane_line, split_title, styled, wrapped)
from .why_charts import (budget_figure, label_positions, load_figure, lossless_figure,  # noqa: F401
                         machine_vs_gpu_figure, parts_figure, sweeps_figure, temperature_acceptance_figure,
                         temperature_tau_figure, theory_figure, tree_costs_figure, tree_published_figure,
                         variant_label, variant_shades)

BUBBLE_MIN_MS = 0.05  # gaps shorter than this are clock noise, not worth a hover label
DRAFT_ALTERNATE = "draft, every second forward"  # the timeline's key for a step's 2nd, 4th, ... draft forward
DRAFT_ALTERNATE_COLOUR = "#9C6B00"  # a darker orange beside DRAFT_WORK, so adjacent draft forwards stay apart
WORK_NAMES = {"draft": "draft", "verify": "verify (and prefill)", "host": "host (bookkeeping)",
              "train": "train (a drafter tuning itself)"}


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
    traces = [dict(type="bar", orientation="h", y=data["y"], x=data["x"], base=data["base"],
                   name=WORK_NAMES["draft" if alternate else work],
                   showlegend=not alternate and (work != "train" or bool(data["x"])),  # train: where it ran
                   legendgroup="draft" if alternate else work,
                   marker=dict(color=DRAFT_ALTERNATE_COLOUR if alternate else WORK_COLOURS[work], line=dict(width=0)),
                   hovertext=data["text"], hoverinfo="text")
              for work, data in bars.items() for alternate in (work == DRAFT_ALTERNATE,)]
    traces.append(dict(type="bar", orientation="h", y=bubbles["y"], x=bubbles["x"], base=bubbles["base"],
                       name="bubble (gap)", marker=dict(color="rgba(0,0,0,0)",
                                                        line=dict(color="rgba(0,0,0,0.25)", width=0.5)),
                       hovertext=bubbles["text"], hoverinfo="text"))
    fig = unchecked_figure(traces)
    fig.update_layout(
        barmode="overlay", height=120 + 70 * max(1, len(rows)), margin=dict(l=10, r=10, t=30, b=40),
        xaxis_title="time since the lane's start (ms)", bargap=0.35,
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(rows))),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), plot_bgcolor="white",
        hoverlabel=dict(align="left"))
    fig.update_xaxes(showgrid=True, gridcolor="#eee", rangemode="tozero")
    return fig


def unchecked_figure(traces: list[dict]) -> go.Figure:
    """A figure of traces that skip plotly's per-element checks (its own `_validate` switch, off only while they
    are built): the timeline of a large file holds tens of thousands of values, and checking each one cost most
    of its drawing. Only for traces built here from numbers and strings; what is set afterwards (the layout,
    projector mode, another trace) is checked as usual."""
    fig = go.Figure(data=traces, _validate=False)
    fig._validate = fig.layout._validate = True
    return fig


def _add(data: dict, row: str, start_ms: float, end_ms: float, text: str) -> None:
    data["y"].append(row)
    data["base"].append(start_ms)
    data["x"].append(max(end_ms - start_ms, 1e-3))
    data["text"].append(text)


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


def _chart_builders(comparison) -> dict:
    """Each Compare chart of one comparison by its element id (CHART_IDS), as a call that draws it: a caller
    wanting one chart (a slide) draws only that one."""
    steps = {m: list(lane.steps) for m, lane in comparison.lanes.items()}
    drafting = {m: s for m, s in steps.items() if METHOD_REGISTRY.get(m) is None or METHOD_REGISTRY[m].drafts}
    cutting = next((s for m, s in steps.items() if m in METHOD_REGISTRY and METHOD_REGISTRY[m].cuts), [])
    acceptance = {m: comparison.lanes[m].per_position_acceptance for m in drafting}
    sampled = not comparison.greedy and comparison.settings.get("verify_rule") == "rejection"
    ceilings = {m: comparison.lanes[m].per_position_ceiling for m in drafting} if sampled else None
    builders = {"timeline": lambda: timeline_figure(steps), "progress": lambda: progress_figure(steps),
                "acceptance": lambda: acceptance_figure(acceptance, ceilings),
                "survival": lambda: survival_figure(cutting),
                "accepted-histogram": lambda: accepted_length_figure(drafting),
                "formula-vs-measured": lambda: predicted_vs_measured_figure(comparison),
                "time-split": lambda: bubble_share_figure(comparison)}
    assert tuple(builders) == CHART_IDS
    return builders


def comparison_figures(comparison, projector: bool = False) -> tuple[go.Figure, ...]:
    """The Compare tab's charts of one comparison, in the page's order: the timeline, tokens against time,
    per-position acceptance and survival, a scheduled drafter's survival, accepted drafts per step, measured
    speedup against the formula, and where the time went; projector: each laid out for a room (for_projector)."""
    return tuple(styled(draw(), projector) for draw in _chart_builders(comparison).values())


def comparison_figure(comparison, chart: str, projector: bool = False) -> go.Figure:
    """One of the Compare tab's charts (`chart`, one of CHART_IDS), drawn alone."""
    return styled(_chart_builders(comparison)[chart](), projector)
