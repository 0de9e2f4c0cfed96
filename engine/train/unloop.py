"""An optional last phase of the target (`python -m engine.train target --unloop-steps N`): unlikelihood
training against its own greedy loops. The shipped target ends with 100 steps of the "tails" rule after it grows
(scripts/train_family.sh: loops 15% -> 3%); the "ngrams" rule took so much repetition away that the target's
text was far harder to draft (docs/experiments.md).

A small language model decoded greedily falls into loops: the same line again and again (`self.pid = None`
eight times after a docstring). The fix here is sequence-level unlikelihood training (Welleck et al., "Neural
Text Generation with Unlikelihood Training", ICLR 2020): let the model continue prompts greedily, pick tokens of
its continuation, and lower the probability of exactly those, −log(1 − p(token | context)), while the usual
next-token loss on corpus text keeps it a language model. Which tokens (`rule`): "ngrams", as the paper, every
token that completes an n-gram the continuation already holds (n = 4); "tails", only the tokens of a loop under
way, as the model card counts loops. On the one-cycle target, 200 steps: loops 15% -> 2% for +0.07 nats of
held-out loss with "ngrams", 15% -> 0% for +0.02 with "tails", which keeps more of the ordinary repetition of
code that drafters rightly draft (docs/experiments.md).

Batches come from `lm.train`: the first rows corpus windows, the last `num_loop_rows` the target's greedy
continuations (PREFIX_TOKENS of prompt, then its own text). Only the continuation is penalised.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

NGRAM = 4
MIN_PROB_LEFT = 1e-5  # log(1 − p) is clamped here: a token already at p ≈ 1 gives a large, finite loss


def repeated_ngram_mask(rows: torch.Tensor, start: int, n: int = NGRAM) -> torch.Tensor:
    """(b, t) bool: True at position i ≥ start + n − 1 when the n tokens ending at i already occurred, in
    that order, inside rows[start:i] (n-grams overlapping the prompt part before `start` do not count)."""
    mask = torch.zeros(rows.shape, dtype=torch.bool)
    for r, row in enumerate(rows.tolist()):
        seen: set[tuple[int, ...]] = set()
        for i in range(start + n - 1, len(row)):
            gram = tuple(row[i - n + 1: i + 1])
            if gram in seen:
                mask[r, i] = True
            seen.add(gram)
    return mask


def loop_tail_mask(rows: torch.Tensor, start: int) -> torch.Tensor:
    """(b, t) bool: True at position i when the continuation up to i ends in a loop under way, as the model card
    counts loops (card.is_loop: its last LOOP_WINDOW tokens repeat with a short period). Ordinary repetition
    (another `self.` line, an argument list written again) stays unpenalised."""
    from .card import is_loop

    mask = torch.zeros(rows.shape, dtype=torch.bool)
    for r, row in enumerate(rows.tolist()):
        for i in range(start, len(row)):
            mask[r, i] = is_loop(row[start: i + 1])
    return mask


RULES = {"tails": loop_tail_mask, "ngrams": repeated_ngram_mask}


def unlikelihood(logits: torch.Tensor, ids: torch.Tensor, penalised: torch.Tensor) -> torch.Tensor:
    """Mean −log(1 − p(ids[i] | ids[:i])) over the positions i where `penalised` is True.
    logits (b, t, V) of a forward over ids (b, t); penalised (b, t) bool (position 0 is never penalised)."""
    p = F.softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # p of the token at i
    mask = penalised[:, 1:].to(p.dtype)
    return -(torch.log((1 - p).clamp_min(MIN_PROB_LEFT)) * mask).sum() / mask.sum().clamp_min(1)


def unloop_loss(model, num_loop_rows: int, prefix_tokens: int, rule: str = "tails",
                alpha: float = 1.0) -> Callable[[torch.Tensor], torch.Tensor]:
    """Next-token cross-entropy on the corpus rows of a batch plus `alpha` times the unlikelihood of the tokens
    `rule` picks in the last `num_loop_rows` rows (greedy continuations after `prefix_tokens`): "tails", the
    tokens of loops under way (loop_tail_mask); "ngrams", every token completing a repeated n-gram (Welleck et al.)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, not {rule!r}")

    def loss(x: torch.Tensor) -> torch.Tensor:
        corpus, loops = x[:-num_loop_rows], x[-num_loop_rows:]
        penalised = RULES[rule](loops.cpu(), prefix_tokens).to(x.device)
        return model(corpus, labels=corpus).loss + alpha * unlikelihood(model(loops).logits, loops, penalised)

    return loss
