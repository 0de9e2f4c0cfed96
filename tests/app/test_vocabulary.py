"""One vocabulary: one acceptance rate in the chips, the lesson, the charts and the glossary; one block convention
("N drafts per block") in every lane header, recorded or live; a live measurement never called recorded."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.glossary import GLOSSARY, meaning  # noqa: E402
from app.comparison import drafter_words  # noqa: E402
from app.draw.render import lane_html  # noqa: E402


@pytest.mark.parametrize("label, words", [
    ("DFlash, 3 layers, block 8 = anchor + 7 drafts", "DFlash, 3 layers, 7 drafts per block"),
    ("DSpark, 3 layers, block 7, vanilla Markov head", "DSpark, 3 layers, 7 drafts per block, vanilla Markov head"),
    ("DFlash, 5 layers, 15 drafts per block", "DFlash, 5 layers, 15 drafts per block"),
    ("EAGLE-3, 1 layer", "EAGLE-3, 1 layer"),
])
def test_a_drafters_block_reads_in_one_convention(label, words):
    assert drafter_words(label) == words


def test_every_recorded_lane_header_counts_drafts_per_block():
    data = lesson.recorded()
    for key in ("greedy", "sampled"):
        for method, result in data[key].lanes.items():
            head = lane_html(data[key], method)
            assert "anchor +" not in head and not re.search(r"\bblock \d", head), head[:300]
            if method in ("dflash", "dspark"):
                assert re.search(r"\b(7|15) drafts per block\b", result.drafter), result.drafter  # blocks 8 and 16
    for sweep in data["sweeps"]["data"]["sweeps"].values():
        for row in sweep["others"].values():
            assert "anchor +" not in row["drafter"] and not re.search(r"\bblock \d", row["drafter"])


def test_the_chip_names_the_one_acceptance_rate_the_glossary_defines():
    sampled = lesson.recorded()["sampled"]
    head = lane_html(sampled, "eagle3")
    import html

    assert f'title="{html.escape(meaning("acceptance-rate"))}">acc. rate' in head
    assert any(t.key == "acceptance-rate" for t in GLOSSARY) and "judged" in meaning("acceptance-rate")
    assert "survival" in meaning("conditional-acceptance") and "can only" in meaning("conditional-acceptance")


def test_a_live_measurement_says_measured_live_never_recorded():
    from app.run.sessions import SessionStore
    from app.tabs.why import WhyHandlers, check_table

    doc = lesson.recorded()["lossless"]

    def measure(engine, stop=None):
        return lesson.measurement(doc["data"], "cpu (test)")

    live = WhyHandlers(None, SessionStore())._measured(measure, "a visitor")
    words = check_table(live)
    assert words.startswith("Measured live ") and "ecorded" not in words.split(":")[0]
    assert check_table(doc).startswith("Recorded ")


def test_the_draft_length_has_one_name_in_the_app():
    """Drafts per step is one name: the settings hold it per way of drafting (drafts_per_step_serial,
    drafts_per_step_one_pass), each method's lane reads the control of its own way, and the earlier names live only
    where links and older files are parsed (app/links.py)."""
    from pathlib import Path

    from app.settings import PARSERS, RUN_INPUTS, Settings, drafts_per_step_control
    from engine.contract.methods import METHOD_REGISTRY

    lengths = {name for name in PARSERS if "draft" in name or name in ("serial_k", "drafts_per_block")}
    assert lengths == {"drafts_per_step_serial", "drafts_per_step_one_pass"} and lengths <= set(RUN_INPUTS)
    settings = Settings(drafts_per_step_serial=2, drafts_per_step_one_pass=5)
    for method, entry in METHOD_REGISTRY.items():
        assert drafts_per_step_control(method) in lengths
        if entry.drafts:
            assert settings.config(method).drafts_per_step == (5 if entry.one_pass else 2), method
    app = Path(__file__).resolve().parents[2] / "app"
    earlier = re.compile(r"\b(serial_k|drafts_per_block|serial-k|drafts-per-block)\b")
    named = [f"{path.relative_to(app)}:{n}" for path in sorted(app.rglob("*.py")) if path.name != "links.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if earlier.search(line)]
    assert named == [], named
