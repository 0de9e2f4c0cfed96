"""What the page says before anything runs, on a server of one's own block-16 drafter: the block slider starts at
the block the loaded drafters were trained on (read from the checkpoint's config by the engine), so it drafts 15 a
step by default, not the settings' 7; and the download button states how long an offered download lives."""

from __future__ import annotations

import pytest
import torch

from app.blocks import block_default, trained_block
from app.hosting import disk

from conftest import tiny_dflash


def test_the_default_block_is_the_longest_trained_block_of_a_loaded_one_pass_drafter():
    caps = {"baseline": None, "eagle3": None, "dflash": 15, "dspark": 7}
    assert trained_block(list(caps), caps) == 15 and block_default(list(caps), caps, 7) == 15
    assert block_default(["baseline", "eagle3", "dspark"], caps, 7) == 7  # only the lanes this page runs count
    assert block_default(["baseline", "eagle3"], caps, 7) == 7 and trained_block(["eagle3"], {"eagle3": 4}) is None
    assert block_default(["dflash"], {"dflash": None}, 5) == 5  # no trained block: the settings' default


@pytest.fixture(scope="module")
def page(random_engine):
    from app.main import build_app
    from engine.loop import Engine

    target = random_engine.target
    engine = Engine(target, random_engine.tokenizer, {"dflash": tiny_dflash(target, block_size=16)},
                    torch.device("cpu"), preset="random")
    assert engine.max_drafts("dflash") == 15
    return build_app(engine)


def _component(page, elem_id: str):
    return next(b for b in page.blocks.values() if getattr(b, "elem_id", None) == elem_id)


def test_a_block_16_drafters_page_starts_its_slider_at_15(page):
    slider = _component(page, "drafts-per-step-one-pass")
    assert slider.value == slider.maximum == 15 and "up to 15" in slider.label


def test_the_download_button_states_an_offered_downloads_life(page):
    assert _component(page, "download").label == disk.download_label() == "Download this comparison (link kept 1 h)"


def _sweep(rows: dict[str, dict[str, dict[int, float]]], labels: dict[str, dict[str, str]]) -> dict:
    """A block sweep's data: {temperature: {lane: {block: speedup}}}, each lane's drafter label at that temperature."""
    return {"temperatures": {t: {m: {"drafter": labels[t][m], "rows": {str(k): {"speedup": v} for k, v in ks.items()}}
                                 for m, ks in lanes.items()} for t, lanes in rows.items()}}


LABELS = {"0.0": {"dflash": "DFlash, 3 layers, 7 drafts per block", "dspark": "DSpark, 3 layers, 15 drafts per block"},
          "1.0": {"dflash": "DFlash, 3 layers, 7 drafts per block, trained for T > 0",
                  "dspark": "DSpark, 3 layers, 15 drafts per block, calibrated for T > 0"}}
CAPS = {"baseline": None, "eagle3": None, "dflash": 7, "dspark": 15}
SWEEP = _sweep({"0.0": {"dflash": {1: 1.1, 4: 1.6, 7: 1.9}, "dspark": {1: 1.1, 4: 1.7, 8: 2.0, 15: 2.2}},
                "1.0": {"dflash": {1: 1.0, 4: 1.35, 7: 1.3}, "dspark": {1: 1.0, 4: 1.45, 8: 1.3, 15: 1.1}}}, LABELS)


def test_the_recorded_fastest_block_for_the_loaded_lanes_at_each_temperature():
    from app.blocks import block_default, recorded_best

    methods = list(CAPS)
    # at 0: 15 (DFlash drafts its own 7 there: 1.9 beside DSpark's 2.2) beats 8 (1.9, 2.0) and 4
    assert recorded_best(methods, CAPS, SWEEP, 0.0, LABELS["0.0"]) == 15
    # above 0 (any sampling temperature reads the recording at 1): 4 (1.35, 1.45) beats 8 (1.3, 1.3) and 15
    assert recorded_best(methods, CAPS, SWEEP, 0.7, LABELS["1.0"]) == 4
    assert recorded_best(["baseline", "dspark"], CAPS, SWEEP, 1.0, LABELS["1.0"]) == 4
    assert block_default(methods, CAPS, 7, 1.0, SWEEP, LABELS["1.0"]) == 4


def test_a_sweep_of_other_drafters_or_none_leaves_the_trained_block():
    from app.blocks import block_default, recorded_best

    methods = list(CAPS)
    other = {**LABELS["1.0"], "dspark": "DSpark, 5 layers, 15 drafts per block, calibrated for T > 0"}
    assert recorded_best(methods, CAPS, SWEEP, 1.0, other) is None  # another checkpoint: its sweep says nothing
    assert recorded_best(methods, CAPS, SWEEP, 1.0, LABELS["0.0"]) is None  # labels of the greedy weights
    assert recorded_best(methods, CAPS, None, 1.0, LABELS["1.0"]) is None
    no_dspark = _sweep({"1.0": {"dflash": {1: 1.0, 7: 1.3}}}, LABELS)
    assert recorded_best(methods, CAPS, no_dspark, 1.0, LABELS["1.0"]) is None  # a loaded lane not recorded
    assert block_default(methods, CAPS, 7, 1.0, None, LABELS["1.0"]) == 15
    assert block_default(["baseline", "eagle3"], CAPS, 7, 1.0, SWEEP, LABELS["1.0"]) == 7


def test_the_slider_follows_the_temperature_only_from_one_start_to_the_other():
    from app.blocks import follow_temperature

    starts = {"0.0": 15, "1.0": 4}
    assert follow_temperature(1.0, 15, starts) == 4 and follow_temperature(0.0, 4, starts) == 15
    assert follow_temperature(0.5, 4, starts) is None  # already at sampling's start
    assert follow_temperature(1.0, 9, starts) is None and follow_temperature(0.0, 9, starts) is None  # set by hand
    assert follow_temperature(1.0, 15, {"0.0": 15, "1.0": 15}) is None


def test_the_sweep_is_the_lessons_blocks_recording_and_one_without_temperatures_reads_as_none():
    import json

    from app import lesson
    from app.blocks import sweep_data
    from conftest import ASSETS

    recorded = lesson.recorded().get("blocks")
    assert recorded is not None  # the repository holds the recording
    on_disk = json.loads((ASSETS / "lessons" / "blocks.json").read_text(encoding="utf-8"))["data"]
    assert sweep_data(recorded)["temperatures"].keys() == on_disk["temperatures"].keys() == {"0.0", "1.0"}
    assert sweep_data(None) is None and sweep_data({"data": {"rows": []}}) is None and sweep_data({}) is None
    assert sweep_data({"data": SWEEP}) == SWEEP


def test_the_block_note_says_where_the_slider_starts_only_when_recorded():
    from app.tabs.compare import block_info

    assert block_info({"0.0": 15, "1.0": 15}, {"0.0": False, "1.0": False}) is None
    note = block_info({"0.0": 15, "1.0": 4}, {"0.0": True, "1.0": True})
    assert "Starts at 15 at temperature 0 and 4 above it" in note and "until you set it" in note
    assert "Starts at 7," in block_info({"0.0": 7, "1.0": 7}, {"0.0": True, "1.0": True})


def test_a_page_with_a_recorded_sweep_starts_at_its_fastest_block_and_follows_the_temperature(random_engine,
                                                                                           monkeypatch):
    from app.tabs import compare_views
    from app.run.sessions import SessionStore

    engine = random_engine
    caps = {m: engine.max_drafts(m) for m in engine.methods()}
    lanes = [m for m in engine.methods() if m in ("dflash", "dspark")]
    labels = {"0.0": {m: engine.drafter_label(m) for m in lanes},
              "1.0": {m: engine.drafter_label(m, 1.0) for m in lanes}}
    top = {m: caps[m] for m in lanes}
    rows = {"0.0": {m: {1: 1.0, top[m]: 2.0} for m in lanes}, "1.0": {m: {1: 1.5, top[m]: 1.2} for m in lanes}}
    monkeypatch.setattr(compare_views.lesson, "recorded", lambda: {"blocks": {"data": _sweep(rows, labels)}})
    views = compare_views.LaneViews(engine, SessionStore())
    assert views.block_starts == {"0.0": max(top.values()), "1.0": 1}
    assert views.defaults.drafts_per_step_one_pass == max(top.values())
    assert views.follow_temperature(1.0, max(top.values()))["value"] == 1
    assert views.follow_temperature(0.0, 1)["value"] == max(top.values())
    assert "value" not in views.follow_temperature(1.0, 3)  # set by hand: it stays
