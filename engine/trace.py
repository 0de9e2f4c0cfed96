"""The trace: what the device loop did, turned into plain values (engine/contract/types.py) for the app and files.

The device loop (loop.py) yields one DeviceStep per step, still holding tensors; a Tracer turns each into a Step
on the host (the drafted tokens with their probabilities and verdicts, the committed tokens with their text,
the step's measured spans), and `build_result` gathers a whole run into a RunResult.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .contract.summary import per_position_acceptance, summarize
from .contract.types import CommittedToken, DraftedToken, GenerationConfig, RunResult, Step, TopToken
from .drafters.base import DraftBlock
from .sampling import Verdict
from .text import TokenTexts
from .timing import SpanClock

TOP_K_SHOWN = 5  # tokens of each distribution kept in the trace for the app's charts


@dataclass
class DeviceStep:
    """What the device loop hands to the host work for one step (tensors not yet turned into values)."""

    index: int
    kind: str
    block: DraftBlock | None  # everything drafted (None for the prefill)
    verdict: Verdict | None
    target_probs: torch.Tensor | None
    num_verified: int
    confidences: list[float] | None
    kept_ids: list[int]  # tokens committed by this step, cut at a stop
    finish_reason: str | None  # set on the run's last step: why it ended
    spans: tuple  # the device clock's spans, resolved by the host work (SpanClock.resolve)
    batch_size: int = 1  # requests in the batch that verified this step (engine/batch.py)
    batch_tokens: int | None = None  # tokens every request of that batch committed during it; None when alone


class Tracer:
    """The host work of one run: each DeviceStep becomes a Step, its text decoded incrementally, the work timed on
    the host clock (its own span list, no device syncs)."""

    def __init__(self, texts: TokenTexts, clock: SpanClock):
        self.texts = texts
        self.decoder = texts.decoder()
        self.clock = clock

    def step(self, record: DeviceStep) -> Step:
        """The step's trace as plain values and its text."""
        with self.clock.span("host", "trace and text"):
            pieces = [self.decoder.push(t) for t in record.kept_ids]
            if record.finish_reason is not None:
                pieces[-1] += self.decoder.finish()
            a = record.verdict.num_accepted if record.verdict is not None else 0
            committed = tuple(CommittedToken(t, piece, "accepted" if i < a else "bonus")
                              for i, (t, piece) in enumerate(zip(record.kept_ids, pieces)))
            drafted = () if record.block is None else self.drafted(
                record.block, record.verdict, record.target_probs, record.num_verified, record.confidences)
            bonus_id = record.verdict.bonus_id if record.verdict is not None else record.kept_ids[0]
        parents = record.block.parents if record.block is not None else None
        return Step(record.index, record.kind, drafted, record.num_verified, a, bonus_id, committed,
                    self.clock.resolve(record.spans) + self.clock.take(), record.finish_reason, parents,
                    record.batch_size, record.batch_tokens)

    def top(self, probs: torch.Tensor) -> list[tuple[TopToken, ...]]:
        """Each row's TOP_K_SHOWN likeliest tokens with their text."""
        values, indices = probs.topk(min(TOP_K_SHOWN, probs.size(-1)), dim=-1)
        return [tuple(TopToken(i, self.texts.token_text(i), p) for i, p in zip(row_ids, row_probs))
                for row_ids, row_probs in zip(indices.tolist(), values.tolist())]

    def drafted(self, block: DraftBlock, verdict: Verdict, target_probs: torch.Tensor, num_verified: int,
                confidences: list[float] | None) -> tuple[DraftedToken, ...]:
        """The drafted tokens with their probabilities and verdicts, as plain values."""
        k = block.ids.numel()
        if k == 0:  # the baseline's steps, and a last step with room for the bonus only
            return ()
        ids = block.ids.tolist()
        draft_p = block.probs[torch.arange(k), block.ids].tolist()
        verdicts = [self.verdict_of(i, verdict, num_verified) for i in range(k)]
        judged = [i for i, (was_judged, _) in enumerate(verdicts) if was_judged]
        # the target's distribution each judged token was judged by (its parent's row of the verify forward)
        rows = block.target_rows(num_verified)
        judging = target_probs[[rows[i] for i in judged]]
        target_p = judging[torch.arange(len(judged)), block.ids[judged]].tolist()
        accept_p = verdict.accept_probs.tolist()
        draws = verdict.draws.tolist() if verdict.draws is not None else [None] * k
        # ½ Σ|p − q| per judged token: the rejection rule's acceptance ceiling (one small op, host side)
        tv = (0.5 * (judging - block.probs[judged]).abs().sum(dim=-1)).tolist()
        judged_values = {i: (target_p[j], top, tv[j]) for j, (i, top) in enumerate(zip(judged, self.top(judging)))}
        # every drafted token of a chain keeps its drafter's top tokens; a tree's nodes off the judged path do not (up
        # to 64 a step, they would be most of a file, and of the host's work)
        shown = list(range(k)) if block.parents is None else judged
        draft_top = dict(zip(shown, self.top(block.probs[shown])))
        tokens = []
        for i, (_, verdict_name) in enumerate(verdicts):
            target_prob, target_top, distance = judged_values.get(i, (None, (), None))
            judged_here = i in judged_values
            tokens.append(DraftedToken(
                id=ids[i], text=self.texts.token_text(ids[i]), verdict=verdict_name, draft_prob=draft_p[i],
                target_prob=target_prob, accept_prob=accept_p[i] if judged_here else None,
                draw=draws[i] if judged_here else None, target_top=target_top, draft_top=draft_top.get(i, ()),
                confidence=confidences[i] if confidences is not None else None, tv=distance))
        return tuple(tokens)

    @staticmethod
    def verdict_of(i: int, verdict: Verdict, num_verified: int) -> tuple[bool, str]:
        """Whether drafted token i was judged, and its verdict. A chain: the first rejected token is judged, later
        ones never are, and a scheduler's cut ones are not sent. A tree: the accepted path, the nodes the rule
        turned down on the way, and the rest (other branches) never judged."""
        if verdict.path is None:
            if i >= num_verified:
                return False, "cut"
            a = verdict.num_accepted
            return i <= a, "accepted" if i < a else "rejected" if i == a else "unverified"
        if i in verdict.path:
            return True, "accepted"
        return (True, "rejected") if i in verdict.judged else (False, "unverified")


def build_result(engine, prompt_ids: list[int], config: GenerationConfig, steps: list[Step],
                 drafter: str = "") -> RunResult:
    """A whole run of `engine` (loop.Engine) as one value: its steps, text, summary and what ran."""
    return RunResult(
        method=config.method,
        preset=engine.preset,
        device=engine.device_name,
        config=config,
        prompt_ids=tuple(prompt_ids),
        output_ids=tuple(t.id for s in steps for t in s.committed),
        text="".join(s.text for s in steps),
        prefill=steps[0],
        steps=tuple(steps[1:]),
        summary=summarize(steps),
        per_position_acceptance=per_position_acceptance(steps),
        drafter=drafter,
    )
