"""The Step-through tab: step i of every lane shows exactly the trace's numbers, the token selector's charts
carry the trace's top tokens, the timeline marks the step's spans, a saved comparison renders as the live
one did, the slider ends at the longest lane, and Play walks to the end and stops there."""

from __future__ import annotations

import html
import re

import pytest

gr = pytest.importorskip("gradio")

from app.comparison import Comparison, read_comparison  # noqa: E402
from engine.contract.methods import method_label  # noqa: E402
from app.tabs.step import (NO_RUN, PLAY_EVERY_S, advance, blocks_html, find_token, fmt, last_step,  # noqa: E402
                           lane_block_html, rule_of, step_number, step_view, timeline_with_step, token_choices)
from engine.contract.types import GenerationConfig  # noqa: E402

PROMPT = "def parse(self, text):\n"
METHODS = ("baseline", "eagle3", "dflash", "dspark")
SETTINGS = dict(prompt=PROMPT, methods=list(METHODS), temperature=0.8, seed=5, max_new_tokens=10,
                drafts_per_step_serial=3, drafts_per_step_one_pass=7, verify_rule="rejection", scheduler="throughput",
                confidence_threshold=0.5, overlap="auto")


@pytest.fixture(scope="module")
def built(random_engine):
    """The app with its defaults, built once (compare_support.default_app): each test calls its handlers as a
    visitor of its own, so none sees another's session."""
    from compare_support import default_app

    return default_app(random_engine)


@pytest.fixture(scope="module")
def comparison(random_engine) -> Comparison:
    """A real run of every lane at temperature 0.8 with the rejection rule, so draws exist."""
    lanes = {}
    for method in METHODS:
        config = GenerationConfig(method=method, max_new_tokens=SETTINGS["max_new_tokens"], temperature=0.8, seed=5,
                                  drafts_per_step=7 if method in ("dflash", "dspark") else 3, verify_rule="rejection")
        result = random_engine.generate(PROMPT, config)
        lanes[method] = [result.prefill, *result.steps]
    return Comparison.of_steps(SETTINGS, lanes, drafters={"eagle3": "noisy copy"}, device="CPU", preset="random")


def first_rejection(comparison: Comparison):
    """(method, step index, 1-based position, token) of the first rejected draft that has a draw."""
    for method, steps in comparison.steps.items():
        for step in steps:
            for position, token in enumerate(step.drafted, start=1):
                if token.verdict == "rejected" and token.draw is not None:
                    return method, step.index, position, token
    raise AssertionError("the random drafters never had a draft rejected")


def card(blocks: str, key: str) -> str:
    match = re.search(rf'<div class="st-tok[^"]*" data-key="{re.escape(key)}".*?</div></div>', blocks, flags=re.S)
    assert match, key
    return match.group(0)


def numbers(card_html: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in
            re.findall(r'data-num="([a-z_]+)">([^<]*)<', card_html)}


def test_probabilities_print_as_three_decimals_or_two_significant_digits():
    assert fmt(0.10494081676) == "0.105" and fmt(1.0) == "1.000" and fmt(0.0) == "0.000"
    assert fmt(0.000774429) == "0.00077" and fmt(4.446e-07) == "4.4e-07" and fmt(None) == "—"


def test_a_rejected_token_shows_exactly_the_trace_numbers(comparison):
    method, i, position, token = first_rejection(comparison)
    view = step_view(comparison, i)
    assert view.selected == f"{method}:{position}"  # the step's first rejection is selected by default
    shown = numbers(card(view.blocks, f"{method}:{position}"))
    assert shown == {"p_draft": fmt(token.draft_prob), "p_target": fmt(token.target_prob),
                     "accept": fmt(token.accept_prob), "r": fmt(token.draw), "verdict": "rejected"}
    assert token.accept_prob == pytest.approx(min(1.0, token.target_prob / token.draft_prob), rel=1e-4)
    assert token.draw >= token.accept_prob  # why it was rejected
    assert 'class="tok rejected"' in card(view.blocks, f"{method}:{position}")
    # every lane is there at step i: its block, or where it finished
    assert re.findall(r'class="st-lane" data-method="(\w+)"', view.blocks) == list(METHODS)


def test_every_drafted_token_of_a_step_has_its_card_and_the_bonus_follows(comparison):
    rule = rule_of(comparison)
    assert not rule.greedy and rule.accept_label == "ratio"
    steps = comparison.steps["dflash"]
    step = steps[1]
    lane = lane_block_html("dflash", steps, 1, rule)
    assert re.findall(r'data-verdict="(\w+)"', lane) == [t.verdict for t in step.drafted]
    unverified = [p for p, t in enumerate(step.drafted, start=1) if t.verdict == "unverified"]
    for p in unverified:  # after a rejection nothing is known of the target
        assert numbers(card(lane, f"dflash:{p}"))["p_target"] == "—"
    bonus = "".join(t.text for t in step.committed if t.source == "bonus")
    assert lane.count('class="tok bonus"') == (1 if bonus else 0)


def test_a_finished_lane_says_where_it_finished(comparison):
    shortest = min(comparison.lanes, key=lambda m: len(comparison.steps[m]))
    steps = comparison.steps[shortest]
    assert len(steps) - 1 < last_step(comparison)  # the baseline takes one step per token, the longest
    lane = lane_block_html(shortest, steps, last_step(comparison), rule_of(comparison))
    assert f"done at step {steps[-1].index}" in lane and "st-tok" not in lane


def test_the_token_selector_charts_carry_the_draft_and_target_top_tokens(comparison):
    method, i, position, token = first_rejection(comparison)
    assert (f"{method_label(method)} · {position} · {token.text!r} (rejected)", f"{method}:{position}") \
        in token_choices(comparison, i)
    view = step_view(comparison, i, selected=f"{method}:{position}")
    draft, target = view.draft_figure.data[0], view.target_figure.data[0]
    assert list(draft.x[:len(token.draft_top)]) == [t.prob for t in token.draft_top]
    assert list(target.x[:len(token.target_top)]) == [t.prob for t in token.target_top]
    assert draft.marker.color == "#E69F00" and target.marker.color == "#0072B2"
    for fig, prob in ((view.draft_figure, token.draft_prob), (view.target_figure, token.target_prob)):
        labels = list(fig.data[0].y)
        drafted = [k for k, label in enumerate(labels) if label.endswith("◀ drafted")]
        assert len(drafted) == 1 and fig.data[0].x[drafted[0]] == pytest.approx(prob)  # shown even outside the top
        title = fig.layout.title.text
        assert f"min(1, p_target/p_draft) = {fmt(token.accept_prob)}" in title and f"r = {fmt(token.draw)}" in title
    # a selection that does not exist at this step falls back to the step's own first rejection
    assert find_token(comparison, i, "baseline:9") is None
    assert step_view(comparison, i, selected="baseline:9").selected == f"{method}:{position}"


def test_the_timeline_marks_each_lanes_step_spans(comparison):
    i = 2
    fig = timeline_with_step(comparison.steps, i)
    rows = list(fig.layout.yaxis.categoryarray)
    marked = {shape.name: shape for shape in fig.layout.shapes}
    for method, steps in comparison.steps.items():
        if i >= len(steps):
            assert f"step {i} · {method}" not in marked
            continue
        shape = marked[f"step {i} · {method}"]
        for span in steps[i].spans:  # covers every span of step i, and nothing of the steps around it
            assert shape.x0 <= span.start_s * 1e3 and span.end_s * 1e3 <= shape.x1
        assert shape.x0 >= max(s.end_s for s in steps[i - 1].spans) * 1e3 - 1e-9
        y = rows.index(method_label(method))
        assert shape.y0 < y < shape.y1 and shape.y1 - shape.y0 < 1  # on the lane's own row only
    assert len(fig.data) == len(timeline_with_step(comparison.steps, 0).data)  # the Compare timeline underneath


def test_a_saved_comparison_renders_exactly_as_the_live_one(comparison):
    reread = read_comparison(comparison.to_json().encode())
    for i in (0, 1, last_step(comparison)):
        live, saved = step_view(comparison, i), step_view(reread, i)
        assert saved.blocks == live.blocks and saved.choices == live.choices and saved.selected == live.selected
        assert saved.draft_figure.to_json() == live.draft_figure.to_json()
        assert saved.target_figure.to_json() == live.target_figure.to_json()
        assert saved.timeline.to_json() == live.timeline.to_json()


def test_the_slider_ends_at_the_longest_lane_and_play_walks_to_it_and_stops(comparison):
    last = max(len(steps) - 1 for steps in comparison.steps.values())
    assert last_step(comparison) == last == comparison.settings["max_new_tokens"] - 1  # the baseline: the prefill
    # writes the first token, then one token a step
    i, playing, seen = 0, True, [0]
    while playing:
        i, playing = advance(i, last)
        seen.append(i)
    assert seen == list(range(last + 1))
    assert advance(last, last) == (last, False)  # at the end it stays and stops
    assert step_number("7", last) == 7 and step_number(last + 5, last) == last and step_number(None, last) == 0
    assert step_number(-3, last) == 0 and step_number(float("nan"), last) == 0 and step_number([1], last) == 0


def test_the_tab_wires_a_timer_that_ticks_to_the_end_and_switches_itself_off(built, comparison):
    """Through the built app's own handlers, as the browser would call them."""
    demo = built
    assert "Step through" in [getattr(b, "label", None) for b in demo.blocks.values()]
    timer = next(b for b in demo.blocks.values() if isinstance(b, gr.Timer))
    assert timer.value == PLAY_EVERY_S and timer.active is False
    slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "step-slider")
    fns = {dep.name: dep.fn for dep in demo.fns.values()}
    request = type("Request", (), {"session_hash": "test-step"})()

    assert NO_RUN in html.unescape(fns["on_show_last"](request)[0])  # nothing run in this session yet
    fns["on_show_last"].__self__.sessions.get("test-step").last = comparison  # as a Compare run leaves it
    shown = fns["on_show_last"](request)
    assert shown[1]["maximum"] == last_step(comparison) and shown[1]["value"] == 0
    assert shown[2] == blocks_html(comparison, 0, step_view(comparison, 0).selected)

    def tick(value):
        """on_tick's new value (the raw one where it skips) and whether it switched the clock off."""
        following, clock = fns["on_tick"](value, request)
        return (value if isinstance(following, dict) else following), clock.get("active") is False

    started = fns["on_play"](0, request)
    assert isinstance(started[0], dict) and started[1]["active"] is True  # Play from step 0 keeps the step
    value, ticks, stopped = 0, 0, False
    while not stopped:
        value, stopped = tick(value)
        ticks += 1
    assert value == last_step(comparison) and ticks == last_step(comparison)
    assert tick(value) == (value, True)  # a late tick at the end moves nothing
    again = fns["on_play"](value, request)  # Play at the end starts over from step 0
    assert again[0] == 0 and again[1]["active"] is True
    assert tick(0) == (1, False)
    assert fns["on_pause"](request)["active"] is False
    assert tick(1) == (1, True)  # ticks that reach the server after Pause leave the step where Pause found it
    assert slider.maximum >= 1  # a fresh page's slider before anything is shown


def test_a_saved_file_opens_and_a_bad_one_gets_one_line(built, comparison, tmp_path):
    fns = {dep.name: dep.fn for dep in built.fns.values()}
    request = type("Request", (), {"session_hash": "test-step-upload"})()
    saved = tmp_path / "run.json"
    saved.write_text(comparison.to_json(), encoding="utf-8")
    status, slider, blocks, *_ = fns["on_upload"](str(saved), request)
    assert "run.json" in status and slider["maximum"] == last_step(comparison)
    assert blocks == blocks_html(comparison, 0, step_view(comparison, 0).selected)
    for content in ("{not json", '{"format": "something else"}', comparison.to_json().replace('"eagle3"', '"gpt"')):
        saved.write_text(content, encoding="utf-8")
        status, *rest = fns["on_upload"](str(saved), request)
        assert status.startswith('<div class="status-error">⚠ Could not open that file: ') and "\n" not in status
        assert all(r == gr.skip() for r in rest)  # what was shown stays


def test_greedy_runs_have_no_draw_and_say_argmax(random_engine):
    config = GenerationConfig(method="eagle3", max_new_tokens=12, drafts_per_step=3)
    result = random_engine.generate(PROMPT, config)
    greedy = Comparison.of_steps({**SETTINGS, "temperature": 0.0}, {"eagle3": [result.prefill, *result.steps]})
    step = next(s for s in result.steps if s.num_verified)
    view = step_view(greedy, step.index)
    token = find_token(greedy, step.index, view.selected)
    shown = numbers(card(view.blocks, view.selected))
    assert shown["r"] == "—" and token.accept_prob in (0.0, 1.0)
    assert "greedy: the target's argmax? " + ("yes" if token.accept_prob == 1 else "no") \
        in view.draft_figure.layout.title.text
    # At temperature 0 a card says whether the draft is the target's top token, never a ratio of p_target to
    # p_draft: "yes" exactly for the drafts that equal the target's argmax, whatever the two probabilities
    judged = 0
    for s in result.steps:
        blocks = blocks_html(greedy, s.index)
        for position, t in enumerate(s.drafted, start=1):
            if t.accept_prob is None:
                continue
            judged += 1
            is_argmax = t.target_top[0].id == t.id
            assert numbers(card(blocks, f"eagle3:{position}"))["accept"] == ("yes" if is_argmax else "no")
            assert (t.verdict == "accepted") == is_argmax
    assert judged
    assert "temperature 0 (greedy)" in blocks and "greedy choice" in blocks and "min(1" not in blocks


def test_the_rule_above_the_lanes_is_the_runs_own(comparison):
    blocks = blocks_html(comparison, 1)  # the fixture runs at temperature 0.8 under the rejection rule
    assert "temperature 0.8 under the rejection rule" in blocks and "min(1, p_target / p_draft)" in blocks
    assert "greedy choice" not in blocks
    match = Comparison.of_steps({**SETTINGS, "verify_rule": "match"}, comparison.steps)
    assert "under the match rule" in blocks_html(match, 1) and "min(1" not in blocks_html(match, 1)


def test_each_lanes_count_agrees_with_its_cards(comparison):
    """The summary above a block counts exactly the cards under it: accepted, the rejected one, the unverified
    ones after it, and those cut by the scheduler."""
    checked = set()
    for method, steps in comparison.steps.items():
        for step in steps:
            if not step.drafted:
                continue
            lane = lane_block_html(method, steps, step.index, rule_of(comparison))
            summary = html.unescape(re.search(r'<div class="st-summary">(.*?)</div>', lane).group(1))
            verdicts = re.findall(r'data-verdict="([a-z]+)"', lane)
            assert len(verdicts) == len(step.drafted)
            count = verdicts.count
            plural = "s" if len(verdicts) != 1 else ""
            assert f": {count('accepted')} of {len(verdicts)} draft{plural} accepted" in summary, summary
            if count("rejected"):
                position = verdicts.index("rejected") + 1
                assert re.search(rf"the {position}(st|nd|rd|th) rejected", summary), summary
                checked.add("rejected")
            if count("unverified"):
                assert f"the {count('unverified')} after it unverified" in summary, summary
                checked.add("unverified")
            else:
                assert "unverified" not in summary
            if count("cut"):
                assert f"{count('cut')} cut by the scheduler" in summary, summary
                checked.add("cut")
            else:
                assert "cut" not in summary
    assert {"rejected", "unverified"} <= checked  # the random drafters get rejections with drafts after them


def test_a_lanes_drafter_name_explains_its_words_on_hover(comparison):
    method = "dflash"
    lane = lane_block_html(method, list(comparison.steps[method]), 1, rule_of(comparison),
                           drafter="DFlash, 3 layers, block 8 = anchor + 7 drafts")
    title = html.unescape(re.search(r'<span class="lane-drafter" title="([^"]*)"', lane).group(1))
    assert title.startswith("anchor: The newest committed token")


def test_a_step_the_batch_scheduler_left_undrafted_says_why(random_engine, monkeypatch):
    """DSpark among other requests, its scheduler choosing the target alone for every step (as under heavy load):
    each such step says so, not that the lane had nothing to draft; the last token's step says only what it did."""
    from engine.scheduler import DraftGate

    monkeypatch.setattr(DraftGate, "should_draft", lambda gate, size: False)
    config = GenerationConfig(method="dspark", max_new_tokens=6, drafts_per_step=7, requests_at_once=3)
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    assert len(steps) > 2 and not any(s.drafted for s in steps)
    rule = rule_of(Comparison.of_steps(SETTINGS, {"dspark": steps}))
    middle = lane_block_html("dspark", steps, 1, rule)
    assert "among 3 requests the scheduler measured a step of the target alone committing more tokens" in middle
    last = lane_block_html("dspark", steps, len(steps) - 1, rule)
    assert "nothing drafted, the target writes one token" in last and "among 3" not in last
