"""The Why tab: the formula's arithmetic, the measured K sweep, and its figures."""

from __future__ import annotations

import pytest

gr = pytest.importorskip("gradio")

from engine.contract.methods import method_label  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402

from app.theory import PUBLISHED, best_k, expected_tau, one_pass_curve, serial_curve, speedup  # noqa: E402

from conftest import needs_chromium, page_on  # noqa: E402


PROMPT = "def parse(self, text):\n"


def test_expected_tau_sums_the_survival_of_each_position():
    assert expected_tau([0.5], 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tau([0.9, 0.5], 3) == pytest.approx(1 + 0.9 + 0.45 + 0.225)  # the last value repeats
    assert expected_tau([1.0], 7) == 8.0


def test_serial_drafting_has_an_optimum_and_one_pass_drafting_does_not_fall():
    serial = serial_curve([0.8], 0.2)
    k = best_k(serial)
    assert 1 < k < len(serial) and serial[k - 1] > serial[0] and serial[k - 1] > serial[-1]
    one_pass = one_pass_curve([0.8], 0.4)
    assert all(a <= b for a, b in zip(one_pass, one_pass[1:]))  # a longer block never costs more
    assert serial[k - 1] == pytest.approx(speedup(expected_tau([0.8], k), k * 0.2))


def test_published_figures_imply_the_cost_the_formula_needs():
    dflash = next(p for p in PUBLISHED if p.method == "DFlash (16)")
    assert speedup(dflash.tau, dflash.implied_draft_cost) == pytest.approx(dflash.speedup)
    assert all(p.source for p in PUBLISHED)


def test_k_sweeps_measure_every_serial_lane_at_every_k_against_the_baseline(random_engine):
    from app.lesson import measure_sweeps
    from app.tabs.why import sweeps_table

    recorded = measure_sweeps(random_engine, [PROMPT], ks=(1, 2, 3), max_new_tokens=12, rounds=1)
    sweeps = recorded["data"]["sweeps"]
    assert list(sweeps) == ["eagle3"]  # the random engine's one serial lane
    sweep = sweeps["eagle3"]
    assert sorted(sweep["rows"]) == ["1", "2", "3"]  # as it reads back from a recording: JSON's own keys
    assert all(row["speedup"] > 0 and row["tau"] >= 1 for row in sweep["rows"].values())
    assert str(sweep["best_k"]) == max(sweep["rows"], key=lambda k: sweep["rows"][k]["speedup"])
    assert set(sweep["others"]) == {"dflash", "dspark"}  # the block drafters once, beside the first lane
    table = sweeps_table(recorded)
    assert "| AR speedup |" in table and f"**{sweep['best_k']}**" in table and "1 prompt(s), 12 new tokens" in table


def test_why_tab_builds_and_its_overlay_reads_the_sessions_last_run(random_engine):
    from types import SimpleNamespace

    from app.comparison import Comparison
    from app.run.sessions import SessionStore
    from app.tabs import why

    sessions = SessionStore()
    with gr.Blocks() as demo:
        _, handlers = why.render(random_engine, sessions)
    visitor = SimpleNamespace(session_hash="why-visitor")
    assert handlers.overlay(0.7, 0.1, 0.3, visitor)[1] == why.NO_RUN  # nothing run in this session yet
    results = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=8, drafts_per_step=3))
               for m in ("baseline", "eagle3")}
    sessions.get("why-visitor").last = Comparison.of_steps({"drafts_per_step_serial": 3},
                                                           {m: [r.prefill, *r.steps] for m, r in results.items()})
    figure, note = handlers.overlay(0.7, 0.1, 0.3, visitor)
    crosses = [trace for trace in figure.data if trace.mode and "markers" in trace.mode and trace.x == (3,)]
    assert crosses and "Crosses" in note
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {"why-prediction", "why-sweep", "why-machine", "sweep"} <= ids
    # The sweep's prompt list: each prompt on one line with its breaks marked (not "import osdef ..."), and the
    # value the prompt as written
    from app.examples import example_prompts

    (dropdown,) = [b for b in demo.blocks.values() if getattr(b, "label", None) == "Prompts for the sweep"]
    assert [value for _, value in dropdown.choices] == ["heldout", *example_prompts()] and dropdown.value == "heldout"
    assert all("\n" not in label for label, _ in dropdown.choices)
    assert ("import os ⏎ def list_files(path):", "import os\n\n\ndef list_files(path):") in dropdown.choices


def test_comparison_charts_of_a_run(random_engine):
    from app.draw.charts import accepted_length_figure, bubble_share_figure, predicted_vs_measured_figure, verify_cost
    from engine.contract.types import GenerationConfig

    from app.comparison import Comparison

    results = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=16, drafts_per_step=3))
               for m in ("baseline", "eagle3", "dflash")}
    comparison = Comparison.of_steps({"max_new_tokens": 16}, {m: [r.prefill, *r.steps] for m, r in results.items()})
    histogram = accepted_length_figure({m: s for m, s in comparison.steps.items() if m != "baseline"})
    for trace, method in zip(histogram.data, ("eagle3", "dflash")):
        assert sum(trace.y) == pytest.approx(1.0)  # shares of steps
        assert max(trace.x) == max(s.num_accepted for s in results[method].steps)
    formula = predicted_vs_measured_figure(comparison)
    assert list(formula.data[0].x) == ["AR", "DFlash"] and all(v > 0 for v in formula.data[2].y)
    assert list(formula.data[2].y) == [comparison.speedup("eagle3"), comparison.speedup("dflash")]
    # the formula divided by what a verify cost in baseline forwards, each lane labelled with that cost
    costs = [verify_cost(comparison, m) for m in ("eagle3", "dflash")]
    base = comparison.baseline.summary
    for method, cost in zip(("eagle3", "dflash"), costs):
        s = comparison.lanes[method].summary
        assert cost == pytest.approx((s.verify_s / s.num_steps) / (base.verify_s / base.num_steps))
    assert list(formula.data[1].y) == pytest.approx([f / c for f, c in zip(formula.data[0].y, costs)])
    assert list(formula.data[1].text) == [f"÷ {c:.2f}" for c in costs]
    assert verify_cost(comparison, "baseline") == pytest.approx(1.0)
    shares = bubble_share_figure(comparison)
    totals = [sum(trace.x[i] for trace in shares.data) for i in range(3)]
    assert all(0.95 <= t <= 1.05 for t in totals)  # draft + verify + host + bubble ≈ the whole wall time
    for figure in (histogram, formula, shares):
        # with five lanes a legend wraps to more rows: it sits on the figure's bottom edge, and the bottom margin
        # grows with its rows, so it grows away from the axis title instead of over it
        legend = figure.layout.legend
        assert legend.orientation == "h" and legend.yref == "container" and legend.y == 0, figure.layout.title.text
        assert figure.layout.margin.b > 50 + 9 * len(figure.data) - 9  # the axis title, then a line an entry


def test_lanes_at_one_draft_length_get_labels_that_do_not_overlap():
    from app.draw.charts import label_positions, theory_figure

    assert label_positions({"AR": (4, 2.5), "DFlash": (7, 2.5), "DSpark": (7, 2.6)}) == \
        ["middle right", "bottom right", "top right"]  # alone at K = 4; the two at K = 7 above and below
    three = label_positions({"AR": (7, 2.5), "DFlash": (7, 2.5), "DSpark": (7, 2.6)})
    assert sorted(three) == ["bottom right", "middle right", "top right"]  # a tie still gets three places
    points = {"AR": (4, 2.5), "DFlash": (7, 2.55), "DSpark": (7, 2.6)}
    figure = theory_figure([1.5 + k / 10 for k in range(16)], [1.2 + k / 10 for k in range(16)], run_points=points)
    run = next(t for t in figure.data if t.name == "your last run (measured)")
    assert list(run.textposition) == label_positions(points, 16) == label_positions(points)
    # a point at the axis' right end is labelled on its left, not cut off at the chart's edge
    assert label_positions({"AR": (16, 1.9), "DFlash": (7, 2.5)}, 16) == ["middle left", "middle right"]
    # the optima are named in the legend, not printed at the points where they could land on each other
    assert not [t for t in figure.data if t.text and t.name != "your last run (measured)"]
    assert [t.name for t in figure.data if "best K = 16" in (t.name or "")] == [
        "serial drafter (K forwards), predicted, best K = 16 ◆", "one-pass drafter (1 forward), predicted, best K = 16 ◆"]


def test_the_recorded_sweep_names_each_lanes_best_k_in_its_legend():
    from app import lesson
    from app.draw.charts import sweeps_figure

    sweeps = lesson.recorded()["sweeps"]["data"]["sweeps"]
    figure = sweeps_figure({**sweeps, "third": {**sweeps["eagle3"], "drafter": "a third lane"}})  # three optima at one K
    assert not [t for t in figure.data if t.text]  # no label printed on the plot
    for method, sweep in sweeps.items():
        assert sum(f"best K = {sweep['best_k']} ★" in t.name for t in figure.data if t.name) >= 1
        assert f"{method_label(method)}: best K = {sweep['best_k']}," in " ".join(
            t.hovertext for t in figure.data if isinstance(t.hovertext, str))


# Seconds each kind of work lasts in `steady`: synthetic, so the overlay's checks never see this machine's load.
STEADY_SPAN_S = {"verify": 1e-3, "draft": 1.5e-4, "host": 2e-5}


def steady(steps, slower=lambda index: 1.0, host: float | None = None):
    """The same steps laid back to back with every span of one kind of work lasting STEADY_SPAN_S of it (times made
    up, so the check below never depends on this machine's load), step i `slower(i)` times longer on both clocks,
    wall and compute; with `host`, each host span lasts `host` times a verify forward."""
    from dataclasses import replace

    now, out = 0.0, []
    for step in steps:
        spans = []
        for span in step.spans:
            length = host * STEADY_SPAN_S["verify"] if host is not None and span.work == "host" else STEADY_SPAN_S[span.work]
            spans.append(replace(span, start_s=now, end_s=now + length * slower(step.index),
                                 cpu_s=length * slower(step.index)))  # the thread computed all along (both clocks)
            now = spans[-1].end_s
        out.append(replace(step, spans=tuple(spans)))
    return out


def test_the_overlay_warns_when_the_runs_timing_was_disturbed(random_engine):
    from app.comparison import Comparison
    from app.tabs.why import ABOVE_FORMULA, overlay_warnings

    runs = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=24, drafts_per_step=3))
            for m in ("baseline", "eagle3")}
    lanes = {m: steady([r.prefill, *r.steps]) for m, r in runs.items()}
    k3 = {"drafts_per_step_serial": 3}
    quiet = Comparison.of_steps(k3, lanes)
    assert overlay_warnings(quiet) == []
    from app import lesson

    assert overlay_warnings(lesson.recorded()["greedy"]) == []  # the lesson's runs, recorded on a quiet machine
    slow_baseline = Comparison.of_steps(k3, {**lanes, "baseline": steady(lanes["baseline"], lambda i: 3.0)})
    (warning,) = overlay_warnings(slow_baseline)
    assert warning.startswith("AR measured") and f"more than {ABOVE_FORMULA:g} times" in warning
    assert slow_baseline.speedup("eagle3") == pytest.approx(3 * quiet.speedup("eagle3"), rel=0.05)
    bursts = Comparison.of_steps(k3, {**lanes, "baseline": steady(lanes["baseline"],
                                                                  lambda i: 8.0 if i % 4 == 0 else 1)})
    assert any(w.startswith("Baseline's verify forwards") and "slowed them" in w for w in overlay_warnings(bursts))
    # the drafting lane slowed for most of its run (its median verify three times its fastest)
    slowed = Comparison.of_steps(k3, {**lanes, "eagle3": steady(lanes["eagle3"], lambda i: 1 if i < 3 else 3)})
    assert any(w.startswith("AR's verify forwards") for w in overlay_warnings(slowed))
    slow_lane = Comparison.of_steps(k3, {**lanes, "eagle3": steady(lanes["eagle3"], host=2.0)})
    assert any(w.startswith("AR measured") and "lost time" in w for w in overlay_warnings(slow_lane))


def test_run_points_place_each_lane_at_its_draft_length(random_engine):
    from app.comparison import Comparison
    from app.tabs.why import run_points

    lanes = {}
    for method, k in (("baseline", 1), ("eagle3", 3), ("dflash", 5)):
        result = random_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=12, drafts_per_step=k))
        lanes[method] = [result.prefill, *result.steps]
    points = run_points(Comparison.of_steps({"max_new_tokens": 12, "drafts_per_step_serial": 3,
                                             "drafts_per_step_one_pass": 5}, lanes))
    assert sorted(k for k, _ in points.values()) == [3, 5] and all(v > 0 for _, v in points.values())


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_why_tab_in_chromium_overlays_the_last_run_and_shows_the_recorded_sweep(random_app, chromium):
    with page_on(chromium, viewport={"width": 1400, "height": 1200}) as page:
        page.goto(random_app + "?methods=baseline,eagle3,dflash&max_new_tokens=12&prompt=def%20h(z)%3A")  # runs on its own
        page.wait_for_function("(s => s && /done/.test(s.innerText))(document.querySelector('#status'))", timeout=60000)
        page.get_by_role("tab", name="Why").click()
        page.click("#overlay-last-run")
        page.wait_for_selector("#why-prediction :text('your last run (measured)')", timeout=20000)
        assert page.locator("#why-prediction :text('best K = ')").count() >= 2  # both predicted optima marked
        assert "K=16" in page.locator("#why-sweep-table").inner_text()  # the lesson's recording, before any sweep
        assert "DFlash paper, Table 1" in page.content()  # every published figure carries its source


@pytest.fixture(scope="module")
def api_handlers(random_engine):
    """The Why tab's handlers over no recordings, rendered once for the checks of what an API call can send (each
    refused before anything is measured or kept)."""
    from app.run.sessions import SessionStore
    from app.tabs import why

    with gr.Blocks():
        _, handlers = why.render(random_engine, SessionStore(), recordings={})
    return handlers


@pytest.mark.parametrize("values, message", [
    ((float("nan"), 0.1, 0.3), "acceptance p must be a number"), ((0.7, "x", 0.3), "serial draft cost must be"),
    ((0.7, 0.1, [1]), "block draft cost must be"), ((0.7, 0.1, 9.0), "from 0.05 to 1.5"),
])
def test_the_prediction_checks_every_value_an_api_call_can_send(api_handlers, values, message):
    from types import SimpleNamespace

    handlers = api_handlers
    visitor = SimpleNamespace(session_hash="api-visitor")
    with pytest.raises(gr.Error, match=message):
        handlers.predict(*values, visitor)
    with pytest.raises(gr.Error, match=message):
        handlers.overlay(*values, visitor)
    assert handlers.predict(0.7, 0.1, 0.3, visitor).data  # in range: drawn


def test_the_sweep_endpoint_refuses_a_prompt_choice_that_is_not_one(api_handlers):
    from types import SimpleNamespace

    handlers = api_handlers
    for choice in (None, 5, ["x"], "  "):
        with pytest.raises(gr.Error, match="prompts must be"):
            handlers.on_sweep(choice, SimpleNamespace(session_hash="api-visitor"))


def test_the_pages_jargon_is_explained_in_one_glossary():
    from app.glossary import GLOSSARY, glossary_markdown, hover
    from app.theory import PUBLISHED

    words = glossary_markdown()
    assert all(f'id="glossary-{t.key}"' in words and t.meaning in words for t in GLOSSARY)
    for label in [p.method for p in PUBLISHED]:  # "EAGLE-3 (16)", "EAGLE-3 (60)", "DFlash (16)", "DFlash b16"
        assert "draft tree of 16 or of 60 tokens" in hover(label), label
    assert hover("DFlash, 3 layers, block 8 = anchor + 7 drafts").startswith("anchor: The newest committed token")
    assert "Markov head" in hover("DSpark, 3 layers, block 7, vanilla Markov head").split(":")[0]
    assert "match rule:" in hover("the match rule") and "τ (tokens per step):" in hover("AR (τ 3.20)")
    assert hover("EAGLE-3, 1 layer") == ""  # nothing to explain


def test_the_measured_panels_are_drawn_once_for_the_same_measurements(monkeypatch):
    """Every visitor of a lesson link is shown the same recordings: their ten charts are drawn once and shared;
    a new measurement (a live run) or the projector's layout is drawn afresh."""
    import app.tabs.why_panels as why
    from app import lesson

    drawn = []
    monkeypatch.setattr(why, "DRAWN_PANELS", why.DrawnPanels())
    monkeypatch.setattr(why, "draw_panels", lambda recordings, projector: drawn.append(projector) or (object(),))
    recordings = lesson.recorded()
    first = why.panel_outputs(recordings)
    assert why.panel_outputs(dict(recordings)) is first and drawn == [False]  # another visitor, the same recordings
    assert why.panel_outputs(recordings, projector=True) is not first and drawn == [False, True]
    live = {**recordings, "parts": lesson.live_measurement(recordings["parts"])}
    assert why.panel_outputs(live) is not first and drawn == [False, True, False]
