"""The Why tab's charts: the formula's prediction against K, the machine beside published GPUs, the K sweeps, the
distribution check, a drafter's variants, temperature, trees by node budget and load. Pure functions: a
measurement (engine/measure's plain values) in, a figure out; drawn for a room through `layout.for_projector`."""

from __future__ import annotations

import plotly.graph_objects as go

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label

from ..words import survival as survival_along
from .layout import (AR_COLOUR, HERE_COLOUR, PREDICTION_COLOUR, PREDICTION_DARK, PREDICTION_DASH, PUBLISHED_COLOUR,
                     SURVIVAL_DASH, _error_bars, _small_layout, lane_line)
from .render import chart_label
from .theme import lane_style

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


def temperature_speedups(sweep: dict, method: str, xs: list[float]) -> list[float | None]:
    """A lane's speedup over the baseline at each temperature of the sweep (its total time over the prompts against
    the baseline's at the same temperature); None where a recording has none."""
    return [sweep["temperatures"][str(t)]["lanes"][method].get("speedup") for t in xs]


def temperature_tau_figure(sweep: dict) -> go.Figure:
    """τ of every lane against the temperature (engine.measure.sweep.temperature_sweep), with its 95 % interval over the
    prompts (left), and its speedup over the baseline at the same temperature, with the lowest and highest one prompt
    alone gave (right); under each temperature the target's mean entropy per token (nats)."""
    from plotly.subplots import make_subplots

    xs, labels = _temperature_axis(sweep)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("τ, tokens a step", "speedup, × the target alone"))
    for method in _sweep_lanes(sweep):
        colour, marker = lane_style(method)
        cells = [sweep["temperatures"][str(t)]["lanes"][method]["tau"] for t in xs]
        fig.add_trace(go.Scatter(x=xs, y=[c["mean"] for c in cells], error_y=_error_bars(cells), mode="lines+markers",
                                 name=method_label(method), legendgroup=method, line=dict(color=colour),
                                 marker=dict(symbol=marker, size=8)), row=1, col=1)
        spread = [sweep["temperatures"][str(t)]["lanes"][method].get("speedup_by_prompt") for t in xs]
        fig.add_trace(go.Scatter(x=xs, y=temperature_speedups(sweep, method, xs), mode="lines+markers",
                                 name=method_label(method), legendgroup=method, showlegend=False,
                                 line=dict(color=colour), marker=dict(symbol=marker, size=8),
                                 customdata=[[s["min"], s["max"]] if s else [None, None] for s in spread],
                                 hovertemplate="%{y:.2f}× (one prompt alone: %{customdata[0]:.2f}–"
                                               "%{customdata[1]:.2f}×)<extra>%{fullData.name}</extra>"), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999", width=1))
    _small_layout(fig, "τ and speedup against temperature", "", "")
    fig.update_layout(title_subtitle_text="τ: 95 % intervals; H: the target's mean entropy, nats",
                      margin_t=90)  # the subtitle above the panels' own titles
    fig.update_xaxes(tickvals=xs, ticktext=labels, row=1, col=1)
    fig.update_xaxes(tickvals=xs, ticktext=[f"T = {t:g}" for t in xs], row=1, col=2)
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
