"""What each lane says of itself: whether it wrote the baseline's tokens (computed, at temperature 0), what it
is instead above 0, and what the words of its header mean."""

from __future__ import annotations

from dataclasses import replace

from app.comparison import Comparison
from engine.contract.types import GenerationConfig

PROMPT = "def add(a, b):"


def test_each_lane_says_whether_it_wrote_the_baselines_tokens(random_engine):
    """At temperature 0 the mark is computed from the tokens: a lane whose tokens were changed is caught."""
    from app.draw.render import lane_html

    steps = {m: list(random_engine.stream(PROMPT, GenerationConfig(method=m, max_new_tokens=12)))
             for m in ("baseline", "dflash")}
    same = Comparison.of_steps({"temperature": 0.0, "prompt": PROMPT}, steps)
    assert same.differs_from_baseline("dflash") == 0 and same.differs_from_baseline("baseline") is None
    assert "identical to the baseline ✓" in lane_html(same, "dflash")
    assert "identical to the baseline" not in lane_html(same, "baseline")
    # the third token of the lane's output replaced by another: the mark says where
    tampered, seen = [], 0
    for step in steps["dflash"]:
        committed = list(step.committed)
        for j, token in enumerate(committed):
            seen += 1
            if seen == 3:
                committed[j] = replace(token, id=token.id + 1)
        tampered.append(replace(step, committed=tuple(committed)))
    differs = Comparison.of_steps({"temperature": 0.0, "prompt": PROMPT}, {**steps, "dflash": tampered})
    assert differs.differs_from_baseline("dflash") == 3
    assert "differs from the baseline at token 3 ✗" in lane_html(differs, "dflash")
    # above temperature 0 no mark of identity: the lane says it is a sample, and where the check is
    sampled = Comparison.of_steps({"temperature": 0.8, "prompt": PROMPT}, steps)
    assert sampled.differs_from_baseline("dflash") is None
    html = lane_html(sampled, "dflash")
    assert "identical" not in html and "a sample of the target's distribution" in html and "?lesson=2" in html


def test_the_lane_header_explains_its_drafter_on_hover(random_engine):
    from app.draw.render import lane_html

    steps = {m: list(random_engine.stream(PROMPT, GenerationConfig(method=m, max_new_tokens=6)))
             for m in ("baseline", "dspark")}
    card = lane_html(Comparison.of_steps({"temperature": 0.0, "prompt": PROMPT}, steps,
                                         drafters={"dspark": random_engine.drafter_label("dspark")}), "dspark")
    drafter = card[card.index('class="lane-drafter"'):]
    title = drafter[drafter.index('title="') + 7: drafter.index('">')]
    assert "anchor: " in title and "Markov head" in title  # both words of the label explained
