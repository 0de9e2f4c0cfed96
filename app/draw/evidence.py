"""The slides' own charts: where a point's title claims more than its tab's chart shows, the chart that shows it.

A slide draws the chart its point names on its tab (app/tabs/slides.py evidence_figure), unless this module has one
for it: the formula over the held-out prompts beside the lesson's one prompt (point 1), per-lane acceptance against
1 − TV over thousands of judged drafts (point 3), τ, acceptance and speedup side by side against the temperature
(point 4), and the three bottlenecks each with a measured chart of its own (point 6). Each is drawn from the lesson's recordings, or a live measurement in a recording's place, and names
what it was measured on. Pure functions: data in, figure out.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.contract.methods import METHOD_REGISTRY, method_label
from engine.contract.summary import acceptance_rate

from ..comparison import Comparison
from ..lesson.choice import rule_words
from ..theory import speedup
from ..words import survival
from .layout import PREDICTION_COLOUR, PREDICTION_DASH, _error_bars, _small_layout
from .theme import lane_style

KEY_COLOUR = "#555555"  # a legend entry that names a kind of mark, not a lane
LIVE_TAG, RECORDED_TAG = " · live", " · recorded"  # a panel's or a mark's source, on a slide redrawn live


def source_tag(key: str, live: str | None) -> str:
    """What to add to the name of a mark or panel drawn from recording `key` on a slide where `live` (a recording's
    key) was just measured live in its place: " · live" or " · recorded"; nothing on a slide drawn from the
    recordings alone (live None), whose footer says when they were recorded."""
    return "" if live is None else (LIVE_TAG if key == live else RECORDED_TAG)
HELD_OUT_NOTE = "bars: {n} held-out prompts, whiskers: one prompt's lowest to highest"


def _heldout(data: dict, temperature: str) -> tuple[int, dict] | None:
    """(held-out prompts, {lane: row}) of the temperature sweep at `temperature` ("0.0", or "top" for its highest),
    the lanes as shipped; None without the sweep."""
    sweep = data.get("temperatures", {}).get("data") if isinstance(data.get("temperatures"), dict) else None
    if not sweep or not sweep.get("temperatures"):
        return None
    key = max(sweep["temperatures"], key=float) if temperature == "top" else temperature
    if key not in sweep["temperatures"]:
        return None
    lanes = {m: row for m, row in sweep["temperatures"][key]["lanes"].items() if m in METHOD_REGISTRY}
    return sweep["num_prompts"], lanes


def formula_figure(data: dict, live: str | None = None) -> go.Figure | None:
    """Point 1: each lane's measured speedup over the held-out prompts at temperature 0 (whiskers: the lowest and
    highest one prompt alone gave), the formula from their τ and draft cost, and the lesson's one prompt's measured
    speedup beside them, hatched and named "one prompt". live: the recording measured live in `data` (source_tag)."""
    heldout, example = _heldout(data, "0.0"), data.get("greedy")
    if heldout is None or not isinstance(example, Comparison):
        return None
    num_prompts, lanes = heldout
    names = [method_label(m) for m in lanes]
    colours = [lane_style(m)[0] for m in lanes]
    measured = [row["speedup"] for row in lanes.values()]
    spread = [row["speedup_by_prompt"] for row in lanes.values()]
    fig = go.Figure()
    whiskers = dict(type="data", symmetric=False, array=[s["max"] - m for s, m in zip(spread, measured)],
                    arrayminus=[m - s["min"] for s, m in zip(spread, measured)], thickness=1.5, width=6, color="#444")
    fig.add_trace(go.Bar(x=names, y=measured, name=f"measured, {num_prompts} held-out prompts{source_tag('temperatures', live)}",
                         marker_color=colours,
                         error_y=whiskers,
                         text=[f"{m:.2f}×" for m in measured], textposition="inside", insidetextanchor="start"))
    one = [example.speedup(m) for m in lanes]  # None where the comparison has no such lane: no bar
    which = rule_words(str(example.settings.get("prompt", "")), short=True)
    fig.add_trace(go.Bar(x=names, y=one, name=f"measured, one prompt ({which}){source_tag('greedy', live)}",
                         marker=dict(color="white", line=dict(color=colours, width=2),
                                     pattern=dict(shape="/", fgcolor=colours)),
                         text=["" if v is None else f"{v:.2f}×" for v in one], textposition="outside",
                         cliponaxis=False))
    fig.add_trace(go.Scatter(x=names, y=[speedup(row["tau"]["mean"], row["draft_cost"]) for row in lanes.values()],
                             mode="markers",
                             name=f"formula τ / (1 + draft cost), held-out{source_tag('temperatures', live)}",
                             marker=dict(symbol="line-ew-open", size=36, color=PREDICTION_COLOUR,
                                         line=dict(width=4, color=PREDICTION_COLOUR))))
    fig.update_layout(barmode="group")
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    _small_layout(fig, f"Speedup: {num_prompts} held-out prompts against one", "", "× the target alone")
    fig.update_layout(title_subtitle_text=HELD_OUT_NOTE.format(n=num_prompts))
    return fig


def ceiling_figure(data: dict, live: str | None = None) -> go.Figure | None:
    """Point 3: per lane, over the held-out prompts at the sweep's highest temperature, the measured acceptance rate,
    the expected acceptance (the mean of min(1, p/q)) and the overlap 1 − TV, each with its 95 % interval; and,
    where the slide has one, the one prompt's measured rate (its comparison at T > 0) with two standard errors. Under
    the rejection rule a draft passes with probability 1 − TV on average, so the measured rate sits on the overlap's
    line up to chance, on either side of it: the line is named for what it is, the overlap, not a cap. live: the
    recording measured live in `data` (source_tag)."""
    heldout = _heldout(data, "top")
    if heldout is None:
        return None
    num_prompts, lanes = heldout
    temperature = max(map(float, data["temperatures"]["data"]["temperatures"]))
    fig = go.Figure()
    tag = source_tag("temperatures", live)
    series = (("verdict_rate", f"measured rate{tag}", "circle", -0.22),
              ("expected_acceptance", f"expected min(1, p/q){tag}", "diamond-open", 0.0),
              ("one_minus_tv", f"1 − TV, the overlap{tag}", "line-ew-open", 0.22))
    xs = list(range(len(lanes)))
    for key, name, symbol, offset in series:
        cells = [row[key] for row in lanes.values()]
        size = 14 if symbol != "line-ew-open" else 26
        fig.add_trace(go.Scatter(x=[x + offset for x in xs], y=[c["mean"] for c in cells], mode="markers", name=name,
                                 error_y=_error_bars(cells), showlegend=False,
                                 marker=dict(symbol=symbol, size=size, color=[lane_style(m)[0] for m in lanes],
                                             line=dict(width=3, color=[lane_style(m)[0] for m in lanes]))))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,  # its key, in no lane's colour
                                 marker=dict(symbol=symbol, size=size, color=KEY_COLOUR,
                                             line=dict(width=3, color=KEY_COLOUR))))
    example = _one_prompt_rates(data.get("sampled"), list(lanes))
    if example:
        fig.add_trace(go.Scatter(x=[xs[i] + 0.4 for i, _ in example], y=[r for _, (r, _) in example], mode="markers",
                                 name=f"one prompt's measured rate (± 2 s.e.){source_tag('sampled', live)}",
                                 error_y=dict(type="data", array=[e for _, (_, e) in example], thickness=1, width=3,
                                              color="#777"),
                                 marker=dict(symbol="x-thin-open", size=12, color="#777", line=dict(width=2))))
    judged = [row["judged"] for row in lanes.values()]
    _small_layout(fig, "Acceptance against 1 − TV", "", "share of judged drafts")
    fig.update_layout(title_subtitle_text=(f"{num_prompts} prompts, T = {temperature:g}, 95 % intervals<br>"
                                           f"{min(judged):,}–{max(judged):,} judged drafts a lane"))
    fig.update_xaxes(tickvals=xs, ticktext=[method_label(m) for m in lanes], range=[-0.6, len(xs) - 0.3])
    fig.update_yaxes(range=[0, 1.0])
    return fig


def _one_prompt_rates(comparison, lanes: list[str]) -> list[tuple[int, tuple[float, float]]]:
    """(lane index, (acceptance rate, two standard errors)) of each lane the one-prompt comparison judged drafts in."""
    if not isinstance(comparison, Comparison) or comparison.greedy:
        return []
    found = []
    for i, m in enumerate(lanes):
        lane = comparison.lanes.get(m)
        steps = list(lane.steps) if lane is not None and lane.summary is not None else []
        rate, judged = acceptance_rate(steps), sum(s.num_judged for s in steps)
        if rate is not None:
            found.append((i, (rate, 2 * (rate * (1 - rate) / judged) ** 0.5)))
    return found


def bottlenecks_figure(data: dict, live: str | None = None) -> go.Figure | None:
    """Point 6, one panel a bottleneck: (1) serial drafting, each serial lane's drafting time a step against its K
    beside the one-pass lanes' whole block (the K sweep's prompts); (2) the ceiling, survival along the one-pass
    lanes' blocks on the lesson's one prompt; (3) no order inside a block, DSpark's τ without and with its Markov head on
    the parts' prompts. live: the recording measured live in `data`, each panel's title saying which it is
    (source_tag)."""
    sweeps, example = data.get("sweeps", {}).get("data"), data.get("greedy")
    parts = data.get("parts", {}).get("data")
    if not sweeps or not sweeps.get("sweeps") or not isinstance(example, Comparison) or not parts:
        return None
    method = parts["method"]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.1,
                        subplot_titles=(f"1. drafting a step, ms<br>{_count(sweeps['sweeps'])} prompts"
                                        f"{source_tag('sweeps', live)}",
                                        f"2. survival along a block<br>one prompt{source_tag('greedy', live)}",
                                        f"3. {method_label(method)}'s τ<br>{parts['num_prompts']} prompts"
                                        f"{source_tag('parts', live)}"))
    one_pass = {}
    for m, sweep in sweeps["sweeps"].items():
        ks = sorted(sweep["rows"], key=int)
        colour, marker = lane_style(m)
        fig.add_trace(go.Scatter(x=[int(k) for k in ks], y=[sweep["rows"][k]["draft_ms_per_step"] for k in ks],
                                 mode="lines+markers", name=method_label(m), legendgroup=m, line=dict(color=colour),
                                 marker=dict(symbol=marker, size=9, color=colour)), row=1, col=1)
        one_pass.update(sweep.get("others", {}))
    for m, row in one_pass.items():
        colour, marker = lane_style(m)
        fig.add_trace(go.Scatter(x=[row.get("drafts_per_step", row.get("draft_len"))], y=[row["draft_ms_per_step"]], mode="markers",
                                 name=method_label(m), legendgroup=m,
                                 marker=dict(symbol=marker, size=14, color=colour)), row=1, col=1)
    for m, lane in example.lanes.items():
        alive = survival(lane.per_position_acceptance) if METHOD_REGISTRY[m].drafts else []
        if alive and METHOD_REGISTRY[m].one_pass:
            colour, marker = lane_style(m)
            fig.add_trace(go.Scatter(x=list(range(1, len(alive) + 1)), y=alive, mode="lines+markers",
                                     name=method_label(m), legendgroup=m, showlegend=m not in one_pass,
                                     line=dict(color=colour), marker=dict(symbol=marker, size=9, color=colour)),
                          row=1, col=2)
    rows = parts["rows"]
    alone, full = rows.get(f"{method}_no_markov"), rows.get(f"{method}_verify_all")
    if alone and full:
        fig.add_trace(go.Bar(x=["no order", "Markov head"], y=[alone["tau"], full["tau"]], showlegend=False,
                             marker=dict(color=lane_style(method)[0], pattern=dict(shape=["x", ""])),
                             text=[f"{alone['tau']:.2f}", f"{full['tau']:.2f}"], textposition="outside",
                             cliponaxis=False), row=1, col=3)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    if alone and full:
        fig.update_yaxes(range=[0, 1.25 * max(alone["tau"], full["tau"])], row=1, col=3)
    fig.update_xaxes(title_text="drafts a step (K)", row=1, col=1)
    fig.update_xaxes(title_text="position k", row=1, col=2)
    fig.update_layout(title=dict(text="Three bottlenecks, each measured", font=dict(size=14)), height=320,
                      plot_bgcolor="white", margin=dict(l=10, r=10, t=80, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return fig


def temperature_figure(data: dict, live: str | None = None) -> go.Figure | None:
    """Point 4, one panel a figure of the temperature sweep against T: (1) τ with its 95 % interval, (2) expected
    acceptance (solid) beside the overlap 1 − TV (dashed, above T = 0), (3) the speedup over the target alone at the
    same temperature; its prompts and tokens in the title, "measured live" there when it was (the slide adds it)."""
    record = data.get("temperatures")
    sweep = record.get("data") if isinstance(record, dict) else None
    if not sweep or not sweep.get("temperatures"):
        return None
    xs = sorted(float(t) for t in sweep["temperatures"])
    cell = {float(t): v for t, v in sweep["temperatures"].items()}
    lanes = [m for m in cell[xs[0]]["lanes"] if m in METHOD_REGISTRY]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09,
                        subplot_titles=("1. τ, tokens a step", "2. acceptance", "3. speedup, ×"))
    for m in lanes:
        colour, marker = lane_style(m)
        rows = [cell[t]["lanes"][m] for t in xs]
        style = dict(mode="lines+markers", legendgroup=m, line=dict(color=colour),
                     marker=dict(symbol=marker, size=10, color=colour))
        fig.add_trace(go.Scatter(x=xs, y=[r["tau"]["mean"] for r in rows], name=method_label(m),
                                 error_y=_error_bars([r["tau"] for r in rows]), **style), row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[r["expected_acceptance"]["mean"] for r in rows], name=method_label(m),
                                 showlegend=False, **style), row=1, col=2)
        hot = [(t, r) for t, r in zip(xs, rows) if t > 0]  # at 0 the rule is greedy: 1 − TV bounds nothing
        fig.add_trace(go.Scatter(x=[t for t, _ in hot], y=[r["one_minus_tv"]["mean"] for _, r in hot],
                                 mode="lines+markers" if len(hot) == 1 else "lines",  # a dash marks it at a lone T
                                 name=method_label(m), legendgroup=m, showlegend=False,
                                 line=dict(color=colour, dash=PREDICTION_DASH),
                                 marker=dict(symbol="line-ew-open", size=22, color=colour, line=dict(width=3))),
                      row=1, col=2)
        speedups = [r.get("speedup") for r in rows]  # None where a recording has none: no point drawn
        fig.add_trace(go.Scatter(x=xs, y=speedups, name=method_label(m), showlegend=False, **style), row=1, col=3)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="1 − TV, the overlap (dashed)",
                             line=dict(color=KEY_COLOUR, dash=PREDICTION_DASH)), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999", width=1), row=1, col=3)
    fig.update_annotations(yshift=14)  # the panels' titles clear of their axes' top ticks
    fig.update_xaxes(tickvals=xs, ticktext=[f"{t:g}" for t in xs], title_text="T")
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_layout(title=dict(text=f"τ, acceptance and speedup by temperature", font=dict(size=14)),
                      title_subtitle_text=(f"{sweep['num_prompts']} held-out prompts, {sweep['max_new_tokens']} new "
                                           "tokens each, 95 % intervals"),
                      height=320, plot_bgcolor="white", margin=dict(l=10, r=10, t=80, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return fig


def _count(sweeps: dict) -> int:
    return next(iter(sweeps.values()))["num_prompts"]


SLIDE_FIGURES = {1: formula_figure, 3: ceiling_figure, 4: temperature_figure, 6: bottlenecks_figure}
NAMES_ITS_SOURCES = (1, 3, 6)  # the charts that draw more than one recording: each mark or panel names its own (source_tag)


def slide_figure(number: int, data: dict, live: str | None = None) -> go.Figure | None:
    """The slide's own chart for point `number` from `data`, or None where the slide draws its tab's chart (or its
    recordings are missing); live: the recording `data` holds a live measurement of (source_tag)."""
    draw = SLIDE_FIGURES.get(number)
    return draw(data, live) if draw is not None else None
