"""A saved file cannot make the page say what its own tokens and clocks do not: "identical to the baseline ✓" is
never drawn over texts the ids do not decode to, a rate no run could reach is refused in one line, and a tree far
deeper than the engine drafts is refused before anything is drawn of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gradio")

from app.comparison import MAX_TOKENS_PER_S, RecordError, read_comparison  # noqa: E402
from app.draw.render import sameness_html  # noqa: E402
from app.texts import first_edited  # noqa: E402
from engine.contract.types import MAX_TREE_NODES  # noqa: E402

GREEDY = Path(__file__).resolve().parents[2] / "assets" / "lessons" / "greedy.json"


def saved() -> dict:
    return json.loads(GREEDY.read_text(encoding="utf-8"))


def test_the_shipped_recordings_texts_are_what_their_ids_decode_to():
    comparison = read_comparison(GREEDY.read_bytes())
    assert all(first_edited(comparison, method) is None for method in comparison.lanes)
    assert "identical to the baseline ✓" in sameness_html(comparison, "eagle3")


@pytest.mark.parametrize("lane, where", [("eagle3", "committed"), ("baseline", "committed"), ("eagle3", "drafted")])
def test_a_file_with_edited_texts_says_edited_not_identical(lane, where):
    doc = saved()
    step = next(s for s in doc["lanes"][lane][1:] if s[where])
    step[where][0]["text"] = " hacked"
    comparison = read_comparison(json.dumps(doc))
    assert comparison.differs_from_baseline("eagle3") == 0  # the ids still agree ...
    badge = sameness_html(comparison, "eagle3")
    assert "texts edited" in badge and "identical" not in badge  # ... but the badge is not drawn over them
    if lane == "baseline":
        assert "the baseline's output token" in badge


def test_a_file_of_a_preset_whose_tokenizer_is_not_shipped_is_not_called_edited():
    doc = saved()
    doc["preset"] = "qwen3-4b"
    doc["lanes"]["eagle3"][1]["committed"][0]["text"] = " anything"
    assert first_edited(read_comparison(json.dumps(doc)), "eagle3") is None


def test_an_impossible_rate_is_refused_in_one_line():
    doc = saved()
    doc["run_rates"] = {m: [[None, 1_099_539.0]] for m in doc["lanes"]}
    with pytest.raises(RecordError) as refused:
        read_comparison(json.dumps(doc))
    text = str(refused.value)
    assert "1,099,539 tokens/s" in text and f"{MAX_TOKENS_PER_S:,.0f}" in text and "\n" not in text
    doc["run_rates"] = {m: [[None, 90.0]] for m in doc["lanes"]}
    read_comparison(json.dumps(doc))  # a rate a run can reach is shown


def test_a_lane_timed_too_fast_to_be_real_is_refused():
    doc = saved()
    for step in doc["lanes"]["eagle3"]:
        for span in step["spans"]:
            span["start_s"], span["end_s"] = span["start_s"] * 1e-5, span["end_s"] * 1e-5
    with pytest.raises(RecordError, match="tokens/s|less than a microsecond"):
        read_comparison(json.dumps(doc))


def tree_file(nodes: int) -> str:
    doc = saved()
    step = next(s for s in doc["lanes"]["eagle3"][1:] if s["drafted"])
    token = {**step["drafted"][0], "verdict": "unverified", "draft_top": [], "target_top": []}
    bonus = next(t for t in step["committed"] if t["source"] == "bonus")
    step.update(drafted=[dict(token) for _ in range(nodes)], parents=list(range(-1, nodes - 1)), num_accepted=0,
                num_verified=nodes, committed=[bonus])
    return json.dumps(doc)


def test_a_tree_deeper_than_the_engine_drafts_is_refused_before_it_is_drawn():
    with pytest.raises(RecordError) as refused:
        read_comparison(tree_file(12_000))  # 2.7 MB, inside the size cap; drawn, its depth costs its square
    assert f"a tree of 12,000 drafted tokens, more than {MAX_TREE_NODES}" in str(refused.value)
    read_comparison(tree_file(MAX_TREE_NODES))  # a tree the engine can draft opens
