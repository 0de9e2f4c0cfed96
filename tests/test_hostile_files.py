"""Saved comparisons from anyone: a real file mutated a thousand ways (types flipped, names and numbers out of
the engine's vocabulary and ranges, values nested or dropped) is either shown, by every view, or refused in
one line. Never a traceback."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

gr = pytest.importorskip("gradio")

from app.charts import comparison_figures  # noqa: E402
from app.links import default_settings  # noqa: E402
from app.record import Comparison, RecordError, read_comparison, settings_dict  # noqa: E402
from app.render import lane_html  # noqa: E402
from app.tabs.step import last_step, step_view  # noqa: E402
from engine.types import GenerationConfig  # noqa: E402

PROMPT = "def parse(self, text):\n"
ODD_VALUES = (None, True, False, -1, 0, 1, 2, 0.5, -0.5, 1.5, 99, 2**40, 1e308, -1e308, float("nan"), float("inf"),
              "", "maybe", "<b>x</b>", "cut", "eos", [], {}, [1, 2], {"id": 1})
MUTATIONS = 1000  # scripts/reliability.py runs more


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


def places(doc, path=()):
    """Every (path, value) in a JSON document, containers included."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from places(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from places(value, (*path, i))


def mutate(doc, rng: random.Random):
    """A copy of `doc` with one place changed: given an odd value, dropped, nested in a list, or repeated."""
    doc = json.loads(json.dumps(doc))
    path, value = rng.choice([p for p in places(doc) if p[0]])
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key, how = path[-1], rng.randrange(4)
    if how == 0:
        parent[key] = rng.choice(ODD_VALUES)
    elif how == 1 and isinstance(parent, dict):
        del parent[key]
    elif how == 2:
        parent[key] = [value]
    elif isinstance(parent, list):
        parent.insert(key, value)
    else:
        parent[key] = rng.choice(ODD_VALUES)
    return doc


def draw_everything(comparison: Comparison) -> None:
    """Every view of a comparison: each lane, every chart, the first and the last step."""
    for method in comparison.lanes:
        lane_html(comparison, method)
    comparison_figures(comparison)
    for i in (0, last_step(comparison)):
        step_view(comparison, i)


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
        if shown <= 12:  # drawing is slow; the accepted changes are of few kinds, all met well within these
            draw_everything(comparison)
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
