"""Every lesson point's "Run it live" measures its live size: the seeds, prompts, values of K, temperatures, tokens and
timing runs that reach the engine are the live ones (a spy on the engine counts them); the page names that size
beside the recording's; and the words say only what a sample that small supports."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson
from app.run import runner  # noqa: E402
from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label  # noqa: E402

SHORT_PROMPTS = ["def f(x):", "import os", "class A:", "x = 1"]  # the tiny random model's context holds 96 tokens


@pytest.fixture(scope="module")
def built_app(random_engine):
    """The app built once for the module: its lesson and slide handlers, and every lane runner it starts and
    engine call it makes recorded (app_handlers empties the records before each test)."""
    from app.main import build_app
    from app.tabs.lesson import LessonHandlers
    from app.tabs.slides import SlideHandlers

    generated, streamed, runners = [], [], []
    real_generate, real_stream = random_engine.generate, random_engine.stream
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lesson, "load_prompts", lambda: SHORT_PROMPTS)
        patch.setattr(random_engine, "generate",
                      lambda prompt, config, *a, **k: generated.append((prompt, config)) or
                      real_generate(prompt, config, *a, **k))
        patch.setattr(random_engine, "stream",  # a Compare lane streams the engine's checked request
                      lambda request: streamed.append((request.prompt_ids, request.config)) or real_stream(request))

        def run_lanes(*args, **kwargs):
            runners.append({k: v for k, v in kwargs.items() if k == "timing_runs"})  # what these tests read
            yield from runner.run_lanes(*args, **kwargs)

        demo = build_app(random_engine, run_lanes=run_lanes)
        owners = [getattr(dep.fn, "__self__", None) for dep in demo.fns.values()]
        yield SimpleNamespace(lesson=next(o for o in owners if isinstance(o, LessonHandlers)),
                              slides=next(o for o in owners if isinstance(o, SlideHandlers)),
                              generated=generated, streamed=streamed, runners=runners)


@pytest.fixture
def app_handlers(built_app):
    """The built app's lesson and slide handlers, with only this test's lane runners and engine calls recorded
    (each test runs as a visitor of its own)."""
    for calls in (built_app.generated, built_app.streamed, built_app.runners):
        calls.clear()
    return built_app


def point_of(recording: str):
    return next(p for p in lesson.POINTS if p.recording == recording)


def run_point(handlers, recording: str, session: str):
    point = point_of(recording)
    visitor = SimpleNamespace(session_hash=session)
    prepared = handlers.lesson.prepare_live(point.number, visitor)
    outputs = list(handlers.lesson.run_live(point.number, visitor))
    return point, prepared, outputs[-1], handlers.lesson.sessions.get(session).panels[recording]


def drafting(engine) -> list[str]:
    """The lanes the lesson's first points measure: every drafting lane but the trees (a point of their own)."""
    return [m for m in engine.methods() if METHOD_REGISTRY[m].drafts and not METHOD_REGISTRY[m].tree]


def test_the_distribution_check_runs_its_live_seeds_on_every_drafting_lane(app_handlers, random_engine):
    _, _, (_, table), measured = run_point(app_handlers, "lossless", "live-check")
    per_lane = Counter(config.method for _, config in app_handlers.generated if config.max_new_tokens == 3)
    assert per_lane == {m: lesson.LIVE_LOSSLESS_SAMPLES for m in drafting(random_engine)}
    assert {config.seed for _, config in app_handlers.generated} == set(range(lesson.LIVE_LOSSLESS_SAMPLES))
    assert f"{lesson.LIVE_LOSSLESS_SAMPLES} seeds × {len(drafting(random_engine))} lanes" in table
    recording = lesson.recorded()["lossless"]
    assert f"(the recording: {lesson.size_words(recording)})" in table and "Measured live" in table
    assert lesson.size_words(recording) == f"{lesson.LOSSLESS_SAMPLES} seeds × {len(recording['data']['lanes'])} lanes"


def test_the_k_sweep_runs_its_live_values_of_k_prompts_tokens_and_rounds(app_handlers, random_engine):
    _, _, (_, table, _), measured = run_point(app_handlers, "sweeps", "live-sweep")
    serial = lesson.serial_methods(random_engine.methods())
    runs = [(prompt, config) for prompt, config in app_handlers.generated]
    assert {prompt for prompt, _ in runs} == set(SHORT_PROMPTS[:lesson.LIVE_SWEEP_PROMPTS])
    assert {config.max_new_tokens for _, config in runs} == {lesson.LIVE_SWEEP_TOKENS}
    for method in serial:
        ks = Counter(config.drafts_per_step for _, config in runs if config.method == method)
        # each K on each prompt once a round, plus the sweep's one unmeasured warm-up (at the first K)
        expected = {k: lesson.LIVE_SWEEP_PROMPTS * lesson.LIVE_SWEEP_ROUNDS for k in lesson.LIVE_SWEEP_KS}
        expected[lesson.LIVE_SWEEP_KS[0]] += 1
        assert ks == expected, method
    assert sorted(map(int, measured["data"]["sweeps"][serial[0]]["rows"])) == list(lesson.LIVE_SWEEP_KS)
    assert lesson.size_words(measured) in table and "(the recording: 2 serial lanes × 8 values of K" in table
    assert "Each configuration ran once" in table  # one round: how far apart speedups must be to differ


def test_the_parts_run_their_live_prompts_tokens_and_rounds(app_handlers, random_engine):
    _, _, (_, table), measured = run_point(app_handlers, "parts", "live-parts")
    runs = app_handlers.generated
    assert {prompt for prompt, _ in runs} == set(SHORT_PROMPTS[:lesson.LIVE_PARTS_PROMPTS])
    assert {config.max_new_tokens for _, config in runs} == {lesson.LIVE_PARTS_TOKENS}
    baseline = [config for _, config in runs if config.method == BASELINE]
    assert len(baseline) == lesson.LIVE_PARTS_PROMPTS * lesson.LIVE_PARTS_ROUNDS
    assert measured["data"]["num_prompts"] == lesson.LIVE_PARTS_PROMPTS and measured["data"]["rounds"] == 1
    recording = lesson.recorded()["parts"]
    assert lesson.size_words(measured) in table and f"(the recording: {lesson.size_words(recording)})" in table
    assert lesson.size_words(recording).startswith(f"4 variants × {recording['data']['num_prompts']} prompts")


def test_the_temperature_sweep_runs_its_live_temperatures_prompts_and_tokens(app_handlers):
    _, _, (_, _, table), measured = run_point(app_handlers, "temperatures", "live-temperatures")
    runs = app_handlers.generated
    assert {config.temperature for _, config in runs} == set(lesson.LIVE_TEMPERATURES)
    assert {prompt for prompt, _ in runs} == set(SHORT_PROMPTS[:lesson.LIVE_TEMPERATURE_PROMPTS])
    assert {config.max_new_tokens for _, config in runs} == {lesson.LIVE_TEMPERATURE_TOKENS}
    assert sorted(map(float, measured["data"]["temperatures"])) == list(lesson.LIVE_TEMPERATURES)
    assert measured["data"]["num_prompts"] == lesson.LIVE_TEMPERATURE_PROMPTS
    assert lesson.temperature_takeaway({"temperatures": measured}).startswith("From T = 0 to 1")  # worded from it
    assert lesson.size_words(measured) in table and "(the recording: 5 temperatures" in table


def test_the_budget_sweep_runs_its_live_budgets_prompts_tokens_and_rounds(app_handlers, random_engine):
    _, _, (*_, table), measured = run_point(app_handlers, "trees", "live-trees")
    runs = app_handlers.generated
    trees = [m for m in random_engine.methods() if METHOD_REGISTRY[m].tree]
    assert trees and sorted(measured["data"]["lanes"]) == sorted(trees)
    assert {prompt for prompt, _ in runs} == set(SHORT_PROMPTS[:lesson.LIVE_TREE_PROMPTS])
    assert {config.max_new_tokens for _, config in runs} == {lesson.LIVE_TREE_TOKENS}
    for tree in trees:
        budgets = Counter(config.tree_nodes for _, config in runs if config.method == tree)
        # each budget on each prompt once a round (the sweep's unmeasured warm-up runs a chain)
        assert budgets == {b: lesson.LIVE_TREE_PROMPTS * lesson.LIVE_TREE_ROUNDS for b in lesson.LIVE_TREE_BUDGETS}, tree
    assert measured["data"]["rounds"] == lesson.LIVE_TREE_ROUNDS
    assert lesson.size_words(measured) in table and "(the recording: 2 tree lanes × 5 budgets" in table
    assert "Each configuration ran once" in table


def test_the_load_point_runs_its_live_batch_sizes_requests_tokens_and_lanes(app_handlers, random_engine):
    """Under load, live: each batch size over the live requests, the lanes the point compares, each once; the
    batched runs go through engine/batch.py, not the single-request loop the spy counts."""
    _, _, (_, table), measured = run_point(app_handlers, "load", "live-load")
    data = measured["data"]
    assert data["sizes"] == list(lesson.LIVE_LOAD_SIZES) and data["requests"] == lesson.LIVE_LOAD_REQUESTS
    assert data["max_new_tokens"] == lesson.LIVE_LOAD_TOKENS and data["rounds"] == lesson.LIVE_LOAD_ROUNDS
    assert data["lanes"] == [lane for lane in lesson.LIVE_LOAD_LANES]
    assert data["identical_outputs"]
    assert lesson.size_words(measured) in table and "Each configuration ran once" in table
    # live, without transformers' generate and the batched-against-single check beside it (half the time)
    assert not any("hf_generate" in row or "batched_vs_single_path" in row for row in data["rows"].values())
    assert "transformers' batched generate" not in table


@pytest.mark.parametrize("recording", ["lossless", "sweeps", "parts", "temperatures", "trees", "load"])
def test_the_why_points_live_note_and_slide_name_the_live_size(app_handlers, recording, monkeypatch):
    point = point_of(recording)
    recorded = lesson.recorded()[recording]
    fake = lesson.measurement(recorded["data"], "cpu (test)")  # the measurement's path is the tests above
    monkeypatch.setattr(lesson, {"lossless": "measure_check_live", "sweeps": "measure_sweeps_live",
                                 "parts": "measure_parts_live", "temperatures": "measure_temperatures_live",
                                 "trees": "measure_trees_live", "load": "measure_load_live"}[recording],
                        lambda engine, *a, stop=None: fake)
    visitor = SimpleNamespace(session_hash=f"note-{recording}")
    prepared = app_handlers.lesson.prepare_live(point.number, visitor)
    note = next(v["value"] for v in prepared if isinstance(v, dict) and "Lesson point" in str(v.get("value", "")))
    assert f"measured live on this machine: {lesson.live_size(point)}" in note and "(the recording: " in note
    app_handlers.slides.on_press(point.number, visitor)
    *_, last = app_handlers.slides.run_live(point.number, visitor)
    assert "measured live" in last[3] and lesson.size_words(fake) in last[3]


def test_a_lesson_comparison_runs_each_lane_its_live_timing_runs_and_says_so(app_handlers, monkeypatch):
    point = point_of("greedy")
    settings = app_handlers.lesson.live_settings  # the recording's settings, less its tokens: the runs are counted
    monkeypatch.setattr(app_handlers.lesson, "live_settings", lambda p: replace(settings(p), max_new_tokens=4))
    visitor = SimpleNamespace(session_hash="live-compare")
    prepared = app_handlers.lesson.prepare_live(point.number, visitor)
    *_, last = app_handlers.lesson.run_live(point.number, visitor)
    assert "done" in last[0]
    assert app_handlers.runners == [{"timing_runs": lesson.LIVE_TIMING_RUNS}]
    comparison = app_handlers.lesson.sessions.get("live-compare").last
    streams = Counter(config.method for _, config in app_handlers.streamed)
    assert all(streams[m] == lane.timing_runs <= lesson.LIVE_TIMING_RUNS for m, lane in comparison.lanes.items())
    note = next(v["value"] for v in prepared if isinstance(v, dict) and "Lesson point" in str(v.get("value", "")))
    assert f"each lane run {'twice' if lesson.LIVE_TIMING_RUNS == 2 else lesson.LIVE_TIMING_RUNS}" in note


def test_the_compare_tabs_own_run_keeps_its_timing_runs(app_handlers, random_engine):
    compare = app_handlers.lesson.compare
    settings = replace(lesson.comparison_settings(compare.methods, 0.0), max_new_tokens=4)  # what matters: the runs
    list(compare.run.run_comparison(settings, True, "compare-tab"))
    assert app_handlers.runners == [{}]  # the lane runner's own TIMING_RUNS


# --- the words: only what the sample supports ----------------------------------------------------------------

def check_of(samples: int, p_values=(0.5, 0.6), top: float = 0.43) -> dict:
    lanes = {m: {"p_value": p, "statistic": 1.0, "dof": 1, "counts": [samples // 2]}
             for m, p in zip(("eagle3", "dflash"), p_values)}
    return {"lossless": {"data": {"samples": samples, "temperature": 1.0, "lanes": lanes, "pairs": [["a", "b"]],
                                  "target_probs": [top], "verify_rule": "rejection"}}}


def test_a_small_distribution_check_finds_no_evidence_and_a_large_one_says_the_odds_are_the_targets():
    small = lesson.rule_slide(check_of(lesson.LIVE_LOSSLESS_SAMPLES))  # the live size
    assert "no evidence of a difference at this size" in small and "± 15 points" in small
    assert "follow the target's own odds" not in small
    large = lesson.rule_slide(check_of(2000))
    assert "follow the target's own odds" in large and "no evidence" not in large
    rejected = lesson.rule_slide(check_of(40, p_values=(0.001, 0.6)))
    assert "rejects the target's odds for AR" in rejected


def test_the_interval_over_few_prompts_is_wider_than_the_normal_one():
    from engine.measure.sweep import ratio_interval

    mean, low, high = ratio_interval([3, 4, 5], [5, 5, 5])
    _, normal_low, normal_high = ratio_interval([3, 4, 5], [5, 5, 5], z=1.96)
    assert low < normal_low < mean < normal_high < high
    many = [3, 4, 5] * 20
    _, t_low, _ = ratio_interval(many, [5] * len(many))
    _, z_low, _ = ratio_interval(many, [5] * len(many), z=1.96)
    assert t_low == pytest.approx(z_low, rel=0.01)  # many prompts: the normal interval


def parts_of(shipped: float, full: float, rounds: int | None) -> dict:
    row = {"tau": 4.0, "verified_per_step": 6.0, "verify_ms_per_step": 10.0, "draft_ms_per_step": 2.0}
    rows = {"dspark": {**row, "speedup": shipped}, "dspark_verify_all": {**row, "speedup": full},
            "dspark_no_markov": {**row, "tau": 1.8, "speedup": 1.2}}
    data = {"method": "dspark", "rows": rows, "num_prompts": 2, "max_new_tokens": 48}
    return {"parts": {"data": data if rounds is None else {**data, "rounds": rounds}}}


def test_one_round_of_speedups_needs_a_larger_gap_to_say_the_scheduler_pays():
    assert "here the scheduler pays" in lesson.parts_slide(parts_of(2.10, 2.00, rounds=2))
    assert "no measurable difference" in lesson.parts_slide(parts_of(2.10, 2.00, rounds=1))
    assert "here the scheduler pays" in lesson.parts_slide(parts_of(2.50, 2.00, rounds=1))


# --- each live word chooser at the size it runs at: its words never contradict its slide -------------------------
# The live data below is the recording's own figures at the live settings (its values of K, budgets, batch sizes,
# temperatures), with the live size's rounds and prompts, each speedup moved by the noise a live run of that size
# shows between repeats (LIVE_SPEED_NOISE, measured: docs/benchmarks.md) in every direction: whatever the noise does,
# the live words must not say the opposite of what the recording's words say.

def nudged(values: dict, signs) -> dict:
    """Each value moved by LIVE_SPEED_NOISE up (+1) or down (-1), in the order of `values`."""
    return {k: v * (1 + sign * lesson.LIVE_SPEED_NOISE) for (k, v), sign in zip(values.items(), signs)}


def every_direction(n: int):
    import itertools

    return list(itertools.product((1, -1), repeat=n))


def live_sweep(signs_by_lane: dict) -> dict:
    """The recorded K sweep cut to the live values of K, prompts, tokens and rounds, each speedup nudged."""
    import copy

    data = {"sweeps": copy.deepcopy(lesson.recorded()["sweeps"])}
    sweeps = data["sweeps"]["data"]
    sweeps["rounds"] = lesson.LIVE_SWEEP_ROUNDS
    for m, sweep in sweeps["sweeps"].items():
        speedups = nudged({k: sweep["rows"][str(k)]["speedup"] for k in lesson.LIVE_SWEEP_KS}, signs_by_lane[m])
        sweep["rows"] = {str(k): {**sweep["rows"][str(k)], "speedup": s} for k, s in speedups.items()}
        sweep["best_k"] = max(speedups, key=speedups.get)
        sweep["num_prompts"], sweep["max_new_tokens"] = lesson.LIVE_SWEEP_PROMPTS, lesson.LIVE_SWEEP_TOKENS
    return data


def best_and_level(words: str, lane: str) -> set[int]:
    """The values of K a sweep's words name best or level with the best for `lane`."""
    import re

    clause = next(part for part in words.split("; ") if part.startswith(lane))
    best = int(re.search(r"best K is (\d+)", clause).group(1))
    level = re.search(r"\(K = ([\d, ]+) level with it\)", clause)
    return {best, *(int(k) for k in level.group(1).split(", "))} if level else {best}


def test_the_live_k_sweep_never_names_a_best_k_its_noise_cannot_tell_from_the_recordings():
    recorded = lesson.recorded()["sweeps"]["data"]["sweeps"]
    assert set(lesson.LIVE_SWEEP_KS) <= set(lesson.SWEEP_KS)
    for signs in every_direction(len(lesson.LIVE_SWEEP_KS)):
        data = live_sweep({m: signs for m in recorded})
        assert lesson.size_words(data["sweeps"]) and lesson.speed_tolerance(data["sweeps"]["data"]) > lesson.TOLERANCE
        words = lesson.sweep_slide(data)
        for m, sweep in recorded.items():
            # the recording's best among the live values of K: the live words name it best or level with the best
            best = max(lesson.LIVE_SWEEP_KS, key=lambda k: sweep["rows"][str(k)]["speedup"])
            assert best in best_and_level(words, method_label(m)), (signs, words)
            assert "dips to" not in words, (signs, words)  # the recording's figures at these K do not dip


def test_the_live_load_words_keep_the_recordings_direction():
    """Live under load: B = LIVE_LOAD_SIZES over the live requests, once: each lane's speedup at the two sizes
    nudged every way; the speedup never rises with the batch where the recording's falls (and is said to fall where
    the fall is beyond the noise), and τ stays."""
    import copy

    assert set(lesson.LIVE_LOAD_SIZES) <= set(lesson.LOAD_SIZES) and set(lesson.LIVE_LOAD_LANES) <= set(
        lesson.recorded()["load"]["data"]["lanes"])
    low, high = (str(b) for b in (min(lesson.LIVE_LOAD_SIZES), max(lesson.LIVE_LOAD_SIZES)))
    recorded = lesson.recorded()["load"]["data"]
    falls = [lane for lane in ("dflash", "dspark_verify_all") if lane in lesson.LIVE_LOAD_LANES
             and recorded["rows"][high]["lanes"][lane]["speedup"] < recorded["rows"][low]["lanes"][lane]["speedup"]]
    assert falls
    for signs in every_direction(2 * len(falls)):
        data = {"load": copy.deepcopy(lesson.recorded()["load"])}
        load = data["load"]["data"]
        load.update(sizes=list(lesson.LIVE_LOAD_SIZES), requests=lesson.LIVE_LOAD_REQUESTS,
                    max_new_tokens=lesson.LIVE_LOAD_TOKENS, rounds=lesson.LIVE_LOAD_ROUNDS)
        load["rows"] = {b: load["rows"][b] for b in (low, high)}
        load.pop("scheduler_vs_all", None)
        for i, lane in enumerate(falls):
            for b, sign in zip((low, high), signs[2 * i: 2 * i + 2]):
                load["rows"][b]["lanes"][lane]["speedup"] *= 1 + sign * lesson.LIVE_SPEED_NOISE
        takeaway = lesson.load_takeaway(data)
        for lane in falls:  # never the opposite of the recording; a fall beyond the noise said as one
            words = lesson.LOAD_SPEEDUP_WORDS.get(lane, f"{method_label(lane)}'s speedup")
            assert f"{words} rises" not in takeaway, (signs, takeaway)
            start, end = (recorded["rows"][b]["lanes"][lane]["speedup"] for b in (low, high))
            if end * (1 + lesson.LIVE_SPEED_NOISE) < start * (1 - lesson.LIVE_SPEED_NOISE) * (1 - lesson.ONE_ROUND_NOISE):
                assert f"{words} falls from" in takeaway, (signs, takeaway)
        assert "τ unchanged" in takeaway and "B = 1 → " in lesson.load_slide(data)


def test_the_live_parts_never_say_the_scheduler_pays_where_the_recording_says_it_does_not():
    import copy

    recorded = lesson.recorded()["parts"]["data"]["rows"]
    said = lesson.parts_slide(lesson.recorded())  # what the recording says: the scheduler does not pay, or no
    assert "does not pay" in said or "no measurable difference" in said  # measurable difference, here
    for signs in every_direction(2):
        data = {"parts": copy.deepcopy(lesson.recorded()["parts"])}
        parts = data["parts"]["data"]
        parts.update(rounds=lesson.LIVE_PARTS_ROUNDS, num_prompts=lesson.LIVE_PARTS_PROMPTS,
                     max_new_tokens=lesson.LIVE_PARTS_TOKENS)
        for lane, s in nudged({m: recorded[m]["speedup"] for m in ("dspark", "dspark_verify_all")}, signs).items():
            parts["rows"][lane]["speedup"] = s
        assert "here the scheduler pays" not in lesson.parts_slide(data), signs


def test_the_live_trees_never_crown_the_tree_the_recording_puts_behind():
    import copy

    recorded = lesson.recorded()["trees"]["data"]
    assert set(lesson.LIVE_TREE_BUDGETS) <= set(lesson.TREE_BUDGETS)
    best = {t: max(lane["rows"][str(b)]["speedup"] for b in lesson.LIVE_TREE_BUDGETS)
            for t, lane in recorded["lanes"].items()}
    behind = min(best, key=best.get)
    for signs in every_direction(len(lesson.LIVE_TREE_BUDGETS) * len(best)):
        data = {"trees": copy.deepcopy(lesson.recorded()["trees"])}
        trees = data["trees"]["data"]
        trees.update(budgets=list(lesson.LIVE_TREE_BUDGETS), rounds=lesson.LIVE_TREE_ROUNDS,
                     num_prompts=lesson.LIVE_TREE_PROMPTS, max_new_tokens=lesson.LIVE_TREE_TOKENS)
        moves = iter(signs)
        for lane in trees["lanes"].values():
            rows = {str(b): lane["rows"][str(b)] for b in lesson.LIVE_TREE_BUDGETS}
            speedups = nudged({b: row["speedup"] for b, row in rows.items()}, [next(moves) for _ in rows])
            lane["rows"] = {b: {**row, "speedup": speedups[b]} for b, row in rows.items()}
            lane["best_budget"] = int(max(speedups, key=speedups.get))
        assert not lesson.trees_slide(data).startswith(f"{method_label(behind)} wins"), signs


def test_the_live_temperature_sweep_never_says_tau_rises_where_the_recording_has_it_fall():
    """τ's intervals over the live prompts: the recording's, widened for so few prompts (Student's t and the
    square root of the count); where the recording's τ falls, the live words say it falls or that it does not move
    beyond its intervals, never that it rises."""
    import copy

    from engine.measure.sweep import T_975

    recorded = lesson.recorded()["temperatures"]["data"]
    assert set(map(float, lesson.LIVE_TEMPERATURES)) <= set(map(float, recorded["temperatures"]))
    n, n0 = lesson.LIVE_TEMPERATURE_PROMPTS, recorded["num_prompts"]
    widen = T_975[n - 2] / T_975[min(n0 - 2, len(T_975) - 1)] * (n0 / n) ** 0.5
    data = {"temperatures": copy.deepcopy(lesson.recorded()["temperatures"])}
    sweep = data["temperatures"]["data"]
    sweep["num_prompts"], sweep["max_new_tokens"] = n, lesson.LIVE_TEMPERATURE_TOKENS
    sweep["temperatures"] = {str(float(t)): sweep["temperatures"][str(float(t))] for t in lesson.LIVE_TEMPERATURES}
    for row in sweep["temperatures"].values():
        for lane in row["lanes"].values():
            tau = lane["tau"]
            half = (tau["high"] - tau["low"]) / 2 * widen
            lane["tau"] = {"mean": tau["mean"], "low": tau["mean"] - half, "high": tau["mean"] + half}
    assert "rises" not in lesson.temperature_slide(data) and "falls for" in lesson.temperature_slide(lesson.recorded())
    assert "does not move beyond its 95 % intervals" in lesson.temperature_slide(data)  # so few prompts: it says so
    # marked live (as "Run it live" marks it), its words say why it cannot show τ move and what the recording shows
    live = {"temperatures": lesson.live_measurement(data["temperatures"])}
    words, full = lesson.temperature_slide(live), lesson.temperature_takeaway(live)
    assert f"cannot be seen to move on {n} prompts" in words and f"over its {n0}, τ falls for" in words, words
    assert f"This live run's {n} prompts are too few to show τ move" in full and "falls for" in full, full
    assert "cannot be seen" not in lesson.temperature_slide(lesson.recorded())
    # its speedups, each prompt run once, come with how far one prompt alone went
    spread = [row["speedup_by_prompt"] for t in sweep["temperatures"].values() for m, row in t["lanes"].items()
              if m in METHOD_REGISTRY]
    assert (f"each of {n} prompts run once; one prompt alone gave {min(s['min'] for s in spread):.2f}–"
            f"{max(s['max'] for s in spread):.2f}×") in words, words


def test_the_temperature_point_words_the_speedup_at_each_end_from_its_sweep():
    recorded = lesson.recorded()["temperatures"]["data"]["temperatures"]
    low, high = recorded[min(recorded, key=float)]["lanes"], recorded[max(recorded, key=float)]["lanes"]
    words = lesson.temperature_slide(lesson.recorded())
    for m in ("eagle3", "dflash"):
        assert f"{method_label(m)} {low[m]['speedup']:.2f} → {high[m]['speedup']:.2f}×" in words, words
