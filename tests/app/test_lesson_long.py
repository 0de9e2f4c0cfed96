"""Lesson point 11, long outputs: its words follow the measurement's intervals, its chart and table draw every lane,
and the lesson knows the recording's kind and size."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

from app import lesson  # noqa: E402
from app.draw.long import long_figure, long_table, window_end  # noqa: E402
from app.lesson.long import LONG_POINT, long_claim, long_words  # noqa: E402


def cell(mean: float, half: float = 0.2) -> dict:
    return {"mean": mean, "low": mean - half, "high": mean + half}


def lane(method: str, option: str, inside: float, past: float, train: float = 0.0) -> dict:
    bins = [{"start": s, "steps": 20, "acceptance": cell(0.5, 0.05), "tau": cell(inside if s < 64 else past)}
            for s in range(0, 160, 32)]
    return {"name": method, "method": method, "option": option, "trained_window": 256,
            "drafter_window": 256 if option == "window" else None,
            "seconds": {"wall": 10.0, "draft": 2.0, "verify": 5.0, "train": train, "cpu": 10.0}, "bins": bins,
            "inside": {"steps": 40, "acceptance": cell(0.6, 0.05), "tau": cell(inside)},
            "past": {"steps": 60, "acceptance": cell(0.3, 0.05), "tau": cell(past)}}


def measured(*lanes: dict) -> dict:
    return {"format": lesson.FORMAT, "recorded_at": "2026-12-06T05:00:00+00:00", "device": "cpu",
            "data": {"bin": 32, "prompts": 16, "context": 512, "temperature": 0.0,
                     "prompt_tokens": [150, 160, 170, 200], "lanes": list(lanes)}}


FALLING = measured(lane("dflash", "as shipped", 4.0, 1.8), lane("dflash", "window", 4.1, 4.0),
                   lane("dflash", "self-tuning", 3.9, 2.0, train=4.0))


def test_the_words_say_what_the_intervals_show():
    words = long_words(FALLING)
    assert "τ 4.00 (3.80–4.20) inside its 256-token trained window and 1.80 (1.60–2.00) past it: it falls" in words
    assert "cut to its 256-token window, 4.00 (3.80–4.20) past it (window lifts it)" in words
    assert "self-tuning leaves it within the intervals, 40% of its time spent training" in words
    assert "16 held-out prompts of 150–200 tokens" in words
    assert long_claim(FALLING) == "Past its trained window DFlash falls; cut to that window it recovers"


def test_the_words_turn_when_the_numbers_do():
    holding = measured(lane("eagle3", "as shipped", 4.0, 3.9), lane("eagle3", "window", 4.0, 3.0),
                       lane("eagle3", "self-tuning", 4.0, 4.6, train=1.0))
    words = long_words(holding)
    assert "it holds, within the intervals" in words and "it falls" not in words
    assert "(window lowers it)" in words and "(self-tuning lifts it, 10% of its time spent training)" in words
    assert long_claim(holding) == "Past their trained window, the drafters here hold their τ"
    no_help = measured(lane("dflash", "as shipped", 4.0, 1.8), lane("dflash", "window", 4.0, 1.9))
    assert long_claim(no_help) == "Past its trained window DFlash falls"
    assert "not recorded yet" in long_words(None)


def test_the_slide_words_are_short_and_carry_the_same_numbers():
    short = long_words(FALLING, short=True)
    assert "DFlash 4.00 → 1.80 (falls)" in short  # the means, the verbs still chosen from the intervals
    assert "window 4.00 (lifts it)" in short and "self-tuning 2.00 (no clear change)" in short
    assert len(short) < len(long_words(FALLING)) and short.count(". ") <= 2


def test_the_chart_draws_every_lane_and_marks_the_window():
    figure = long_figure(FALLING)
    assert [t.name for t in figure.data] == ["DFlash", "DFlash, window", "DFlash, self-tuning"]
    assert [t.line.dash for t in figure.data] == ["solid", "dash", "dot"]
    assert figure.data[0].y[-1] == 1.8 and figure.data[0].x[0] == 16
    assert window_end(FALLING["data"], 256) == 256 - 170  # the median prompt's tokens
    assert figure.layout.shapes[0].x0 == 86
    table = long_table(FALLING)
    assert table.count("\n| DFlash |") == 3 and "| window, 256 |" in table and "| 40% |" in table
    assert long_figure(None) is None


def test_the_lesson_knows_the_recordings_kind_size_and_point():
    assert lesson.measurement_kind(FALLING) == "long"
    assert lesson.size_words(FALLING) == "3 lanes × 16 prompts, each to the 512-position context"
    point = lesson.POINTS[LONG_POINT - 1]
    assert point.recording == "long" and point.chart == "why-long-plot" and lesson.RECORDINGS["long"] == "long.json"
    assert lesson.takeaway(point, {"long": FALLING}) == long_words(FALLING)
    assert "2605.09329" in point.text and "3.7" in point.text
    assert "4 prompts, 280 new tokens each" in lesson.live_size(point)


def test_a_prompt_by_prompt_difference_decides_where_the_intervals_overlap():
    shipped = lane("dflash", "as shipped", 3.0, 1.5)
    shipped["inside"]["tau"] = cell(3.0, 2.0)  # overlapping intervals: on their own they would say "holds"
    shipped["fall"] = {"mean": -1.5, "low": -2.0, "high": -1.0, "prompts": 3}
    window = lane("dflash", "window", 3.0, 1.7)
    window["gain_past"] = {"mean": 0.2, "low": -0.1, "high": 0.5, "prompts": 3}
    item = measured(shipped, window)
    words = long_words(item)
    assert "past it; prompt by prompt -1.50 (-2.00 to -1.00): it falls" in words
    assert "prompt by prompt +0.20 (-0.10 to +0.50) (window leaves it within the intervals)" in words
    assert long_claim(item) == "Past its trained window DFlash falls"
    window["gain_past"] = {"mean": 0.6, "low": 0.1, "high": 1.1, "prompts": 3}
    assert "(window lifts it)" in long_words(item)
    assert long_claim(item) == "Past its trained window DFlash falls; cut to that window it recovers"
