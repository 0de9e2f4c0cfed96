"""Sampling and verification: pure functions over tensors, every random draw from an explicit generator.

The three verification rules of a speculative step share one signature: given the K drafted ids, the
target's distributions at the K + 1 positions the verify forward scored (position k is the target's
prediction for drafted token k + 1; the last one is for the token after the whole block), decide how many
leading drafts survive and which token the target adds (the bonus).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def logits_to_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Softmax at the run's temperature; at temperature 0 the plain softmax, kept for display only."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    return torch.softmax(logits, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of a (..., V) probability tensor."""
    flat = probs.reshape(-1, probs.size(-1))
    return torch.multinomial(flat, 1, generator=generator).view(probs.shape[:-1])


def pick(probs: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """The next token: argmax at temperature 0 (the softmax keeps the argmax), else a sample."""
    return probs.argmax(dim=-1) if temperature == 0 else sample(probs, generator)


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one drafted block. Tensors stay on the device until the trace is built."""

    num_accepted: int
    bonus_id: int
    accept_probs: torch.Tensor  # (K,) chance each drafted token passes given its prefix, under this rule
    draws: torch.Tensor | None  # (K,) uniforms the rejection rule compared with accept_probs
    # A tree's verdict (engine/tree.py): the accepted nodes from the anchor down, and every node the rule decided
    # on, in the order it did. None for a chain, whose accepted drafts are its first num_accepted.
    path: tuple[int, ...] | None = None
    judged: tuple[int, ...] | None = None
    # The committed tokens: the accepted drafts and the bonus, on the host (read with the verdict, in one copy) and
    # on the device (where the committed ids grow without a copy from the host)
    committed_ids: tuple[int, ...] = ()
    committed: torch.Tensor | None = None
    # A tree's verify rows that stand (the anchor's, then each accepted node's), on the device: what the caches keep
    kept_rows: torch.Tensor | None = None


@dataclass(frozen=True)
class VerdictParts:
    """A chain's verdict while it is still on the device: the accepted count (0-d), the bonus token (0-d or (1,)),
    the drafts it judged, and the rule's accept probabilities and draws. `read_verdicts` brings any number of them to
    the host in one copy."""

    num_accepted: torch.Tensor
    bonus: torch.Tensor
    draft_ids: torch.Tensor
    accept_probs: torch.Tensor
    draws: torch.Tensor | None


def read_verdicts(parts: list[VerdictParts]) -> list[Verdict]:
    """Every verdict's accepted count, bonus and drafts (to know the accepted ones' ids) leave the device in one
    small copy, however many there are; each one's committed tokens stay on the device too."""
    pieces = [torch.cat([p.num_accepted.view(1).long(), p.bonus.view(1).long(), p.draft_ids.view(-1).long()])
              for p in parts]
    values = torch.cat(pieces).tolist() if pieces else []
    verdicts, at = [], 0
    for p, piece in zip(parts, pieces):
        a, bonus_id = values[at], values[at + 1]
        committed_ids = (*values[at + 2: at + 2 + a], bonus_id)
        at += piece.numel()
        committed = torch.cat([p.draft_ids.view(-1)[:a].long(), p.bonus.view(1).long()])
        verdicts.append(Verdict(a, bonus_id, p.accept_probs, p.draws, committed_ids=committed_ids,
                                committed=committed))
    return verdicts


def _leading_true(mask: torch.Tensor) -> torch.Tensor:
    """Length of the run of True at the start of a 1-D bool tensor, as a 0-d tensor (no host sync)."""
    return mask.int().cumprod(dim=0).sum()


def verify_greedy(draft_ids: torch.Tensor, target_probs: torch.Tensor) -> Verdict:
    """Temperature 0: accept while the draft equals the target's argmax; the bonus is the target's argmax
    at the first mismatch (or after the block). Output equals target-only greedy decoding."""
    return read_verdicts([greedy_parts(draft_ids, target_probs)])[0]


def greedy_parts(draft_ids: torch.Tensor, target_probs: torch.Tensor) -> VerdictParts:
    """verify_greedy's verdict, left on the device."""
    target_ids = target_probs.argmax(dim=-1)
    matches = draft_ids == target_ids[:-1]
    num_accepted = _leading_true(matches)
    return VerdictParts(num_accepted, target_ids.gather(0, num_accepted.view(1)), draft_ids, matches.float(), None)


def verify_greedy_batch(tokens: torch.Tensor, counts: torch.Tensor, logits: torch.Tensor
                        ) -> tuple[list[int], list[int], list[list[int]]]:
    """verify_greedy for a whole batch in a few tensor operations: row b of `tokens` (B, S) is request b's anchor and
    drafts, its first counts[b] slots real and the rest padding, and `logits` (B, S, V) the target's over them.
    Returns each request's number of accepted drafts and its bonus token, the same as verify_greedy's row by row
    (the same softmax and argmax: its ties broken alike), and the rows of `tokens`: all read in one copy."""
    target_ids = logits_to_probs(logits, 0.0).argmax(dim=-1)  # (B, S)
    slots = torch.arange(tokens.shape[1] - 1, device=tokens.device)
    matches = (tokens[:, 1:] == target_ids[:, :-1]) & (slots[None, :] < counts[:, None] - 1)  # padding never matches
    num_accepted = matches.int().cumprod(dim=1).sum(dim=1)
    bonus_ids = target_ids.gather(1, num_accepted[:, None])[:, 0]
    batch = tokens.shape[0]
    values = torch.cat([num_accepted.long(), bonus_ids.long(), tokens.reshape(-1).long()]).tolist()
    width = tokens.shape[1]
    rows = [values[2 * batch + b * width: 2 * batch + (b + 1) * width] for b in range(batch)]
    return values[:batch], values[batch: 2 * batch], rows


def verify_rejection(draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor,
                     generator: torch.Generator) -> Verdict:
    """The rejection rule's verdict (rejection_parts), read."""
    return read_verdicts([rejection_parts(draft_ids, draft_probs, target_probs, generator)])[0]


def rejection_parts(draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor,
                    generator: torch.Generator) -> VerdictParts:
    """Speculative sampling (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
    Decoding", Algorithm 1): accept d_k with probability min(1, p(d_k) / q(d_k)), p the target and q the
    draft distribution; at the first rejection resample from normalize(max(p - q, 0)); when every draft
    passes, sample the bonus from p after the block. The output is distributed exactly as the target's."""
    k = draft_ids.numel()
    positions = torch.arange(k, device=draft_ids.device)
    p = target_probs[positions, draft_ids]
    q = draft_probs[positions, draft_ids]
    accept_probs = torch.clamp(p / q, max=1.0)
    draws = torch.rand(k, generator=generator, device=draft_ids.device)
    num_accepted = _leading_true(draws < accept_probs)  # stays on the device: the bonus is drawn there too
    at = num_accepted.view(1)
    p_next = target_probs.index_select(0, at)[0]  # the row after the accepted drafts: k when every draft passed
    q_next = torch.cat([draft_probs, draft_probs.new_zeros(1, draft_probs.shape[-1])]).index_select(0, at)[0]
    residual = torch.clamp(p_next - q_next, min=0.0)  # p itself after a block that passed whole (q's row is 0)
    # The residual is never all zero after a real rejection; guard against rounding anyway.
    residual_sum = residual.sum()
    next_probs = torch.where(residual_sum > 0, residual / residual_sum.clamp_min(1e-30), p_next / p_next.sum())
    return VerdictParts(num_accepted, sample(next_probs, generator), draft_ids, accept_probs, draws)


def verify_match(draft_ids: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """The match rule's verdict (match_parts), read."""
    return read_verdicts([match_parts(draft_ids, target_probs, generator)])[0]


def match_parts(draft_ids: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator) -> VerdictParts:
    """The match rule of the z-lab DFlash loop: the target samples its own token at every position; accept
    while the draft equals that sample; emit the target's sample at the first mismatch. Lossless whatever
    the drafter did, but it accepts less than the rejection rule at temperature > 0."""
    k = draft_ids.numel()
    target_ids = sample(target_probs, generator)
    num_accepted = _leading_true(draft_ids == target_ids[:-1])
    positions = torch.arange(k, device=draft_ids.device)
    return VerdictParts(num_accepted, target_ids.gather(0, num_accepted.view(1)), draft_ids,
                        target_probs[positions, draft_ids], None)


def verify(rule: str, temperature: float, draft_ids: torch.Tensor, draft_probs: torch.Tensor,
           target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """Dispatch on the run's rule; temperature 0 always verifies greedily."""
    return read_verdicts([verify_parts(rule, temperature, draft_ids, draft_probs, target_probs, generator)])[0]


def verify_parts(rule: str, temperature: float, draft_ids: torch.Tensor, draft_probs: torch.Tensor,
                 target_probs: torch.Tensor, generator: torch.Generator) -> VerdictParts:
    """verify's verdict, left on the device (a batch reads every request's at once)."""
    if temperature == 0:
        return greedy_parts(draft_ids, target_probs)
    if rule == "rejection":
        return rejection_parts(draft_ids, draft_probs, target_probs, generator)
    if rule == "match":
        return match_parts(draft_ids, target_probs, generator)
    raise ValueError(f"unknown verification rule {rule!r}")
