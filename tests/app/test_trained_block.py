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
