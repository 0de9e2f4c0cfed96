"""Verification rules on hand-made distributions: exact decisions, and the output distribution of the
sampled rules checked against the target's with a chi-square test (fixed seed, so it is repeatable)."""

from __future__ import annotations

import pytest
import torch

from engine.sampling import (logits_to_probs, sample, verify, verify_greedy, verify_greedy_batch, verify_match,
                             verify_rejection)

CHI2_DF5_999 = 20.52  # 99.9% quantile of chi-square with 5 degrees of freedom (6 outcomes)
# A lossless rule fails a count with probability 0.001 whatever the number of trials. At 6,000 trials a rule whose
# first token is off by Cohen's w = sqrt(sum (p' - p)^2 / p) >= 0.086 fails it with probability >= 0.99
# (noncentral chi-square, lambda = 44); resampling without the residual is off by w = 0.29 (lambda = 490 here, its
# statistic about 24 times the quantile, so the negative control below fails a broken rule with certainty).
TRIALS = 6_000

# A toy vocabulary of 6 tokens, two drafted positions plus the bonus position. The target's distribution
# depends only on the position, so every emitted token should follow the target's row for its position.
TARGET = torch.tensor([[0.05, 0.40, 0.10, 0.25, 0.15, 0.05],
                       [0.30, 0.05, 0.05, 0.20, 0.10, 0.30],
                       [0.10, 0.10, 0.50, 0.10, 0.10, 0.10]])
DRAFT = torch.tensor([[0.30, 0.10, 0.30, 0.10, 0.10, 0.10],
                      [0.10, 0.40, 0.10, 0.10, 0.20, 0.10]])


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def emitted_token_counts(rule) -> tuple[torch.Tensor, torch.Tensor]:
    """Counts of the first emitted token, and of the second one in the steps that emit it. Every trial's drafts
    are drawn up front in one call (the same distribution as a draw per trial); the rule runs once per trial."""
    generator = torch.Generator().manual_seed(1234)
    drafts = sample(DRAFT.expand(TRIALS, *DRAFT.shape), generator)
    first, second = [], []
    for draft_ids in drafts:
        verdict = rule(draft_ids, generator)
        emitted = draft_ids[: verdict.num_accepted].tolist() + [verdict.bonus_id]
        first.append(emitted[0])
        if len(emitted) > 1:
            second.append(emitted[1])
    vocab = DRAFT.size(-1)
    return (torch.bincount(torch.tensor(first), minlength=vocab).float(),
            torch.bincount(torch.tensor(second), minlength=vocab).float())


def test_rejection_rule_output_follows_the_target():
    first, second = emitted_token_counts(lambda d, g: verify_rejection(d, DRAFT, TARGET, g))
    assert chi_square(first, TARGET[0]) < CHI2_DF5_999
    assert chi_square(second, TARGET[1]) < CHI2_DF5_999


def test_chi_square_catches_a_rule_without_the_residual():
    """Negative control: resampling from p instead of normalize(max(p - q, 0)) is biased, and the test sees it."""

    def broken(draft_ids, generator):
        verdict = verify_rejection(draft_ids, DRAFT, TARGET, generator)
        if verdict.num_accepted < len(draft_ids):
            bonus = int(sample(TARGET[verdict.num_accepted], generator))
            return type(verdict)(verdict.num_accepted, bonus, verdict.accept_probs, verdict.draws)
        return verdict

    first, _ = emitted_token_counts(broken)
    assert chi_square(first, TARGET[0]) > 5 * CHI2_DF5_999


def test_match_rule_output_follows_the_target():
    first, second = emitted_token_counts(lambda d, g: verify_match(d, TARGET, g))
    assert chi_square(first, TARGET[0]) < CHI2_DF5_999
    assert chi_square(second, TARGET[1]) < CHI2_DF5_999


def test_rejection_accepts_more_than_match_at_equal_distributions():
    """With q = p the rejection rule accepts every draft; the match rule only when the samples agree."""
    generator = torch.Generator().manual_seed(0)
    accepted_rejection = accepted_match = 0
    for _ in range(500):
        draft_ids = sample(TARGET[:2], generator)
        accepted_rejection += verify_rejection(draft_ids, TARGET[:2], TARGET, generator).num_accepted
        accepted_match += verify_match(draft_ids, TARGET, generator).num_accepted
    assert accepted_rejection == 1000
    assert accepted_match < 600


def test_greedy_accepts_the_matching_prefix_and_adds_the_argmax():
    target = torch.full((4, 6), 0.01)
    target[0, 2] = target[1, 5] = target[2, 1] = target[3, 4] = 0.9
    verdict = verify_greedy(torch.tensor([2, 5, 3]), target)
    assert (verdict.num_accepted, verdict.bonus_id) == (2, 1)
    verdict = verify_greedy(torch.tensor([2, 5, 1]), target)
    assert (verdict.num_accepted, verdict.bonus_id) == (3, 4)
    verdict = verify_greedy(torch.tensor([0, 5, 1]), target)
    assert (verdict.num_accepted, verdict.bonus_id) == (0, 2)
    assert verdict.accept_probs.tolist() == [0.0, 1.0, 1.0]


def test_greedy_over_a_batch_gives_each_row_what_greedy_gives_it_alone():
    """Ragged rows (an anchor alone, drafts that all match, padding the argmax would match, tied logits): the
    batched verdicts equal verify_greedy's on each row's own slots."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 4, 7, generator=generator)
    logits[4, 1, 2] = logits[4, 1, 5] = 9.0  # a tie: the first index wins in both
    target = logits.argmax(dim=-1)
    tokens = torch.randint(0, 7, (5, 4), generator=generator)
    tokens[1, 1:] = target[1, :-1]  # every draft matches
    tokens[2, 1:3] = target[2, :2]  # two match, then padding that matches too: never accepted
    tokens[2, 3] = target[2, 2]
    tokens[4, 1] = target[4, 0]  # one draft, matching: the bonus is the tied position's
    counts = [1, 4, 3, 2, 2]
    accepted, bonuses, rows = verify_greedy_batch(tokens, torch.tensor(counts), logits)
    assert rows == tokens.tolist()
    alone = [verify_greedy(tokens[b, 1:n], logits_to_probs(logits[b, :n], 0.0)) for b, n in enumerate(counts)]
    assert accepted == [v.num_accepted for v in alone] and bonuses == [v.bonus_id for v in alone]
    assert accepted[:3] == [0, 3, 2] and accepted[4] == 1 and bonuses[1] == int(target[1, 3]) and bonuses[4] == 2


def test_rejection_accept_probability_is_min_one_ratio():
    verdict = verify_rejection(torch.tensor([1, 0]), DRAFT, TARGET, torch.Generator().manual_seed(0))
    expected = [min(1.0, 0.40 / 0.10), min(1.0, 0.30 / 0.10)]
    assert verdict.accept_probs.tolist() == pytest.approx(expected)
    assert all(0.0 <= u < 1.0 for u in verdict.draws.tolist())


def test_empty_block_samples_the_bonus_from_the_target():
    generator = torch.Generator().manual_seed(5)
    counts = torch.zeros(6)
    for _ in range(TRIALS // 4):
        verdict = verify("rejection", 1.0, torch.empty(0, dtype=torch.long), torch.empty(0, 6), TARGET[:1], generator)
        assert verdict.num_accepted == 0
        counts[verdict.bonus_id] += 1
    assert chi_square(counts, TARGET[0]) < CHI2_DF5_999


def test_temperature_zero_always_verifies_greedily():
    target = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]])
    for rule in ("rejection", "match"):
        verdict = verify(rule, 0.0, torch.tensor([1]), torch.tensor([[0.0, 1.0, 0.0]]), target, torch.Generator())
        assert (verdict.num_accepted, verdict.bonus_id) == (1, 0)


def test_logits_to_probs_applies_temperature():
    logits = torch.tensor([0.0, 1.0, 2.0])
    assert torch.allclose(logits_to_probs(logits, 0.0), torch.softmax(logits, -1))
    assert torch.allclose(logits_to_probs(logits, 2.0), torch.softmax(logits / 2, -1))
    assert logits_to_probs(logits, 0.5)[2] > logits_to_probs(logits, 1.0)[2]
