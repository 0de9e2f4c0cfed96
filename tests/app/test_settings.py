"""The controls and their checks (app/settings.py): text where a number goes is read exactly and anything else is
refused, and a temperature too low to sample with is refused in one line wherever settings enter."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("gradio")

from app.settings import SettingError, default_settings, parse_controls, repair_text  # noqa: E402
from app.links import parse_query  # noqa: E402
from compare_support import ALL_METHODS, DEFAULTS, PROMPT, query_items  # noqa: E402
from engine.contract.types import MIN_SAMPLING_TEMPERATURE, EngineError, GenerationConfig  # noqa: E402


def test_controls_accept_text_and_refuse_anything_else():
    raw = dict(prompt=PROMPT, methods=["dspark", "baseline"], temperature="0.5", seed="9007199254740993",
               max_new_tokens=24.0, drafts_per_step_serial="4", drafts_per_step_one_pass=7, verify_rule="match",
               scheduler="static", confidence_threshold=0.25, overlap="off", tree_nodes="32", requests_at_once="8")
    settings = parse_controls(raw, ALL_METHODS)
    assert settings.seed == 2**53 + 1 and settings.methods == ("baseline", "dspark")
    assert settings.temperature == 0.5 and settings.max_new_tokens == 24 and settings.drafts_per_step_serial == 4
    assert settings.tree_nodes == 32 and settings.config("dflash_tree").tree_nodes == 32
    assert settings.config("dflash").requests_at_once == 8
    for name in ("seed", "temperature", "max_new_tokens", "drafts_per_step_serial", "confidence_threshold",
                 "tree_nodes", "requests_at_once"):
        for value in ("abc", None, [], {}, True, math.nan, math.inf, -math.inf, "1e400", 10**400):
            with pytest.raises(SettingError):
                parse_controls({**raw, name: value}, ALL_METHODS)
    with pytest.raises(SettingError, match="requests at once must be a whole number from 1 to 32, got 33"):
        parse_controls({**raw, "requests_at_once": 33}, ALL_METHODS)  # the page's range, inside the engine's
    with pytest.raises(SettingError, match="too large to be exact as a float; send it as text, in digits"):
        parse_controls({**raw, "seed": float(2**53)}, ALL_METHODS)  # it may have been 2**53 + 1
    with pytest.raises(SettingError, match="seed '1e18' is too large to be exact as a float; write it in digits$"):
        parse_controls({**raw, "seed": "1e18"}, ALL_METHODS)  # text already: the digits are what is missing
    assert repair_text("a\ud800b\udfff") == "a\ufffdb\ufffd" and repair_text("\udcc3\udca9") == "é"
    assert repair_text("\udcff\ud83d") == "\ufffd\ufffd" and repair_text("é ☃ 🎉") == "é ☃ 🎉"


def test_a_temperature_too_low_to_sample_is_refused_in_one_line(random_engine):
    """Past about 1e-30, logits / temperature overflows and the sampler meets NaN probabilities; every positive
    temperature below MIN_SAMPLING_TEMPERATURE is refused where settings enter: the controls, a link, the engine."""
    raw = dict(default_settings(ALL_METHODS).__dict__, methods=["baseline"])
    for value in (1e-30, "1e-300", 5e-324, MIN_SAMPLING_TEMPERATURE / 2):
        with pytest.raises(SettingError, match="too low to sample with: use 0 for greedy decoding, or at least"):
            parse_controls({**raw, "temperature": value}, ALL_METHODS)
        with pytest.raises(EngineError, match="too low to sample"):
            GenerationConfig(method="eagle3", temperature=float(value)).validate()
    parsed, messages = parse_query(query_items("temperature=1e-40"), available=ALL_METHODS)
    assert parsed.temperature == DEFAULTS.temperature and "too low to sample" in messages[0]
    assert parse_controls({**raw, "temperature": 0}, ALL_METHODS).temperature == 0
    for method in ("baseline", "eagle3", "dspark"):  # the lowest temperature allowed samples with finite numbers
        config = GenerationConfig(method=method, temperature=MIN_SAMPLING_TEMPERATURE, max_new_tokens=12, seed=3)
        result = random_engine.generate(PROMPT, config)
        numbers = [x for s in result.steps for t in s.drafted for x in (t.draft_prob, t.target_prob, t.accept_prob)]
        assert result.output_ids and all(math.isfinite(x) for x in numbers if x is not None)
