"""What a lane and the charts draw (app/draw/render.py, app/draw/charts.py) matches the engine's own output: the
lane marks exactly the output tokens, a running lane is drawn light and whole once it ends, the timeline has every
span of every lane, and the small charts show measured values."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("gradio")

from app.draw.charts import timeline_figure  # noqa: E402
from app.settings import default_settings  # noqa: E402
from app.draw.render import display_text, lane_html  # noqa: E402
from compare_support import PROMPT, output_text_of  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402


def lane_of(method: str, steps, state: str = "done", temperature: float = 0.0):
    """A comparison of one lane, as the Compare tab holds it: ended lanes carry their summary."""
    from dataclasses import replace

    from app.comparison import Comparison, LaneResult, settings_dict

    settings = settings_dict(replace(default_settings(), prompt=PROMPT, temperature=temperature, methods=(method,)))
    lane = LaneResult.ended(method, steps, state=state) if state != "running" else LaneResult(method, tuple(steps),
                                                                                                 state=state)
    return Comparison(settings, {method: lane})


def test_lane_html_marks_exactly_the_output_tokens(random_engine):
    config = GenerationConfig(method="eagle3", max_new_tokens=30, drafts_per_step=4)
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    lane = lane_html(lane_of("eagle3", steps), "eagle3")
    assert output_text_of(lane) == display_text(result.text)
    assert lane.count('class="tok rejected ghost"') == sum(
        1 for s in result.steps for t in s.drafted if t.verdict == "rejected")
    assert "τ" in lane and "speedup" in lane


def test_timeline_has_one_row_per_lane_and_every_span(random_engine):
    runs = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=12, drafts_per_step=3))
            for m in ("baseline", "eagle3")}
    fig = timeline_figure({m: [r.prefill, *r.steps] for m, r in runs.items()})
    drawn = sum(len(trace.x) for trace in fig.data if trace.name != "bubble (gap)")
    assert drawn == sum(len(s.spans) for r in runs.values() for s in (r.prefill, *r.steps))
    draft = next(t for t in fig.data if t.name == "draft")
    assert set(draft.y) == {"AR"}
    assert all(x > 0 for trace in fig.data for x in trace.x)


def test_timeline_draws_a_steps_draft_forwards_in_alternating_shades(random_engine):
    """K draft forwards in a row would merge into one orange bar: the 1st, 3rd, ... of a step take one shade and
    the 2nd, 4th, ... another (one legend entry for both)."""
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=12, drafts_per_step=4))
    fig = timeline_figure({"eagle3": [result.prefill, *result.steps]})
    first, second = [t for t in fig.data if t.legendgroup == "draft"]
    assert first.marker.color != second.marker.color and first.showlegend and not second.showlegend
    odd, even = set(), set()  # each step's draft spans by start, 1st, 3rd, ... and 2nd, 4th, ...
    for step in (result.prefill, *result.steps):
        for i, span in enumerate(s for s in step.spans if s.work == "draft"):
            (even if i % 2 else odd).add(round(span.start_s * 1e3, 9))
    assert len(even) >= len(result.steps) - 1  # K = 4: at least two forwards in every full step
    assert {round(b, 9) for b in first.base} == odd and {round(b, 9) for b in second.base} == even


def test_small_charts_show_measured_values(random_engine):
    from app.draw.charts import acceptance_figure, progress_figure, survival_figure
    from engine.contract.summary import per_position_acceptance

    config = GenerationConfig(method="dspark", max_new_tokens=30, drafts_per_step=7, scheduler="static")
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    progress = progress_figure({"dspark": steps})
    assert progress.data[0].y[-1] == len(result.output_ids)
    acceptance = acceptance_figure({"dspark": per_position_acceptance(steps)})
    assert list(acceptance.data[0].y) == list(per_position_acceptance(steps))
    survival = survival_figure(steps)
    predicted, realised = survival.data
    assert all(0.0 <= v <= 1.0 for v in (*predicted.y, *realised.y))
    first = [s for s in result.steps if s.num_verified >= 1]
    assert realised.y[0] == pytest.approx(sum(s.num_accepted >= 1 for s in first) / len(first))
    assert predicted.y[0] == pytest.approx(sum(s.drafted[0].confidence for s in first) / len(first))


def test_a_running_lane_is_drawn_light_and_whole_once_it_ends(random_engine):
    steps = list(random_engine.stream(PROMPT, GenerationConfig(method="dspark", max_new_tokens=24)))
    full = lane_html(lane_of("dspark", steps), "dspark")
    live = lane_html(lane_of("dspark", steps, "running"), "dspark", live=True)
    tokens = r'<span class="tok ([^"]*)"( data-out)?( title="[^"]*")?>(.*?)</span>'
    output = full.split("<details")[0]  # the output, not the list of steps below it
    full_tokens, live_tokens = re.findall(tokens, output, flags=re.S), re.findall(tokens, live, flags=re.S)
    assert [(c, o, t) for c, o, _, t in full_tokens] == [(c, o, t) for c, o, _, t in live_tokens]  # same tokens
    assert all(title for *_, title, _ in full_tokens) and not any(title for *_, title, _ in live_tokens)
    assert "<details" in full and "<details" not in live  # the list of steps comes with the full view only
    assert len(live) < len(full) / 2
    # While it runs, each redraw only appends to the last one (so only the new tokens travel).
    earlier = lane_html(lane_of("dspark", steps[:3], "running"), "dspark", live=True)
    assert live.startswith(earlier) and len(live) > len(earlier)


def test_every_control_character_is_drawn_visibly_wherever_it_sits_and_plain_text_is_left_alone():
    from app.draw.render import BIDI_CONTROLS

    for code in [*range(32), 0x7F, *BIDI_CONTROLS]:
        char = chr(code)
        for text in (char, f"ab{char}", f"{char}cd", f"a{char}b{char}"):
            shown = display_text(text)
            if char in "\t\n":
                assert shown == text
            else:
                assert char not in shown and len(shown) > len(text) - text.count(char)
    plain = "def f(x):\n\treturn 'é' + \u05d0"  # tabs, newlines, letters of any script: as they are
    assert display_text(plain) is plain
