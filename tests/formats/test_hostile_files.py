"""Saved comparisons from anyone: a real file mutated a thousand ways (types flipped, names and numbers out of
the engine's vocabulary and ranges, values nested or dropped) is either shown, by every view, or refused in
one line. Never a traceback."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

gr = pytest.importorskip("gradio")

from app.settings import default_settings  # noqa: E402
from app.comparison import Comparison, RecordError, read_comparison, settings_dict  # noqa: E402
from app.draw.render import lane_html  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402

from compare_support import comparison_of  # noqa: E402
from scripts.reliability import draw_everything, mutate  # noqa: E402  the catalogue's own mutator and views

PROMPT = "def parse(self, text):\n"
MUTATIONS = 500  # scripts/reliability.py runs more


@pytest.fixture(scope="module")
def saved(random_engine) -> dict:
    comparison = comparison_of(random_engine, ("baseline", "eagle3", "dspark"), PROMPT, max_new_tokens=8,
                               temperature=0.8, drafts_per_step=3, seed=1)
    return json.loads(comparison.to_json())


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
    (lambda d: d["lanes"]["eagle3"][1]["drafted"][0].update(verdict="maybe"), "verdict must be one of"),
    (lambda d: d["lanes"]["eagle3"][1]["spans"][0].update(work="dream"), "span work must be one of"),
    (lambda d: d["lanes"]["eagle3"][1]["drafted"][0].update(id=1e999), "id must be a whole number"),
    (lambda d: d["lanes"]["eagle3"][1].update(num_accepted=99), "num_accepted 99 ≤ num_verified"),
    (lambda d: d["lanes"]["eagle3"][1]["spans"][0].update(start_s=float("nan")), "finite number"),
    (lambda d: d["lanes"]["eagle3"][1]["spans"][0].update(end_s=-1.0), "finite number from 0"),
    (lambda d: d["lanes"]["eagle3"][1]["drafted"][0].update(draft_prob=1.5), "draft_prob must be a finite number"),
    (lambda d: d["lanes"]["eagle3"][2].update(index=7), "step 2 is numbered 7"),
    (lambda d: d["lanes"]["eagle3"][1]["committed"].insert(0, d["lanes"]["eagle3"][1]["committed"][0]), "committed"),
    (lambda d: d["lanes"]["eagle3"][1]["drafted"][-1].update(verdict="accepted"), "where the counts say"),
    (lambda d: d.update(drafters=["not", "a", "table"]), None),  # a descriptive field: ignored, not fatal
])
def test_each_impossible_value_is_named_in_one_line(saved, change, message):
    doc = json.loads(json.dumps(saved))
    change(doc)
    text = json.dumps(doc)
    if message is None:
        assert read_comparison(text).lanes["eagle3"].drafter == ""
        return
    with pytest.raises(RecordError, match=message) as err:
        read_comparison(text)
    assert "\n" not in str(err.value)


def test_a_file_nested_far_too_deep_is_refused_in_one_line():
    with pytest.raises(RecordError, match="nests its values too deeply"):
        read_comparison("[" * 200_000 + "]" * 200_000)


def test_a_scheduled_lane_without_confidences_draws_an_empty_survival_chart(saved):
    from app.draw.charts import survival_figure

    steps = read_comparison(json.dumps(saved)).steps["dspark"]
    stripped = [replace(s, drafted=tuple(replace(t, confidence=None) for t in s.drafted)) for s in steps]
    assert not survival_figure(stripped).data[0].x  # nothing to predict from, and no error


def _judged(doc, lane: str, verdict: str, test=lambda t: True) -> dict:
    """The first drafted token of `lane` with `verdict` (and `test`), to craft a file around."""
    return next(t for step in doc["lanes"][lane][1:] for t in step["drafted"] if t["verdict"] == verdict and test(t))


def _scale_spans(doc, lane: str, factor: float) -> None:
    for step in doc["lanes"][lane]:
        for span in step["spans"]:
            span.update(start_s=span["start_s"] * factor, end_s=span["end_s"] * factor,
                        cpu_s=None if span.get("cpu_s") is None else span["cpu_s"] * factor)


CRAFTED = [  # a file consistent in each field, not with itself
    (lambda d: _judged(d, "eagle3", "accepted").update(draw=_judged(d, "eagle3", "accepted")["accept_prob"]),
     r"drafted token \d is accepted with the draw"),
    (lambda d: _judged(d, "eagle3", "rejected", lambda t: t["accept_prob"] > 0).update(draw=0.0),
     r"drafted token \d is rejected with the draw 0"),
    (lambda d: _judged(d, "eagle3", "rejected", lambda t: t["accept_prob"] > 0.01).update(
        accept_prob=_judged(d, "eagle3", "rejected", lambda t: t["accept_prob"] > 0.01)["accept_prob"] / 2),
     r"has accept_prob .*, not min\(1, p_target / p_draft\)"),
    (lambda d: d["settings"].update(temperature=0), "at temperature 0 with accept_prob"),  # draws: not greedy
    (lambda d: d["lanes"]["eagle3"][-1]["spans"][-1].update(end_s=1e300), "more than a day: not a measurement"),
    (lambda d: _scale_spans(d, "dspark", 1e-300), "less than a microsecond: not a measurement"),
    (lambda d: _scale_spans(d, "baseline", 1e4), r"lane \w+ claims .*× the baseline's speed"),
]


@pytest.mark.parametrize("change, message", CRAFTED)
def test_a_file_whose_numbers_contradict_each_other_is_refused_in_one_line(saved, change, message):
    doc = json.loads(json.dumps(saved))
    read_comparison(json.dumps(doc))  # as saved: consistent
    change(doc)
    with pytest.raises(RecordError, match=message) as err:
        read_comparison(json.dumps(doc))
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_identical_to_the_baseline_is_computed_from_the_files_tokens_not_taken_from_it(random_engine):
    from app.draw.render import sameness_html

    lanes = {}
    for method in ("baseline", "eagle3"):
        result = random_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=8, drafts_per_step=3))
        lanes[method] = [result.prefill, *result.steps]
    settings = settings_dict(replace(default_settings(), prompt=PROMPT, max_new_tokens=8, temperature=0.0,
                                     methods=tuple(lanes)))
    doc = json.loads(Comparison.of_steps(settings, lanes, device="cpu", preset="random").to_json())
    assert "identical to the baseline ✓" in sameness_html(read_comparison(json.dumps(doc)), "eagle3")
    last = doc["lanes"]["eagle3"][-1]
    bonus = last["committed"][-1]
    bonus["id"] = last["bonus_id"] = (bonus["id"] + 1) % 4096  # the file's last token, changed alone
    shown = sameness_html(read_comparison(json.dumps(doc)), "eagle3")
    assert "differs from the baseline at token 8 ✗" in shown


@pytest.mark.parametrize("shape", ["a chain 3,000 deep", "40,000 siblings"])
def test_a_files_tree_of_any_shape_is_drawn_capped_and_says_what_it_left_out(random_engine, shape):
    import time

    from app.draw.tree import MAX_DRAWN_DEPTH, MAX_DRAWN_NODES, tree_svg

    run = comparison_of(random_engine, ("eagle3",), PROMPT, max_new_tokens=4, drafts_per_step=2)
    step = next(s for s in run.lanes["eagle3"].steps if s.drafted)
    token = replace(step.drafted[0], verdict="unverified")
    n = 3000 if shape.startswith("a chain") else 40_000
    parents = tuple(range(-1, n - 1)) if shape.startswith("a chain") else (-1,) * n
    huge = replace(step, drafted=(token,) * n, parents=parents, num_accepted=0)
    started = time.process_time()
    svg = tree_svg(huge)
    assert time.process_time() - started < 1.0 and len(svg) < 200_000
    drawn = MAX_DRAWN_DEPTH if shape.startswith("a chain") else MAX_DRAWN_NODES
    bonus = any(t.source == "bonus" for t in step.committed)
    assert svg.count('class="tree-node"') == 1 + drawn + bonus  # the anchor, the nodes drawn, the bonus
    assert f"{n - drawn:,} more nodes not drawn" in svg


def test_a_tree_sampled_at_temperature_above_zero_reads_back_and_its_first_children_are_still_checked(embedded_engine):
    """A tree node after its row's first child is judged against what its earlier siblings left of p and q, which the
    file does not hold: it reads back as the engine wrote it. Its row's first child is judged on p and q themselves,
    so a first child's accept_prob that is not min(1, p / q) is still refused."""
    comparison = comparison_of(embedded_engine, ("baseline", "eagle3_tree", "dflash_tree"), PROMPT, max_new_tokens=12,
                               temperature=1.0, seed=3, tree_nodes=16)  # the shipped drafters: trees need theirs
    doc = json.loads(comparison.to_json())
    later = [(m, s["index"]) for m in ("eagle3_tree", "dflash_tree") for s in doc["lanes"][m]
             if s.get("parents") and len(set(s["parents"])) < len(s["parents"])]
    assert later, "no tree step with siblings: the check of later siblings would be vacuous"
    read_comparison(json.dumps(doc))
    first = next(t for m in ("eagle3_tree", "dflash_tree") for s in doc["lanes"][m] if s.get("parents")
                 for i, t in enumerate(s["drafted"]) if s["parents"].index(s["parents"][i]) == i
                 and t["verdict"] in ("accepted", "rejected") and 0.02 < t["accept_prob"] < 1)
    first["accept_prob"] /= 2
    with pytest.raises(RecordError, match=r"not min\(1, p_target / p_draft\)"):
        read_comparison(json.dumps(doc))


def test_reading_a_file_shown_or_refused_leaves_the_cycle_collector_as_it_was(saved):
    import gc
    import threading

    good, bad = json.dumps(saved), json.dumps({**saved, "lanes": {"eagle3": [{"index": "x"}]}})
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            read_comparison(good)
            with pytest.raises(RecordError):
                read_comparison(bad)
            assert gc.isenabled() is enabled
        gc.enable()
        threads = [threading.Thread(target=read_comparison, args=(good,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert gc.isenabled()  # readers in several threads: on again once the last has read
        comparison = read_comparison(good)
        young = {id(o) for generation in (0, 1) for o in gc.get_objects(generation)}
        step = comparison.lanes["eagle3"].steps[1]
        assert gc.is_tracked(step) and not {id(step), id(step.drafted[0])} & young  # counted as old: not walked again
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("text", [
    '{"a": NaN}', '{"a": Infinity}', '{"a": %d}' % 10**30, '{"a": 1} x', '{"a": "\\ud800"}', '\ufeff{"a": 1}',
    '[' * 2000 + ']' * 2000, '{"a": 1, "a": 2}', '{"a": -0, "b": 1e-400}', '[-123456789012345678901]',
    '123456789012345678901', '[12345678901234567890123.5]', '{"a": 0.000123456789012345678, "b": 18446744073709551615}',
])
def test_a_file_reads_to_the_values_json_reads_or_fails_as_json_fails(text):
    from app.comparison import _parse

    for data in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16")):
        try:
            expected = json.loads(data)
        except (ValueError, RecursionError) as exc:
            with pytest.raises(type(exc)):
                _parse(data)
            continue
        got = _parse(data)
        assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)


def test_any_float_reads_to_the_value_json_reads():
    from app.comparison import _parse

    rng = random.Random(3)
    values = [rng.random() * 10 ** rng.randint(-320, 300) for _ in range(2000)] + [5e-324, 1.7976931348623157e308, -0.0]
    for data in (json.dumps(values), json.dumps(values).encode(), json.dumps(values).replace("e", "E")):
        assert _parse(data) == json.loads(data)


def test_a_saved_comparison_is_read_the_fast_way(saved, monkeypatch):
    from app.comparison import _parse

    expected = json.loads(json.dumps(saved))

    def slow(*args, **kwargs):
        raise AssertionError("read by json, not orjson")

    monkeypatch.setattr(json, "loads", slow)
    assert _parse(json.dumps(saved)) == expected and _parse(json.dumps(saved).encode()) == expected
