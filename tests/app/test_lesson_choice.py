"""The lesson's one prompt is chosen by a stated rule: the held-out prompt whose lanes' speedups sit nearest each lane's
median, once that choice is recorded, else the first example prompt; the slides and the words name the rule that
chose the prompt a comparison was recorded on."""

from __future__ import annotations

import json

import pytest

from app.examples import example_prompts
from app.lesson import choice

SHORT_PROMPTS = ["def f(x):", "import os", "class A:"]  # the tiny random model's context holds 96 tokens


def test_the_prompt_nearest_every_lanes_median_is_chosen():
    rows = [{"a": 1.0, "b": 3.0}, {"a": 2.0, "b": 2.1}, {"a": 3.0, "b": 1.0}, {"a": 2.2, "b": 1.0}]
    assert choice.choose(rows) == 1  # medians a 2.2, b 2.1: the second prompt is nearest both
    assert choice.choose([{"a": 3.0}, {"a": 1.0}, {"a": 2.0}]) == 2


def test_the_choice_measures_every_prompt_and_keeps_the_one_it_chooses(random_engine):
    from dataclasses import replace

    from app import lesson

    settings = replace(lesson.comparison_settings(random_engine.methods(), 0.0), max_new_tokens=4)
    doc = choice.measure_prompt_choice(random_engine, settings, SHORT_PROMPTS, rounds=1)
    data = doc["data"]
    assert data["prompts"] == len(data["speedups"]) == 3 and all(len(row) >= 2 for row in data["speedups"])
    assert data["chosen"] == choice.choose(data["speedups"]) and data["prompt"] == SHORT_PROMPTS[data["chosen"]]


def test_the_words_name_the_rule_that_chose_a_comparisons_prompt(tmp_path, monkeypatch):
    monkeypatch.setattr(choice, "CHOICE_FILE", tmp_path / "prompt.json")
    first = example_prompts()[0]
    assert choice.chosen_prompt() == first and "first example prompt" in choice.rule_words(first)
    doc = {"format": choice.FORMAT, "recorded_at": "", "device": "cpu",
           "data": {"prompts": 12, "speedups": [], "chosen": 6, "prompt": "import os", "max_new_tokens": 64}}
    (tmp_path / "prompt.json").write_text(json.dumps(doc), encoding="utf-8")
    assert choice.chosen_prompt() == "import os"
    assert choice.rule_words("import os") == ("held-out prompt 7 of the first 12, the one whose speedups sit nearest "
                                              "every lane's median over them")
    assert "median" in choice.rule_words("import os", short=True)
    assert "first example prompt" in choice.rule_words(first)  # a comparison recorded before the choice: its own rule
    (tmp_path / "prompt.json").write_text("{not json", encoding="utf-8")
    assert choice.chosen_prompt() == first


@pytest.mark.parametrize("recorded", [False, True])
def test_slide_7_titles_its_timeline_with_the_rule(recorded, tmp_path, monkeypatch):
    pytest.importorskip("gradio")
    from app import lesson
    from app.tabs.slides import evidence_figure

    monkeypatch.setattr(choice, "CHOICE_FILE", tmp_path / "prompt.json")
    data = lesson.recorded()
    if recorded:
        prompt = data["greedy"].settings["prompt"]
        doc = {"format": choice.FORMAT, "data": {"prompts": 12, "speedups": [], "chosen": 0, "prompt": prompt}}
        (tmp_path / "prompt.json").write_text(json.dumps(doc), encoding="utf-8")
    figure = evidence_figure(lesson.POINTS[6], data)
    words = f"{figure.layout.title.text} {figure.layout.title.subtitle.text}"
    assert ("median held-out prompt" in words) == recorded and ("first example prompt" in words) != recorded, words
    assert ("held-out prompt 1 of the first 12" in lesson.takeaway(lesson.POINTS[6], data)) == recorded
