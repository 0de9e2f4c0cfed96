"""Lesson point 7's KV-injection panel: DFlash beside its drafter trained without the target's features, its words
chosen from the measurement's intervals, its chart drawn from the same numbers, and, with no such drafter shipped,
a plain line saying so and no figure."""

from __future__ import annotations

import copy

import gradio as gr
import pytest
import torch

from app import lesson
from app.draw.kv import kv_figure, kv_panel
from app.lesson import kv
from conftest import tiny_dflash, tiny_qwen3
from engine.loop import Engine
from engine.measure.lesson import kv_injection

PROMPTS = ["def parse(self, text):\n", "class Stack:\n    def push(self, item):\n", "import os\n\ndef walk(path):\n"]


@pytest.fixture(scope="module")
def measured(tokenizer):
    """A KV measurement as the recipe makes it, on a random target with a random drafter and a random ablation."""
    target = tiny_qwen3(len(tokenizer))
    engine = Engine(target, tokenizer, {"dflash": tiny_dflash(target)}, torch.device("cpu"), preset="random",
                    ablation_drafter_models={"dflash": tiny_dflash(target, seed=5, target_features=False)})
    return kv_injection(engine, PROMPTS, max_new_tokens=16, rounds=1)


def _with(doc: dict, lane: str, key: str, mean: float, low: float, high: float) -> dict:
    """The measurement with one lane's figure and interval set (to reach each of the word chooser's verdicts)."""
    doc = copy.deepcopy(doc)
    doc["data"]["lanes"][lane][key] = mean
    doc["data"]["lanes"][lane][f"{key}_interval"] = {"mean": mean, "low": low, "high": high}
    return doc


def test_the_words_name_each_figure_with_its_interval_and_a_verdict_the_intervals_allow(measured):
    lanes = measured["data"]["lanes"]
    words = kv.kv_words({"kv": measured})
    for lane in lanes.values():
        assert f"{lane['tau']:.2f} ({lane['tau_interval']['low']:.2f}–{lane['tau_interval']['high']:.2f})" in words
        assert f"{lane['speedup']:.2f}× ({lane['speedup_interval']['low']:.2f}–" in words
    assert "3 held-out prompts" in words
    apart = _with(_with(measured, "dflash_no_features", "tau", 1.2, 1.1, 1.3), "dflash", "tau", 2.5, 2.2, 2.8)
    assert "features lift τ" in kv.kv_words({"kv": apart})
    overlapping = _with(_with(measured, "dflash_no_features", "tau", 2.0, 1.5, 2.6), "dflash", "tau", 2.2, 1.8, 2.6)
    assert "leave τ where it was" in kv.kv_words({"kv": overlapping})
    slower = _with(_with(measured, "dflash_no_features", "speedup", 1.5, 1.4, 1.6), "dflash", "speedup", 1.1, 1.0, 1.2)
    assert "cost more than they save" in kv.kv_words({"kv": slower})


def test_the_dflash_point_carries_the_ablation_on_its_page_and_slide(measured):
    data = {**lesson.recorded(), "kv": measured}
    point = next(p for p in lesson.POINTS if p.number == kv.KV_POINT)
    assert kv.kv_words(data) in lesson.takeaway(point, data)
    assert kv.kv_words(data, short=True) in lesson.takeaway(point, data, slide=True)


@pytest.mark.parametrize("tau", [(1.2, 1.1, 1.3), (2.2, 1.5, 2.6), (3.5, 3.2, 3.8)])  # below, within, above
@pytest.mark.parametrize("speed", [(0.8, 0.7, 0.9), (1.1, 0.7, 1.3), (1.5, 1.4, 1.6)])
def test_the_slide_gives_both_figures_with_intervals_and_stays_short_whatever_the_verdict(measured, tau, speed,
                                                                                            monkeypatch):
    """Against DFlash at τ 2.20 (1.80–2.60) and 1.10× (1.00–1.20): each verdict the intervals allow, on a slide's
    takeaway of at most 300 characters, the speedups with their intervals too."""
    doc = _with(_with(measured, "dflash", "tau", 2.2, 1.8, 2.6), "dflash", "speedup", 1.1, 1.0, 1.2)
    doc = _with(_with(doc, "dflash_no_features", "tau", *tau), "dflash_no_features", "speedup", *speed)
    monkeypatch.setattr(kv, "recorded_kv", lambda: doc)  # read from the recording, as the app reads it
    point = next(p for p in lesson.POINTS if p.number == kv.KV_POINT)
    slide = lesson.takeaway(point, lesson.recorded(), slide=True)
    assert len(slide) <= 300, slide
    assert "Recorded over 3 held-out prompts" in slide  # a live slide's figures are the timeline's, not these
    assert f"{speed[0]:.2f}× ({speed[1]:.2f}–{speed[2]:.2f})" in slide and "1.10× (1.00–1.20)" in slide
    assert f"τ {tau[0]:.2f} ({tau[1]:.2f}–{tau[2]:.2f})" in slide and "2.20 (1.80–2.60)" in slide
    verdict = kv.SHORT_VERDICT[kv.interval_trend(doc["data"]["lanes"]["dflash_no_features"]["tau_interval"],
                                                 doc["data"]["lanes"]["dflash"]["tau_interval"]),
                               kv.interval_trend(doc["data"]["lanes"]["dflash_no_features"]["speedup_interval"],
                                                 doc["data"]["lanes"]["dflash"]["speedup_interval"])]
    assert f"they {verdict}." in slide


def test_without_a_shipped_ablation_the_point_says_it_is_still_training_and_draws_nothing(monkeypatch):
    monkeypatch.setattr(kv, "recorded_kv", lambda: None)
    monkeypatch.setattr(kv, "ablation_shipped", lambda name: False)
    words = kv.kv_words({})
    assert "still training and not shipped" in words and "dflash-drafter-nokv" in words
    assert "×" not in words and not any(c.isdigit() for c in words.replace("dflash", ""))  # no figure invented
    assert kv_figure(kv.kv_item({})) is None
    monkeypatch.setattr(kv, "ablation_shipped", lambda name: True)  # shipped, but not recorded: says that instead
    assert "not recorded yet" in kv.kv_words({})


def test_the_chart_draws_the_same_headlines_and_intervals(measured):
    figure = kv_figure(measured)
    lanes = measured["data"]["lanes"]
    alone, shipped = lanes["dflash_no_features"], lanes["dflash"]
    bars = [t for t in figure.data if t.type == "bar"]
    for bar, key in zip(bars, ("tau", "speedup")):
        assert list(bar.y) == [alone[key], shipped[key]]
        assert list(bar.error_y.array) == pytest.approx(
            [alone[f"{key}_interval"]["high"] - alone[key], shipped[f"{key}_interval"]["high"] - shipped[key]])
        assert list(bar.error_y.arrayminus) == pytest.approx(
            [alone[key] - alone[f"{key}_interval"]["low"], shipped[key] - shipped[f"{key}_interval"]["low"]])


def test_the_lesson_tabs_panel_reads_at_projector_size_in_either_mode(measured):
    from app.draw.layout import PROJECTOR_FONT

    figure = kv_panel(measured)
    sizes = [figure.layout.font.size, *(a.font.size for a in figure.layout.annotations),
             *(t.textfont.size for t in figure.data if t.type == "bar"),
             figure.layout.xaxis.tickfont.size, figure.layout.yaxis2.tickfont.size]
    assert min(sizes) >= PROJECTOR_FONT


def test_the_lesson_tab_shows_the_panel_on_point_7_only_with_a_measurement(measured):
    from app.tabs.lesson import layout

    def plots(recordings) -> list:
        with gr.Blocks() as demo:
            layout(recordings)
        return [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lesson-kv-plot"]

    assert len(plots({**lesson.recorded(), "kv": measured})) == 1
    assert plots({**lesson.recorded(), "kv": None}) == []
