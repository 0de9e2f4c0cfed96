"""Lossless above temperature 0, checked by counting: every method's first two new tokens, sampled over many
seeds, against the target's own exact probabilities.

At temperature > 0 each lane writes a different text from the baseline (each run draws its own sample), so
"the output is the target's" cannot be checked by comparing texts. It is a statement about distributions:
the pair (x1, x2) of a run's first two new tokens must be distributed as p(x1) · p(x2 | x1), the target's own.
x1 comes from the prefill (the target alone); x2 from the first speculative step, where one drafted token is
verified: accepted with probability min(1, p/q), else replaced from the residual. A chi-square test compares
the counts over `samples` seeds with those exact probabilities; a rule that is not lossless (a test breaks
one on purpose) fails it.
"""

from __future__ import annotations

import torch

from ..contract.types import EngineError, GenerationConfig
from ..sampling import logits_to_probs

MIN_EXPECTED = 5.0  # the usual chi-square rule: bins expected to hold fewer samples are pooled into one


def target_pair_probs(engine, prompt: str, temperature: float, min_prob: float) -> dict[tuple[int, int], float]:
    """The target's exact p(x1) · p(x2 | x1) for every pair whose probability reaches `min_prob` (one target
    forward for the prompt, one more for each first token that can reach it)."""
    ids = engine.encode_prompt(prompt)
    with torch.inference_mode():
        first = logits_to_probs(engine.target(torch.tensor([ids], device=engine.device)).logits[0, -1], temperature)
        pairs = {}
        for x1 in (first >= min_prob).nonzero().flatten().tolist():
            p1 = float(first[x1])
            logits = engine.target(torch.tensor([ids + [x1]], device=engine.device)).logits[0, -1]
            second = logits_to_probs(logits, temperature) * p1
            for x2 in (second >= min_prob).nonzero().flatten().tolist():
                pairs[(x1, x2)] = float(second[x2])
    return pairs


def chi_square(counts: dict, expected_probs: dict, samples: int) -> dict:
    """Pearson's statistic over the bins of `expected_probs` (each expected ≥ MIN_EXPECTED) and one bin for
    everything else; the p-value from the chi-square distribution with (bins − 1) degrees of freedom."""
    bins = {key: p * samples for key, p in expected_probs.items() if p * samples >= MIN_EXPECTED}
    observed = {key: counts.get(key, 0) for key in bins}
    rest_expected = samples - sum(bins.values())
    rest_observed = samples - sum(observed.values())
    statistic = sum((observed[key] - e) ** 2 / e for key, e in bins.items())
    dof = len(bins) - 1
    if rest_expected >= MIN_EXPECTED:
        statistic += (rest_observed - rest_expected) ** 2 / rest_expected
        dof += 1
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(statistic / 2, dtype=torch.float64))) if dof > 0 else 1.0
    return {"statistic": round(statistic, 3), "dof": dof, "p_value": round(p_value, 4), "bins": len(bins)}


def distribution_check(engine, prompt: str, methods: list[str] | None = None, samples: int = 200,
                       temperature: float = 1.0, verify_rule: str = "rejection", seed: int = 0,
                       shown: int = 8, proposal: str = "auto", stop=None) -> dict:
    """Every method's first two new tokens over `samples` seeds (seed, seed + 1, ...) against the target's
    exact probabilities. Returns, per method, the chi-square test and the `shown` likeliest pairs with their
    counts; with the pairs' texts and the target's probabilities, for the page. stop: a threading.Event seen
    after every step (engine.contract.types.Stopped once it is set)."""
    if temperature <= 0:
        raise EngineError("the distribution check samples: it needs a temperature above 0")
    methods = methods or engine.methods()
    exact = target_pair_probs(engine, prompt, temperature, MIN_EXPECTED / samples / 4)
    likeliest = sorted(exact, key=exact.get, reverse=True)[:shown]
    lanes = {}
    for method in methods:
        counts: dict[tuple[int, int], int] = {}
        for i in range(samples):
            # three new tokens, one drafted: x1 from the prefill, then a step that drafts x2 and verifies it (a
            # run never drafts for its last token, which only the target's bonus can fill)
            config = GenerationConfig(method=method, max_new_tokens=3, temperature=temperature, seed=seed + i,
                                      drafts_per_step=1, verify_rule=verify_rule, proposal=proposal)
            pair = tuple(engine.generate(prompt, config, stop).output_ids[:2])
            counts[pair] = counts.get(pair, 0) + 1
        lanes[method] = {**chi_square(counts, exact, samples), "counts": [counts.get(p, 0) for p in likeliest]}
    text = engine.texts.token_text
    return {"prompt": prompt, "samples": samples, "temperature": temperature, "verify_rule": verify_rule,
            "proposal": proposal,
            "pairs": [[text(a), text(b)] for a, b in likeliest], "target_probs": [round(exact[p], 5) for p in likeliest],
            "lanes": lanes, "device": engine.device_name}
