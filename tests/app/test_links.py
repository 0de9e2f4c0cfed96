"""Share links (app/links.py), no server: a link reads back as the same settings, a tampered one gives one message
and the default, a link names what this server cannot do, and the legacy names (the method id ar, the CLI's
draft_len and block_len, a file's serial_k and drafts_per_block) still open."""

from __future__ import annotations

import pytest

pytest.importorskip("gradio")

from app.settings import MAX_PROMPT_CHARS, Settings, default_settings  # noqa: E402
from app.links import build_query, parse_query  # noqa: E402
from compare_support import ALL_METHODS, DEFAULTS, PROMPT, query_items  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402


@pytest.mark.parametrize("settings", [
    default_settings(ALL_METHODS),
    Settings(prompt="x = 'é ☃ 🎉' + \"a&b=c%20d+e#f?\"\n\tpass\n", methods=("baseline", "classic", "dspark"),
             temperature=0.35, seed=2**63 - 1, max_new_tokens=512, drafts_per_step_serial=1, drafts_per_step_one_pass=16,
             verify_rule="match", scheduler="static", confidence_threshold=0.05, overlap="off"),
    Settings(prompt="  leading and trailing spaces  ", methods=("dflash",), temperature=5.0, seed=2**53 + 1,
             max_new_tokens=1, drafts_per_step_serial=16, drafts_per_step_one_pass=1, scheduler="none",
             confidence_threshold=1.0, overlap="on"),
])
def test_a_link_reads_back_as_the_same_settings(settings):
    query = build_query(settings, preset="tiny")
    parsed, messages = parse_query(query_items(query), available=ALL_METHODS, preset="tiny")
    assert parsed == settings and messages == []


TAMPERED = [  # (query, the control that falls back to its default)
    ("temperature=abc", "temperature"), ("temperature=nan", "temperature"), ("temperature=inf", "temperature"),
    ("temperature=-1", "temperature"), ("temperature=5.01", "temperature"), ("temperature=", "temperature"),
    ("seed=-1", "seed"), ("seed=1.5", "seed"), ("seed=nan", "seed"), ("seed=-inf", "seed"),
    (f"seed={2**63}", "seed"), ("seed=abc", "seed"), ("seed=" + "9" * 5000, "seed"), ("seed=0x10", "seed"),
    ("max_new_tokens=0", "max_new_tokens"), ("max_new_tokens=513", "max_new_tokens"),
    ("max_new_tokens=1e9", "max_new_tokens"), ("draft_len=0", "drafts_per_step_serial"),
    ("draft_len=17", "drafts_per_step_serial"), ("block_len=x", "drafts_per_step_one_pass"), ("verify_rule=sometimes", "verify_rule"), ("verify_rule=REJECTION", "verify_rule"),
    ("scheduler=often", "scheduler"), ("confidence_threshold=2", "confidence_threshold"),
    ("confidence_threshold=NaN", "confidence_threshold"), ("overlap=maybe", "overlap"),
    ("methods=bogus", "methods"), ("methods=eagle3,ar", "methods"), ("methods=", "methods"), ("methods=,,", "methods"),
    ("methods=baseline,../../etc", "methods"), ("prompt=" + "x" * (MAX_PROMPT_CHARS + 1), "prompt"),
    ("prompt=", "prompt"), ("prompt=%20%0A", "prompt"), ("seed=1&seed=2", "seed"),
    ("prompt=a&prompt=b", "prompt"),
]


def test_the_method_id_ar_still_opens_as_eagle3_in_links_and_saved_files(random_engine):
    """EAGLE-3's lane was once called ar: links and comparison files that say so still open, as eagle3."""
    import json
    from dataclasses import asdict

    from app.comparison import Comparison, read_comparison

    parsed, messages = parse_query(query_items("methods=baseline,ar"), available=ALL_METHODS)
    assert (parsed.methods, messages) == (("baseline", "eagle3"), [])
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=6))
    saved = json.loads(Comparison.of_steps({**asdict(DEFAULTS), "methods": ["eagle3"]},
                                           {"eagle3": [result.prefill, *result.steps]}).to_json())
    old = {**saved, "settings": {**saved["settings"], "methods": ["ar"]},
           **{key: {"ar" if m == "eagle3" else m: v for m, v in saved[key].items()}
              for key in ("lanes", "drafters", "timing_runs", "run_rates") if isinstance(saved.get(key), dict)}}
    assert "ar" in old["lanes"] and "eagle3" not in old["lanes"]
    opened = read_comparison(json.dumps(old))
    assert list(opened.lanes) == ["eagle3"] and opened.settings["methods"] == ["eagle3"]
    assert opened.lanes["eagle3"].summary == read_comparison(json.dumps(saved)).lanes["eagle3"].summary


def test_links_name_the_draft_lengths_as_the_cli_does():
    """The controls are drafts_per_step per way of drafting; links keep the CLI's draft_len and block_len, both
    ways, and a link made before (one of today's links) opens the same comparison."""
    parsed, messages = parse_query(query_items("draft_len=5&block_len=3"), available=ALL_METHODS)
    assert (parsed.drafts_per_step_serial, parsed.drafts_per_step_one_pass, messages) == (5, 3, [])
    assert (parsed.config("eagle3").drafts_per_step, parsed.config("dflash").drafts_per_step) == (5, 3)
    query = build_query(parsed)
    assert "draft_len=5" in query and "block_len=3" in query and "drafts_per_step" not in query
    for name in ("serial_k", "drafts_per_step_serial"):
        _, messages = parse_query(query_items(f"{name}=5"), available=ALL_METHODS)
        assert messages == [f"unknown link parameter '{name}' ignored"]  # one name per link parameter


def test_a_file_saved_with_the_earlier_draft_length_names_opens_the_same(random_engine):
    """A comparison file says drafts_per_step_serial and drafts_per_step_one_pass; one saved when they were serial_k
    and drafts_per_block (the shipped recordings among them) opens with the same settings."""
    import json
    from dataclasses import asdict, replace

    from app import lesson
    from app.comparison import Comparison, read_comparison

    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=6, drafts_per_step=3))
    settings = {**asdict(replace(DEFAULTS, drafts_per_step_serial=2, drafts_per_step_one_pass=3)),
                "methods": ["dflash"]}
    saved = json.loads(Comparison.of_steps(settings, {"dflash": [result.prefill, *result.steps]}).to_json())
    assert {"drafts_per_step_serial", "drafts_per_step_one_pass"} <= set(saved["settings"])
    assert not {"serial_k", "drafts_per_block"} & set(saved["settings"])
    earlier = dict(saved["settings"])
    earlier["serial_k"], earlier["drafts_per_block"] = earlier.pop("drafts_per_step_serial"), \
        earlier.pop("drafts_per_step_one_pass")
    opened = read_comparison(json.dumps({**saved, "settings": earlier}))
    assert opened.settings == read_comparison(json.dumps(saved)).settings == saved["settings"]
    assert (opened.settings["drafts_per_step_serial"], opened.settings["drafts_per_step_one_pass"]) == (2, 3)
    recorded = json.loads((lesson.LESSONS_DIR / "greedy.json").read_text())["settings"]  # a shipped recording
    greedy = lesson.recorded()["greedy"].settings
    assert (greedy["drafts_per_step_serial"], greedy["drafts_per_step_one_pass"]) == \
        (recorded.get("drafts_per_step_serial", recorded.get("serial_k")),
         recorded.get("drafts_per_step_one_pass", recorded.get("drafts_per_block"))) == (4, 7)


@pytest.mark.parametrize("query, name", TAMPERED, ids=[q[:40] for q, _ in TAMPERED])
def test_a_tampered_link_gives_one_message_and_the_default(query, name):
    parsed, messages = parse_query(query_items(f"temperature=0.7&{query}" if name != "temperature" else query),
                                   available=ALL_METHODS, preset="tiny")
    assert len(messages) == 1, messages
    assert len(messages[0]) < 200  # one readable line, never the value itself at length
    assert getattr(parsed, name) == getattr(DEFAULTS, name)
    if name != "temperature":
        assert parsed.temperature == 0.7  # the rest of the link is still used


def test_a_link_names_what_this_server_cannot_do():
    parsed, messages = parse_query(query_items("methods=baseline,classic"), available=["baseline", "eagle3"])
    assert messages == ["this server has no classic lane; it runs baseline, eagle3; using the default"]
    assert parsed.methods == ("baseline", "eagle3")
    parsed, messages = parse_query(query_items("foo=1&__theme=dark&view=api&seed=5"), available=ALL_METHODS)
    assert messages == ["unknown link parameter 'foo' ignored"] and parsed.seed == 5  # Gradio's own are ignored
    parsed, messages = parse_query(query_items("preset=qwen3-4b&seed=5"), available=ALL_METHODS, preset="tiny")
    assert len(messages) == 1 and "this server runs preset tiny" in messages[0] and parsed.seed == 5
    _, messages = parse_query(query_items("&".join(f"p{i}=1" for i in range(500))), available=ALL_METHODS)
    assert len(messages) <= 12 and messages[-1].startswith("and ")


def test_a_link_carries_the_tree_budget_and_an_old_one_gets_the_default():
    settings, messages = parse_query({"methods": "baseline,dflash_tree", "tree_nodes": "40"}, available=ALL_METHODS)
    assert settings.tree_nodes == 40 and settings.methods == ("baseline", "dflash_tree") and not messages
    assert "tree_nodes=40" in build_query(settings, "tiny")
    old, messages = parse_query({"methods": "baseline,dflash"}, available=ALL_METHODS)
    assert old.tree_nodes == Settings.tree_nodes and not messages
    bad, messages = parse_query({"tree_nodes": "65"}, available=ALL_METHODS)
    assert bad.tree_nodes == Settings.tree_nodes
    assert messages == ["tree node budget must be a whole number from 1 to 64, got '65'; using the default"]
