"""What the lesson measures, on tiny random models: the acceptance ceiling 1 − TV recorded per verified
token, DSpark's Markov head switched off, a method against its registry variants, and the distribution check
that shows lossless sampling by counting (and fails a rule that is not lossless)."""

from __future__ import annotations

import pytest
import torch

import engine.sampling
from engine.measure.lossless import chi_square, distribution_check
from engine.measure.sweep import variant_sweep
from engine.contract.types import EngineError, GenerationConfig

PROMPT = "def parse(self, text):\n"
# Seeds per lane of each distribution check below, at temperature 0.5: bins of five expected samples leave 4 degrees
# of freedom. A lossless lane fails at p = 0.001 whatever the count. The broken rules counted here are far off: the
# drafter's own distribution kept scores about 2.6 a sample, judging argmax proposals against the drafter's softmax
# about 1.2, so 260 and 120 at 100 seeds against the 18.5 that p = 0.001 needs at 4 degrees of freedom.
SAMPLES = 100


def test_each_judged_token_carries_the_distance_that_caps_its_acceptance(random_engine):
    """Under the rejection rule a token drawn from q passes with probability E_q[min(1, p/q)] = 1 − TV(p, q):
    over many judged tokens the mean accept probability meets the mean 1 − tv within noise."""
    accept, ceiling = [], []
    for seed in range(12):
        config = GenerationConfig(method="eagle3", max_new_tokens=40, temperature=1.0, seed=seed, drafts_per_step=4)
        for step in random_engine.generate(PROMPT, config).steps:
            for token in step.drafted:
                assert (token.tv is None) == (token.accept_prob is None)  # judged tokens only
                if token.tv is not None:
                    assert 0.0 <= token.tv <= 1.0
                    accept.append(token.accept_prob)
                    ceiling.append(1.0 - token.tv)
    assert len(accept) > 200
    mean_accept, mean_ceiling = sum(accept) / len(accept), sum(ceiling) / len(ceiling)
    assert abs(mean_accept - mean_ceiling) < 0.05, (mean_accept, mean_ceiling)


def test_dspark_without_its_markov_head_drafts_from_the_backbone_alone_and_stays_exact(random_engine):
    baseline = random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24))
    with_head = random_engine.generate(PROMPT, GenerationConfig(method="dspark", max_new_tokens=24, scheduler="none"))
    without = random_engine.generate(PROMPT, GenerationConfig(method="dspark", max_new_tokens=24, scheduler="none",
                                                              markov_head=False))
    assert without.output_ids == with_head.output_ids == baseline.output_ids
    assert "off in this run" in without.drafter and "off" not in with_head.drafter
    assert [s.drafted_ids for s in without.steps] != [s.drafted_ids for s in with_head.steps]  # other drafts
    with pytest.raises(EngineError, match="markov_head"):
        GenerationConfig(markov_head="no").validate()


def test_a_variant_sweep_measures_the_method_and_each_registry_variant(random_engine):
    sweep = variant_sweep(random_engine, "dspark", [PROMPT], max_new_tokens=16)
    assert list(sweep["rows"]) == ["dspark", "dspark_verify_all", "dspark_static_cut", "dspark_no_markov"]
    assert sweep["rows"]["dspark_no_markov"]["config"] == {"markov_head": False, "scheduler": "none"}
    for row in sweep["rows"].values():
        assert row["speedup"] > 0 and row["tau"] >= 1 and row["verify_ms_per_step"] > 0


def test_chi_square_pools_small_bins_and_gives_a_p_value():
    result = chi_square({"a": 50, "b": 50}, {"a": 0.5, "b": 0.5}, 100)
    assert result["statistic"] == 0 and result["p_value"] == 1.0 and result["dof"] == 1
    skewed = chi_square({"a": 80, "b": 20}, {"a": 0.5, "b": 0.5}, 100)
    assert skewed["statistic"] == 36 and skewed["p_value"] < 1e-6


def test_every_method_passes_the_distribution_check_and_a_broken_rule_fails_it(random_engine, monkeypatch):
    # temperature 0.5: the random target's distributions are flat at 1, too flat for bins of five samples. Two
    # lanes here (a serial and a block drafter); every lane of the embedded models passes in the shipped
    # recording (tests/app/test_lesson.py)
    check = distribution_check(random_engine, PROMPT, methods=["eagle3", "dspark"], samples=SAMPLES, temperature=0.5)
    assert set(check["lanes"]) == {"eagle3", "dspark"}
    for method, lane in check["lanes"].items():
        assert lane["dof"] >= 3 and lane["p_value"] > 0.001, (method, lane)

    def accept_everything(draft_ids, draft_probs, target_probs, generator):  # keeps the drafter's distribution
        return engine.sampling.VerdictParts(torch.tensor(draft_ids.numel()),
                                            engine.sampling.sample(target_probs[-1], generator), draft_ids,
                                            torch.ones(draft_ids.numel()), None)

    monkeypatch.setattr(engine.sampling, "rejection_parts", accept_everything)
    broken = distribution_check(random_engine, PROMPT, methods=["dflash"], samples=SAMPLES, temperature=0.5)
    assert broken["lanes"]["dflash"]["p_value"] < 0.001


@pytest.mark.parametrize("rule", ["rejection", "match"])
def test_argmax_proposals_pass_the_distribution_check_under_either_rule(random_engine, rule):
    check = distribution_check(random_engine, PROMPT, methods=["eagle3", "dflash"], samples=SAMPLES, temperature=0.5,
                               verify_rule=rule, proposal="argmax")
    for lane in check["lanes"].values():
        assert lane["dof"] >= 3 and lane["p_value"] > 0.001, lane


def test_argmax_proposals_judged_against_the_drafters_soft_distribution_fail_the_check(random_engine, monkeypatch):
    # the rule must divide by the point mass the proposal was; dividing by the drafter's softmax instead is the
    # bug this catches (on the drafter close to the target, whose argmax the target often takes)
    monkeypatch.setattr(engine.drafters.base.DraftBlock, "as_point_masses", lambda block: block)
    broken = distribution_check(random_engine, PROMPT, methods=["eagle3"], samples=SAMPLES, temperature=0.5,
                                proposal="argmax")
    assert broken["lanes"]["eagle3"]["p_value"] < 0.001


def test_argmax_proposals_draft_each_token_with_certainty(random_engine):
    from engine.contract.types import GenerationConfig

    result = random_engine.generate(PROMPT, GenerationConfig(method="dspark", max_new_tokens=16, temperature=1.0,
                                                             proposal="argmax"))
    drafted = [t for s in result.steps for t in s.drafted]
    assert drafted and all(t.draft_prob == 1.0 for t in drafted)
    assert all(t.accept_prob == pytest.approx(t.target_prob) for t in drafted if t.accept_prob is not None)
