"""Lesson point 10, under load: the recording is made with the settings "Run it live" scales down, its takeaway's
words come from the numbers (a falling speedup is said to fall, a rising one to rise; τ within 10 % or not; the
scheduler ahead of, level with or behind verifying everything, as the numbers have it), and the Why panel draws it
with the published curves beside."""

from __future__ import annotations

from app import lesson
from app.draw.charts import load_figure
from app.lesson import POINTS
from app.theory import PUBLISHED_LOAD


def load_point():
    return next(p for p in POINTS if p.recording == "load")


def lane(speedup: float, tau: float, verified: float, tokens_per_s: float) -> dict:
    return {"speedup": speedup, "tau": tau, "verified_per_request": verified, "tokens_per_s": tokens_per_s,
            "steps": 10, "wall_s": 1.0, "draft_s": 0.1, "verify_s": 0.5, "identical": True}


def sweep(dflash: tuple[float, float], taus: tuple[float, float], scheduled: float, everything: float) -> dict:
    """A made-up sweep over B = 1 and 32: DFlash's and DSpark's speedups `dflash` (at 1, at 32) and τ `taus`; at 32
    DSpark with its scheduler runs `scheduled` × the baseline, verifying everything `everything` ×."""
    def row(i: int, size: int) -> dict:
        base = 100.0 * (1 + size / 8)  # the target alone writes more tokens/s as the batch grows
        lanes = {"baseline": lane(1.0, 1.0, 0.0, base),
                 "dflash": lane(dflash[i], taus[i], 7.0, base * dflash[i]),
                 "dspark": lane(dflash[i] if i == 0 else scheduled, taus[i], 7.0 if i == 0 else 2.0,
                                base * (dflash[i] if i == 0 else scheduled)),
                 "dspark_verify_all": lane(dflash[i] if i == 0 else everything, taus[i], 7.0,
                                           base * (dflash[i] if i == 0 else everything))}
        return {"batches": 32 // size, "lanes": lanes, "hf_generate": {"tokens_per_s": base, "identical": True},
                "baseline_vs_hf": 1.0}

    data = {"sizes": [1, 32], "requests": 32, "max_new_tokens": 64, "rounds": 2,
            "lanes": ["baseline", "dflash", "dspark", "dspark_verify_all"],
            "rows": {"1": row(0, 1), "32": row(1, 32)}, "identical_outputs": True}
    return {"load": lesson.measurement(data, "cpu (test)")}


def test_the_recording_is_made_with_the_settings_run_it_live_scales_down():
    recorded = lesson.recorded()["load"]["data"]
    assert recorded["sizes"] == list(lesson.LOAD_SIZES) and recorded["requests"] == lesson.LOAD_REQUESTS
    assert recorded["max_new_tokens"] == lesson.LOAD_TOKENS and recorded["rounds"] == lesson.LOAD_ROUNDS
    assert recorded["identical_outputs"]  # every request wrote its own single-request greedy output
    assert set(lesson.LIVE_LOAD_LANES) <= set(recorded["lanes"])
    assert lesson.size_words(lesson.recorded()["load"]) in lesson.live_size(load_point())
    assert load_point().number == 10 and POINTS[load_point().number - 2].recording == "parts"  # after DSpark's


def test_the_takeaway_says_what_the_numbers_do():
    falling = lesson.load_takeaway(sweep((2.4, 0.7), (4.2, 4.1), scheduled=0.9, everything=0.7))
    assert "DFlash's speedup falls from 2.40× to 0.70×, τ within 2 % (4.20 → 4.10)" in falling
    assert "slower than the target alone from B = 32" in falling
    assert "At B = 32 DSpark's scheduler verifies 2.0 drafts a request a step against 7.0 verifying everything " \
           "(τ 4.10 against 4.10), and runs ahead of it (1.29 times its speed)" in falling
    assert "DSpark's speedup verifying everything falls from 2.40× to 0.70×" in falling
    assert "at B = 1, level with it" in falling
    rising = lesson.load_takeaway(sweep((1.2, 1.8), (3.0, 4.0), scheduled=1.5, everything=1.8))
    assert "DFlash's speedup rises from 1.20× to 1.80×, τ rises from 3.00 to 4.00" in rising
    assert "slower than the target alone" not in rising and "runs behind it (0.83 times its speed)" in rising
    level = lesson.load_takeaway(sweep((2.0, 1.0), (4.0, 4.0), scheduled=1.0, everything=1.0))
    assert "runs level with it (1.00 times its speed)" in level
    assert "τ unchanged at 4.00" in level  # each request accepts what it does alone
    for text in (falling, rising, level):
        assert "Published on GPUs" in text and "B200" in text


def test_paired_runs_decide_whether_the_scheduler_is_ahead_not_two_separate_figures():
    """With paired runs recorded, the scheduler is ahead of or behind verifying everything only where their
    interval leaves 1 out, whatever the sweep's two faster-of-two figures say; the interval is given."""
    data = sweep((2.4, 0.7), (4.2, 4.1), scheduled=0.75, everything=0.7)  # 1.07 times apart in the sweep
    paired = data["load"]["data"]["scheduler_vs_all"] = {"size": 32, "pairs": 6, "ratios": [0.97, 1.05, 1.01],
                                                          "mean": 1.01, "low": 0.96, "high": 1.06, "identical": True}
    assert ("runs level with it (1.01 times its speed, 95 % interval 0.96–1.06 over 6 pairs of runs side by side)"
            in lesson.load_takeaway(data))
    assert "1.01 (0.96–1.06) times verifying everything's speed" in lesson.load_slide(data)
    paired.update(mean=1.12, low=1.08, high=1.16)
    assert "runs ahead of it (1.12 times its speed, 95 % interval 1.08–1.16" in lesson.load_takeaway(data)
    paired.update(mean=0.9, low=0.85, high=0.95)
    assert "runs behind it (0.90 times its speed" in lesson.load_takeaway(data)


def test_the_slide_gives_the_key_numbers():
    slide = lesson.load_slide(sweep((2.4, 0.7), (4.2, 4.1), scheduled=0.9, everything=0.7))
    assert slide.startswith("B = 1 → 32: DFlash 2.40× → 0.70× (τ 4.20 → 4.10); "
                            "DSpark verifying everything 2.40× → 0.70× (τ 4.20 → 4.10).")
    assert "the scheduler verifies 2.0 a request: 1.29 times verifying everything's speed" in slide


def test_the_panel_draws_every_lane_against_the_batch_size_with_the_published_curves():
    data = lesson.recorded()["load"]["data"]
    figure = load_figure(data, PUBLISHED_LOAD)
    names = {trace.name for trace in figure.data}
    assert {"DFlash", "DSpark", "DSpark, verifying everything"} <= names
    assert {f"published: {p.setting}" for p in PUBLISHED_LOAD} <= names
    dflash = next(t for t in figure.data if t.name == "DFlash" and t.xaxis == "x")
    assert list(dflash.x) == data["sizes"]
    assert list(dflash.y) == [data["rows"][str(b)]["lanes"]["dflash"]["speedup"] for b in data["sizes"]]


def test_the_panels_table_gives_the_paired_runs_where_recorded():
    from app.tabs.why import load_table

    data = sweep((2.4, 0.7), (4.2, 4.1), scheduled=0.75, everything=0.7)
    assert "pairs of runs" not in load_table(data["load"])
    data["load"]["data"]["scheduler_vs_all"] = {"size": 32, "pairs": 3, "ratios": [0.97, 1.05, 1.01], "mean": 1.01,
                                                "low": 0.91, "high": 1.11, "identical": True}
    assert ("at B = 32, in 3 pairs of runs one after the other: 1.01 times its speed (95 % interval 0.91–1.11; "
            "the pairs 0.97, 1.05, 1.01)") in load_table(data["load"])
