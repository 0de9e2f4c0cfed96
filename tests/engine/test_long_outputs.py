"""Long outputs: the feature drafters' window and self-tuning options keep the output the target's, do what they
say, and the measurement of acceptance by output position has its shape and intervals (tiny random models)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engine.contract.types import EngineError, GenerationConfig
from engine.measure.lossless import MIN_EXPECTED, chi_square, target_pair_probs
from engine.measure.positions import Lane, by_position, lane_summary, paired, table

from conftest import TINY_CONTEXT, tiny_dflash, tiny_dspark, tiny_eagle3, tiny_qwen3

PROMPT = "def parse(self, text):\n    return text.split()\n"
METHODS = ("dflash", "dspark", "eagle3")
WINDOW = 12  # well inside the tiny context (96), so a run to the context drafts most steps past it


@pytest.fixture(scope="module")
def engine(tokenizer):
    from engine.loop import Engine

    target = tiny_qwen3(len(tokenizer), layers=6)  # EAGLE-3 reads 5 layers, never the last
    drafters = {"dflash": tiny_dflash(target), "dspark": tiny_dspark(target), "eagle3": tiny_eagle3(target)}
    return Engine(target, tokenizer, drafters, torch.device("cpu"), preset="random")


def _run(engine, method, **options):
    return engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=TINY_CONTEXT, **options))


def _drafted(result) -> list[tuple[int, ...]]:
    return [tuple(t.id for t in s.drafted) for s in result.steps]


@pytest.fixture(scope="module")
def baseline(engine):
    return _run(engine, "baseline")


@pytest.fixture(scope="module")
def plain(engine):
    """Each method's run without either option, made once for the module (at temperature 0 a run is the same run
    after run: tests/engine/test_identity.py), which the option tests hold their own runs against."""
    runs = {}
    return lambda method: runs[method] if method in runs else runs.setdefault(method, _run(engine, method))


@pytest.mark.parametrize("method", METHODS)
def test_window_keeps_the_output_and_changes_the_drafts(engine, baseline, plain, method):
    plain, windowed = plain(method), _run(engine, method, drafter_window=WINDOW)
    assert windowed.output_ids == baseline.output_ids == plain.output_ids
    assert len(baseline.prompt_ids) + len(baseline.output_ids) > 2 * WINDOW  # the run went well past the window
    assert _drafted(windowed) != _drafted(plain)  # the drafter saw less: its drafts differ somewhere


def test_a_window_wider_than_the_context_changes_nothing(engine, plain):
    assert _drafted(_run(engine, "eagle3", drafter_window=TINY_CONTEXT)) == _drafted(plain("eagle3"))
    assert _drafted(_run(engine, "dflash", drafter_window=TINY_CONTEXT)) == _drafted(plain("dflash"))


@pytest.mark.parametrize("method", METHODS)
def test_self_tuning_keeps_the_output_trains_a_copy_and_times_it(engine, baseline, plain, method):
    before = {k: v.clone() for k, v in engine.drafter_models[method].state_dict().items()}
    plain, tuned = plain(method), _run(engine, method, self_tuning=True, drafter_window=WINDOW)
    assert tuned.output_ids == baseline.output_ids
    assert _drafted(tuned) != _drafted(plain)
    trains = [span for s in tuned.steps for span in s.spans if span.work == "train"]
    assert len(trains) == sum(1 for s in tuned.steps if s.drafted) > 10
    assert all(span.end_s > span.start_s for span in trains)
    assert not any(span.work == "train" for s in plain.steps for span in s.spans)
    assert "tuning itself" in tuned.drafter
    after = engine.drafter_models[method].state_dict()  # the engine's own network is never trained
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_self_tuning_is_lossless_at_temperature_one(tokenizer):
    """The first two tokens over many seeds against the target's exact probabilities: the first draft already comes
    from the tuned copy (a step on the prompt's last tokens), so a tuned drafter that broke the rule would show. The
    target's logits are scaled up (its final norm) so that at temperature 1 a few pairs hold most of the mass."""
    from engine.loop import Engine

    target = tiny_qwen3(len(tokenizer))
    with torch.no_grad():
        target.model.norm.weight.mul_(2)
    engine = Engine(target, tokenizer, {"dflash": tiny_dflash(target)}, torch.device("cpu"), preset="random")
    samples, temperature = 200, 1.0
    expected = target_pair_probs(engine, PROMPT, temperature, min_prob=MIN_EXPECTED / samples / 4)
    counts, moved = {}, 0
    for seed in range(samples):
        config = GenerationConfig(method="dflash", max_new_tokens=3, temperature=temperature, seed=seed,
                                  drafts_per_step=1)
        tuned = engine.generate(PROMPT, replace(config, self_tuning=True))
        pair = tuple(tuned.output_ids[:2])
        counts[pair] = counts.get(pair, 0) + 1
        if seed < 5:
            moved += engine.generate(PROMPT, config).steps[0].drafted[0].draft_prob != \
                tuned.steps[0].drafted[0].draft_prob
    assert moved  # the tuned copy drafts with other odds than the shipped one
    test = chi_square(counts, expected, samples)
    assert test["bins"] >= 3 and test["p_value"] > 0.001, test


def test_options_refused_in_one_line_where_they_cannot_apply(engine):
    for config in (GenerationConfig(method="baseline", self_tuning=True),
                   GenerationConfig(method="dflash", drafter_window=8, requests_at_once=2)):
        with pytest.raises(EngineError, match="^[^\n]+$"):
            engine.generate(PROMPT, config)
    with pytest.raises(EngineError, match="drafter window"):
        GenerationConfig(method="dflash", drafter_window=0).validate()


def test_positions_measurement_shape_and_intervals(engine):
    prompts = [PROMPT, "import os\nimport sys\n"]
    data = by_position(engine, prompts, [Lane("dflash", "as shipped"), Lane("eagle3", "self-tuning")], bin_size=16)
    assert data["prompts"] == 2 and data["context"] == TINY_CONTEXT and len(data["lanes"]) == 2
    for lane in data["lanes"]:
        starts = [b["start"] for b in lane["bins"]]
        assert starts == list(range(0, 16 * len(starts), 16)) and starts[-1] > TINY_CONTEXT // 2
        for b in lane["bins"]:
            for key in ("acceptance", "tau"):
                if b[key] is not None:
                    assert b[key]["low"] <= b[key]["mean"] <= b[key]["high"]
        assert all(1 <= b["tau"]["mean"] for b in lane["bins"] if b["tau"])
    tuned = data["lanes"][1]
    assert tuned["option"] == "self-tuning" and tuned["seconds"]["train"] > 0
    assert data["lanes"][0]["seconds"]["train"] == 0
    assert "dflash" in table(data)


def test_lane_summary_splits_at_the_trained_window_by_sequence_position():
    # two prompts of 10 tokens; steps at output 0 (inside a window of 20) and 15 (past it: 10 + 15 ≥ 20)
    runs = [[(0, 3, 4, 4, 0.0), (15, 0, 4, 1, 0.0)], [(0, 4, 4, 5, 0.0), (15, 1, 4, 2, 0.0)]]
    summary = lane_summary(runs, [10, 10], 20, bin_size=8)
    assert summary["inside"]["tau"]["mean"] == 4.5 and summary["past"]["tau"]["mean"] == 1.5
    assert summary["inside"]["acceptance"]["mean"] == 7 / 8 and summary["past"]["steps"] == 2
    assert [b["start"] for b in summary["bins"]] == [0, 8]
    assert summary["bins"][1]["acceptance"]["low"] < summary["bins"][1]["acceptance"]["mean"]


def test_paired_differences_cancel_what_differs_between_prompts():
    runs = [[(0, 3, 4, 4, 0.0), (15, 0, 4, 1, 0.0)], [(0, 4, 4, 5, 0.0), (15, 1, 4, 2, 0.0)]]
    assert lane_summary(runs, [10, 10], 20, bin_size=8)["fall"] == {"mean": -3.0, "low": -3.0, "high": -3.0,
                                                                     "prompts": 2}
    diff = paired([1.0, 2.0, 3.0, None], [2.0, 4.0, 3.0, 9.0])  # the last prompt has no τ before: left out
    assert diff["mean"] == 1.0 and diff["prompts"] == 3 and diff["high"] == pytest.approx(1 + 4.303 / 3 ** 0.5, 1e-4)
    assert paired([1.0], [2.0]) is None
