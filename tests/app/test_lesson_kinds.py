"""τ and speedup by kind of text in the lesson: the recording's kinds, the table and the sentence worded from them."""

from app import lesson


def test_the_recorded_sweep_sends_the_first_prompts_kinds_and_a_live_one_none(monkeypatch):
    sent = []
    monkeypatch.setattr(lesson, "run_on", lambda engine, fn, prompts, *args, **kwargs: sent.append((prompts, kwargs)))
    lesson.measure_temperatures(None)
    prompts, kwargs = sent[-1]
    assert len(prompts) == len(kwargs["kinds"]) == lesson.TEMPERATURE_PROMPTS
    assert kwargs["kinds"] == lesson.heldout_kinds()[:lesson.TEMPERATURE_PROMPTS]
    lesson.measure_temperatures_live(None)
    assert sent[-1][1]["kinds"] is None


import copy  # noqa: E402

from app.lesson import kinds  # noqa: E402

REGULAR, FREE, PROSE = "regular code", "free code", "prose-like"


def cell(tau: float, speedup: float, prompts: int = 8) -> dict:
    return {"prompts": prompts, "tau": {"mean": tau, "low": tau - 0.2, "high": tau + 0.2},
            "speedup": {"mean": speedup, "low": speedup - 0.1, "high": speedup + 0.1}}


def by_kind(regular: float, free: float, prose: float) -> dict:
    return {REGULAR: cell(regular * 2, regular, 16), FREE: cell(free * 2, free, 8), PROSE: cell(prose * 2, prose, 16)}


def sweep(ar=(1.5, 1.4, 1.3), dflash=(2.4, 1.7, 1.5), dspark=(2.6, 1.8, 1.6)) -> dict:
    lanes = {"eagle3": by_kind(*ar), "dflash": by_kind(*dflash), "dspark": by_kind(*dspark)}
    return {t: {"lanes": {m: {"speedup": 1.0, "by_kind": b} for m, b in lanes.items()}} for t in ("0.0", "1.0")}


def data(**speeds) -> dict:
    return {"temperatures": {"data": {"temperatures": sweep(**speeds), "num_prompts": 40}}}


def test_a_recording_without_kinds_shows_no_table_and_says_nothing():
    plain = {"temperatures": {"data": {"temperatures": {"0.0": {"lanes": {"eagle3": {"speedup": 1.5}}}}}}}
    for empty in ({}, plain):
        assert kinds.kinds_markdown(empty, 1) == kinds.kinds_sentence(empty, 1) == ""
    assert kinds.kinds_markdown(data(), 4) == kinds.kinds_sentence(data(), 4) == ""  # not a point that shows kinds


def test_the_tables_show_each_kinds_tau_and_speedup_with_intervals_and_prompt_counts():
    page = kinds.kinds_markdown(data(), 7)
    assert "regular code (16 prompts)" in page and "free code (8 prompts)" in page
    assert "| 0 | DFlash | τ 4.80 (4.60–5.00), 2.40× (2.30–2.50)" in page and "| 1 | AR |" in page
    assert "DSpark" not in page  # point 7: AR beside DFlash
    assert "| 0 | DSpark | " in kinds.kinds_markdown(data(), 9)  # point 9: AR, DFlash and DSpark


def test_the_sentence_names_the_kind_of_the_largest_lead_and_whether_the_papers_agree():
    agrees = kinds.kinds_sentence(data(), 7)
    assert "DFlash's lead over AR is largest on regular code (1.60× AR's speed" in agrees
    assert "this agrees with the papers" in agrees
    moved = kinds.kinds_sentence(data(dflash=(1.6, 1.5, 2.6)), 7)  # the lead now largest on prose
    assert "largest on prose-like (2.00× AR's speed" in moved and "this does not agree with the papers" in moved
    mixed = kinds.kinds_sentence(data(dspark=(1.6, 2.8, 1.4)), 1)
    assert "DSpark's lead over AR is largest on free code" in mixed
    assert "DFlash agrees with the papers" in mixed and "DSpark does not" in mixed


def paired(found: dict, vs: dict[str, tuple[float, float, float]], lane: str = "dflash") -> dict:
    """`found` with `lane`'s speed over AR's, paired prompt by prompt, at T = 0 for each kind: (mean, low, high)."""
    for kind, (mean, low, high) in vs.items():
        cell = found["temperatures"]["data"]["temperatures"]["0.0"]["lanes"][lane]["by_kind"][kind]
        cell["vs"] = {"eagle3": {"mean": mean, "low": low, "high": high}}
    return found


def test_a_paired_lead_is_worded_with_its_interval_and_whether_it_beats_the_noise():
    beyond = kinds.kinds_sentence(paired(data(), {REGULAR: (1.37, 1.2, 1.55), FREE: (0.98, 0.85, 1.1),
                                                  PROSE: (1.09, 0.95, 1.25)}), 7)
    assert "largest on regular code (1.37× (1.20–1.55) AR's speed, paired over its prompts: a lead beyond the noise" \
        in beyond
    assert "against 0.98× (0.85–1.10) on free code, 1.09× (0.95–1.25) on prose-like" in beyond
    within = kinds.kinds_sentence(paired(data(), {REGULAR: (1.1, 0.9, 1.3), FREE: (0.98, 0.85, 1.1),
                                                  PROSE: (1.05, 0.95, 1.15)}), 7)
    assert "largest on regular code (1.10× (0.90–1.30) AR's speed, paired over its prompts: within the noise" in within
    # the pairing decides, not the two speedups' ratio (2.4 / 1.5 = 1.60 in these cells)
    assert "1.60×" not in within


def with_kinds(recordings: dict) -> dict:
    """The shipped recordings with by-kind cells added to the temperature sweep's lanes at T = 0 and 1."""
    found = copy.deepcopy(recordings)
    cells = sweep()
    for t, row in found["temperatures"]["data"]["temperatures"].items():
        for lane, values in row["lanes"].items():
            if t in cells and lane in cells[t]["lanes"]:
                values["by_kind"] = cells[t]["lanes"][lane]["by_kind"]
    return found


def without_kinds(recordings: dict) -> dict:
    """The shipped recordings as a temperature sweep recorded before kinds were kept: no by-kind cells."""
    found = copy.deepcopy(recordings)
    for row in found["temperatures"]["data"]["temperatures"].values():
        for values in row["lanes"].values():
            values.pop("by_kind", None)
    return found


def test_points_1_7_and_9_show_the_kinds_on_the_page_only_where_recorded():
    from app.tabs.lesson import point_html
    from app.tabs.slides import takeaway_html

    shipped = lesson.recorded()
    assert {"temperatures", "greedy", "parts"} <= set(shipped)
    shown, recordings = with_kinds(shipped), without_kinds(shipped)
    for point in lesson.POINTS:
        page, slide = point_html(point, shown), takeaway_html(point, shown)
        assert ("By kind of text" in page) == (point.number in (1, 7, 9))
        assert "By kind" not in slide  # a slide keeps its chart's height: the kinds are on the page
        bare = point_html(point, recordings) + takeaway_html(point, recordings)
        assert "By kind" not in bare


def test_a_kind_of_one_prompt_shows_its_figures_without_an_interval():
    one = data()
    for row in one["temperatures"]["data"]["temperatures"].values():
        for lane in row["lanes"].values():
            lane["by_kind"][FREE] = {**cell(3.0, 1.5, 1)}
    page = kinds.kinds_markdown(one, 7)
    assert "free code (1 prompt)" in page and "τ 3.00, 1.50×" in page
    assert "τ 3.00 (2.80" in page  # AR's regular code, 16 prompts, keeps its interval
