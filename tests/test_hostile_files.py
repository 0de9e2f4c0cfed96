"""Saved comparisons from anyone: a real file mutated a thousand ways (types flipped, names and numbers out of
the engine's vocabulary and ranges, values nested or dropped) is either shown, by every view, or refused in
one line. Never a traceback."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace

import pytest

gr = pytest.importorskip("gradio")

from app.links import default_settings  # noqa: E402
from app.record import Comparison, RecordError, read_comparison, settings_dict  # noqa: E402
from app.render import lane_html  # noqa: E402
from engine.types import GenerationConfig  # noqa: E402

from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from reliability import draw_everything, mutate  # noqa: E402  the catalogue's own mutator and views

PROMPT = "def parse(self, text):\n"
MUTATIONS = 500  # scripts/reliability.py runs more


@pytest.fixture(scope="module")
def saved(random_engine) -> dict:
    lanes = {}
    for method in ("baseline", "ar", "dspark"):
        result = random_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=8, temperature=0.8,
                                                                 draft_len=3, seed=1))
        lanes[method] = [result.prefill, *result.steps]
    settings = settings_dict(replace(default_settings(), prompt=PROMPT, max_new_tokens=8, temperature=0.8, seed=1,
                                     draft_len=3, methods=tuple(lanes)))
    return json.loads(Comparison.of_steps(settings, lanes, device="cpu", preset="random").to_json())


def test_a_mutated_file_is_shown_by_every_view_or_refused_in_one_line(saved):
    rng = random.Random(7)
    shown = refused = 0
    for _ in range(MUTATIONS):
        text = json.dumps(mutate(saved, rng))
        try:
            comparison = read_comparison(text)
        except RecordError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        shown += 1
        if shown <= 12:  # the charts are slow to draw; the lanes' HTML is drawn for every file shown
            draw_everything(comparison)
        for method in comparison.lanes:
            lane_html(comparison, method)
    assert refused > MUTATIONS / 2 and shown > 12  # both roads taken


@pytest.mark.parametrize("change, message", [
    (lambda d: d["lanes"]["ar"][1]["drafted"][0].update(verdict="maybe"), "verdict must be one of"),
    (lambda d: d["lanes"]["ar"][1]["spans"][0].update(work="dream"), "span work must be one of"),
    (lambda d: d["lanes"]["ar"][1]["drafted"][0].update(id=1e999), "id must be a whole number"),
    (lambda d: d["lanes"]["ar"][1].update(num_accepted=99), "num_accepted 99 ≤ num_verified"),
    (lambda d: d["lanes"]["ar"][1]["spans"][0].update(start_s=float("nan")), "finite number"),
    (lambda d: d["lanes"]["ar"][1]["spans"][0].update(end_s=-1.0), "finite number from 0"),
    (lambda d: d["lanes"]["ar"][1]["drafted"][0].update(draft_prob=1.5), "draft_prob must be a finite number"),
    (lambda d: d["lanes"]["ar"][2].update(index=7), "step 2 is numbered 7"),
    (lambda d: d["lanes"]["ar"][1]["committed"].insert(0, d["lanes"]["ar"][1]["committed"][0]), "committed"),
    (lambda d: d["lanes"]["ar"][1]["drafted"][-1].update(verdict="accepted"), "where the counts say"),
    (lambda d: d.update(drafters=["not", "a", "table"]), None),  # a descriptive field: ignored, not fatal
])
def test_each_impossible_value_is_named_in_one_line(saved, change, message):
    doc = json.loads(json.dumps(saved))
    change(doc)
    text = json.dumps(doc)
    if message is None:
        assert read_comparison(text).lanes["ar"].drafter == ""
        return
    with pytest.raises(RecordError, match=message) as err:
        read_comparison(text)
    assert "\n" not in str(err.value)


def test_a_file_nested_far_too_deep_is_refused_in_one_line():
    with pytest.raises(RecordError, match="nests its values too deeply"):
        read_comparison("[" * 200_000 + "]" * 200_000)


def test_a_scheduled_lane_without_confidences_draws_an_empty_survival_chart(saved):
    from app.charts import survival_figure

    steps = read_comparison(json.dumps(saved)).steps["dspark"]
    stripped = [replace(s, drafted=tuple(replace(t, confidence=None) for t in s.drafted)) for s in steps]
    assert not survival_figure(stripped).data[0].x  # nothing to predict from, and no error
