"""The Why tab: the seed's argument, with curves from the formula and points measured on this machine.

Points 1, 3, 4 and 5 of the argument (see app/theory.py): speedup ≈ τ / (1 + cost_draft / cost_target);
a serial drafter pays K forwards, so its cost grows with K; acceptance does not grow linearly with K, so
there is a best K; a one-pass drafter pays one forward whatever K. Sliders move the prediction; a K sweep
measures the AR lane on this machine and draws it beside the formula fed with that sweep's own measured
acceptance and cost; the last view sets this machine's measured costs beside published datacenter-GPU
figures, each labelled with its source.
"""

from __future__ import annotations

import html

import gradio as gr

from engine.methods import METHOD_REGISTRY
from engine.summary import per_position_acceptance, summarize
from engine.types import GenerationConfig

from ..charts import machine_vs_gpu_figure, theory_figure
from ..examples import example_choices, example_prompts
from ..record import LAST
from ..theory import PUBLISHED, best_k, one_pass_curve, serial_curve

SWEEP_KS = tuple(range(1, 9))
SWEEP_TOKENS = 64

INTRO = """### Why parallel drafting wins, and why by how much depends on the machine
Every verify step commits **τ** tokens on average: the accepted drafts plus the one the target writes itself.
Drafting costs time too, so the speedup over the target alone is about

**speedup ≈ τ / (1 + cost_draft / cost_target)**

A serial drafter (AR, EAGLE-3) pays one forward per drafted token, so its cost grows with K, while τ grows
ever more slowly (each position must survive all the ones before it): past some K, drafting more loses.
A one-pass drafter (DFlash, DSpark) pays one forward for the whole block, so a longer block costs nothing
more. The curves below are **predictions** from that formula (dashed); move the sliders to see how
acceptance and cost move the best K."""


def _settings_prediction(acceptance: float, serial_cost: float, block_cost: float, points=None):
    return theory_figure(serial_curve([acceptance], serial_cost), one_pass_curve([acceptance], block_cost),
                         run_points=points)


def run_points(comparison, eos_id: int | None) -> dict[str, tuple[int, float]]:
    """A Compare run's lanes as points on the K axis: each drafting lane at its draft length, with its
    measured speedup over the same run's baseline (tokens/s over tokens/s)."""
    settings = comparison.settings
    baseline = comparison.lanes.get("baseline")
    if not baseline:
        return {}
    max_new = int(settings.get("max_new_tokens", 64))
    base = summarize(baseline, max_new, eos_id).tokens_per_s
    points = {}
    for method, steps in comparison.lanes.items():
        if method == "baseline" or not base:
            continue
        k = int(settings.get("block_len" if METHOD_REGISTRY[method].one_pass else "draft_len", 1))
        s = summarize(steps, max_new, eos_id)
        points[f"{METHOD_REGISTRY[method].label} (τ {s.tau:.2f})"] = (k, s.tokens_per_s / base)
    return points


def _lane_costs(result) -> dict:
    s = result.summary
    return {"tau": s.tau, "draft_cost": s.draft_s / s.verify_s if s.verify_s else 0.0, "wall_s": s.wall_s,
            "steps": s.num_steps, "draft_s": s.draft_s, "verify_s": s.verify_s}


def measure_sweep(engine, prompt: str, ks=SWEEP_KS, max_new_tokens: int = SWEEP_TOKENS, rounds: int = 2) -> dict:
    """The AR lane at every K and the block drafters at their defaults against the baseline, on one prompt:
    measured speedup, τ and draft cost. Every configuration runs `rounds` times, interleaved, and keeps its
    fastest run (the least disturbed by whatever else the machine does)."""
    configs = {("baseline", 1): None, **{("ar", k): None for k in ks},
               **{(m, METHOD_REGISTRY[m].default_draft_len): None for m in ("dflash", "dspark") if m in engine.methods()}}
    for _ in range(rounds):
        for method, k in configs:
            result = engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=max_new_tokens, draft_len=k))
            best = configs[(method, k)]
            if best is None or result.summary.wall_s < best.summary.wall_s:
                configs[(method, k)] = result
    first = configs.pop(("baseline", 1))
    baseline_wall = first.summary.wall_s
    sweep = {k: configs[("ar", k)] for k in ks}
    lanes = {method: r for (method, _), r in configs.items() if method != "ar"}
    for result in [*sweep.values(), *lanes.values()]:
        if result.output_ids != first.output_ids:
            raise gr.Error(f"{result.method} differs from the baseline: this would be a bug")
    longest = sweep[max(ks)]
    costs = _lane_costs(longest)
    per_forward = costs["draft_cost"] / max(ks)  # one draft forward over one verify forward
    acceptance = [p for p in per_position_acceptance(list(longest.steps)) if p is not None] or [0.0]
    points = {k: baseline_wall / r.summary.wall_s for k, r in sweep.items()}
    here = {f"AR (K={best}) · {engine.drafter_label('ar')}": {**_lane_costs(sweep[best]), "speedup": points[best]}
            for best in [max(points, key=points.get)]}
    for method, r in lanes.items():
        here[f"{METHOD_REGISTRY[method].label} · {engine.drafter_label(method)}"] = {
            **_lane_costs(r), "speedup": baseline_wall / r.summary.wall_s}
    return {"points": points, "taus": {k: r.summary.tau for k, r in sweep.items()}, "acceptance": acceptance,
            "per_forward_cost": per_forward, "prediction": serial_curve(acceptance, per_forward, max(ks)),
            "here": here, "device": engine.device_name, "max_new_tokens": max_new_tokens}


def sweep_table(sweep: dict) -> str:
    ks = sorted(sweep["points"])
    best = max(ks, key=sweep["points"].get)
    rows = ["| K | " + " | ".join(str(k) for k in ks) + " |", "|---|" + "---|" * len(ks),
            "| measured speedup | " + " | ".join(f"{sweep['points'][k]:.2f}×" for k in ks) + " |",
            "| measured τ | " + " | ".join(f"{sweep['taus'][k]:.2f}" for k in ks) + " |",
            "| formula from the measured acceptance and cost | "
            + " | ".join(f"{v:.2f}×" for v in sweep["prediction"]) + " |"]
    acceptance = ", ".join(f"{p:.2f}" for p in sweep["acceptance"])
    return (f"Measured on **{html.escape(sweep['device'])}**, one prompt, {sweep['max_new_tokens']} new tokens, "
            f"temperature 0: best K = **{best}** (formula: {best_k(sweep['prediction'])}). One draft forward costs "
            f"{sweep['per_forward_cost']:.2f} of a verify forward; per-position acceptance at K = {ks[-1]}: "
            f"{acceptance}.\n\n"
            + "\n".join(rows))


def render(engine) -> None:
    gr.Markdown(INTRO)
    with gr.Row():
        acceptance = gr.Slider(0.3, 0.98, value=0.75, step=0.01, label="per-position acceptance p (prediction)")
        serial_cost = gr.Slider(0.02, 1.0, value=0.15, step=0.01,
                                label="serial drafter: one draft forward's cost / a verify forward's")
        block_cost = gr.Slider(0.05, 1.5, value=0.4, step=0.01,
                               label="one-pass drafter: the whole block's cost / a verify forward's")
    with gr.Row():
        overlay_button = gr.Button("Overlay my last Compare run", elem_id="overlay-last-run", size="sm", scale=0)
        overlay_note = gr.Markdown(elem_id="overlay-note")
    prediction = gr.Plot(_settings_prediction(0.75, 0.15, 0.4), elem_id="why-prediction", show_label=False)
    gr.Markdown("**Measure it here.** The K sweep runs the AR lane for K = 1..8 on one prompt (and DFlash and "
                "DSpark once), every output checked against the baseline's, and draws the measured speedup "
                "(solid) beside the formula fed with the sweep's own measured acceptance and cost (dotted).",
                elem_classes="note")
    with gr.Row():
        prompt = gr.Dropdown(example_choices(), value=example_prompts()[0], label="Prompt for the sweep", scale=4)
        sweep_button = gr.Button("Run the K sweep", variant="primary", elem_id="sweep", scale=1)
    sweep_plot = gr.Plot(elem_id="why-sweep", show_label=False)
    sweep_text = gr.Markdown(elem_id="why-sweep-table")
    gr.Markdown("**This machine against a datacenter GPU.** Left: drafting cost over verify cost; right: speedup. "
                "Orange-red bars are measured by the sweep on this machine; blue bars are published H200/B200 "
                "figures (sources on hover and below), their cost implied by their τ and speedup through the "
                "formula. On a small CPU model every forward costs about the same whatever it computes, so "
                "drafting is expensive relative to verifying; on a large model on a GPU a verify forward is "
                "expensive and a few-layer drafter is nearly free — hence the small speedups measured here and "
                "the large ones published there.",
                elem_classes="note")
    machine_plot = gr.Plot(elem_id="why-machine", show_label=False)
    gr.Markdown("Sources: " + "; ".join(f"{p.method}, {p.setting}: {p.speedup}× / τ {p.tau} ({p.source})"
                                       for p in PUBLISHED) + ".", elem_classes="note")

    def predict(p, c, b, request: gr.Request):
        comparison = LAST.last(request.session_hash)
        return _settings_prediction(p, c, b, run_points(comparison, engine.eos_id) if comparison else None)

    def overlay(p, c, b, request: gr.Request):
        comparison = LAST.last(request.session_hash)
        if comparison is None or "baseline" not in comparison.lanes:
            return gr.skip(), "Run a comparison with the Baseline lane on the Compare tab first."
        return predict(p, c, b, request), (f"Crosses: your last run's lanes at their draft lengths, measured on "
                                           f"{html.escape(comparison.device)} (speedup = tokens/s over the baseline's).")

    for slider in (acceptance, serial_cost, block_cost):
        slider.change(predict, [acceptance, serial_cost, block_cost], prediction, show_progress="hidden",
                      queue=False)
    overlay_button.click(overlay, [acceptance, serial_cost, block_cost], [prediction, overlay_note], queue=False,
                         show_progress="hidden")

    def on_sweep(prompt_text, p, c, b):
        sweep = measure_sweep(engine, prompt_text, max_new_tokens=SWEEP_TOKENS)
        figure = theory_figure(serial_curve([p], c, len(SWEEP_KS)), one_pass_curve([p], b, len(SWEEP_KS)),
                               sweep["points"], sweep["prediction"])
        return figure, sweep_table(sweep), machine_vs_gpu_figure(sweep["here"], PUBLISHED)

    sweep_button.click(on_sweep, [prompt, acceptance, serial_cost, block_cost], [sweep_plot, sweep_text, machine_plot],
                       concurrency_limit=1, concurrency_id="engine", api_name="k_sweep")
