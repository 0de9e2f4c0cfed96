"""The block sweep on the Why tab: every one-pass lane's speedup by block at temperatures 0 and 1, worded from the
recording, under the serial lanes' K sweep."""

from app.lesson.block_sweep import block_rows, blocks_markdown, blocks_sentences


def row(speedup: float, tau: float = 3.0) -> dict:
    return {"speedup": speedup, "tau": tau}


def recording(greedy=(1.2, 1.8, 2.2), sampled=(1.2, 1.45, 1.1)) -> dict:
    """A recording's data: DSpark at 1, 4 and its trained 15 drafts, DFlash at 1 and its trained 7."""
    def lanes(speeds):
        dspark = dict(zip((1, 4, 15), speeds))
        return {"dspark": {"drafter": "DSpark, 3 layers, 15 drafts per block", "num_prompts": 12, "max_new_tokens": 64,
                           "rows": {str(k): row(v) for k, v in dspark.items()},
                           "best_k": max(dspark, key=dspark.get)},  # as k_sweep records it
                "dflash": {"drafter": "DFlash, 3 layers, 7 drafts per block", "num_prompts": 12, "max_new_tokens": 64,
                           "rows": {"1": row(1.1), "7": row(1.6)}, "best_k": 7}}
    return {"data": {"temperatures": {"0.0": lanes(greedy), "1.0": lanes(sampled)}, "rounds": 2}}


SWEEPS = {"data": {"sweeps": {"eagle3": {"best_k": 3}}}}


def test_each_lanes_fastest_and_trained_block_come_from_its_rows():
    rows = block_rows(recording())
    assert rows["0.0"]["dspark"]["best"] == rows["0.0"]["dspark"]["trained"] == 15
    assert rows["1.0"]["dspark"]["best"] == 4 and rows["1.0"]["dflash"]["trained"] == 7
    assert block_rows(None) == {} and blocks_markdown(None) == "" and blocks_sentences({}) == ""


def test_the_sentences_name_the_fastest_block_and_the_trained_one_where_they_differ():
    words = blocks_sentences(recording(), SWEEPS)
    assert "At temperature 0 the fastest block was: DSpark at 15 drafts (2.20×), DFlash at 7 drafts (1.60×)." in words
    assert "At temperature 1 the fastest block was: DSpark at 4 drafts (1.45×; at its trained 15: 1.10×)" in words
    assert "AR's best K is 3" in words and "starts at the fastest block" in words
    flat = blocks_sentences(recording(sampled=(1.3, 1.2, 1.1)))
    assert "DSpark at 1 draft (1.30×; at its trained 15: 1.10×)" in flat and "best K" not in flat


def test_blocks_within_the_recordings_tolerance_of_the_fastest_read_as_level_with_it():
    close = recording(greedy=(1.2, 2.17, 2.2))  # 4 drafts within 2 % of 15's: two rounds each
    assert "DSpark at 15 drafts (2.20×; level with it: 4 at 2.17×)" in blocks_sentences(close)
    once = recording(sampled=(1.2, 1.45, 1.25))
    once["data"]["rounds"] = 1  # one run each: the wider tolerance of a figure measured once (speed.ONE_ROUND_NOISE)
    assert "DSpark at 4 drafts (1.45×; level with it: 1 at 1.20×, 15 at 1.25×)" in blocks_sentences(once)
    assert "at its trained" not in blocks_sentences(once).split("At temperature 1")[1].split("DFlash")[0]


def test_the_table_bolds_each_lanes_fastest_block_and_marks_blocks_it_never_drafted():
    table = blocks_markdown(recording(), SWEEPS, "recorded 2026-12-06 on build 0123456789, cpu, 1 thread")
    assert "recorded 2026-12-06 on build 0123456789" in table and "12 held-out prompts, 64 new tokens" in table
    assert "| T | lane | 1 | 4 | 7 | 15 |" in table
    assert "| 0 | DSpark | 1.20×, τ 3.00 | 1.80×, τ 3.00 | — | **2.20×**, τ 3.00 |" in table
    assert "| 1 | DFlash | 1.10×, τ 3.00 | — | **1.60×**, τ 3.00 | — |" in table


def test_the_why_tabs_sweep_panel_shows_the_blocks_only_where_recorded():
    from app import lesson
    from app.tabs.why_panels import draw_panels

    shipped = {k: v for k, v in lesson.recorded().items() if k in ("sweeps",)}
    bare = draw_panels(shipped)[1]
    shown = draw_panels({**shipped, "blocks": recording()})[1]
    assert "Drafts per block" not in bare and shown.startswith(bare) and "Drafts per block" in shown
