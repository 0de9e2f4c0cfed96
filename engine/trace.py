"""The trace: what the device loop did, turned into plain values (engine/contract/types.py) for the app and files.

The device loop (run.py) yields one DeviceStep per step, still holding tensors; a Tracer turns each into a Step
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
from .tree import judged_nodes, row_table

TOP_K_SHOWN = 5  # tokens of each distribution kept in the trace for the app's charts


class PackedTrace:
    """A step's trace figures, gathered on the device and copied to the host in one copy: every drafted token's id,
    its drafter's probability, its accept probability and draw, and for the tokens judged (and the drafted ones
    shown) the target's probability, the distance ½‖p − q‖₁ and each distribution's top tokens. Made by the device
    loop at the end of its step (on CUDA the copy runs without waiting; the host work waits for that copy alone,
    never for the device's stream), read by the Tracer."""

    def __init__(self, block: DraftBlock, verdict: Verdict, target_probs: torch.Tensor, num_verified: int):
        k = block.ids.numel()
        self.k = k
        self.verdicts = [Tracer.verdict_of(i, verdict, num_verified) for i in range(k)]
        self.judged = [i for i, (was_judged, _) in enumerate(self.verdicts) if was_judged]
        self.shown = list(range(k)) if block.parents is None else self.judged  # tokens whose drafter's top is kept
        self.has_draws = verdict.draws is not None
        j = len(self.judged)
        if block.parents is None:  # a chain judges its first j tokens, each by row i: slices, no index from the host
            judging, judged_q, judged_ids = target_probs[:j], block.probs[:j], block.ids[:j]
            shown_q = block.probs
        else:
            # the judged nodes and their parents' rows, found on the device from the tree's rows and the verdict's
            parent_rows = block.parent_rows if block.parent_rows is not None else row_table(block.parents,
                                                                                             block.ids.device)
            nodes = judged_nodes(parent_rows, verdict.kept_rows, j)
            judging = target_probs.index_select(0, parent_rows.index_select(0, nodes + 1))
            judged_q, judged_ids = block.probs.index_select(0, nodes), block.ids.index_select(0, nodes)
            shown_q = judged_q
        top = min(TOP_K_SHOWN, target_probs.size(-1))
        target_top_p, target_top_ids = judging.topk(top, dim=-1)
        draft_top_p, draft_top_ids = shown_q.topk(top, dim=-1)
        pieces = [block.ids, block.probs.gather(1, block.ids.view(-1, 1)).view(-1), verdict.accept_probs.view(-1),
                  verdict.draws.view(-1) if self.has_draws else block.probs.new_zeros(0),
                  judging.gather(1, judged_ids.view(-1, 1)).view(-1),
                  0.5 * (judging - judged_q).abs().sum(dim=-1),
                  target_top_p, target_top_ids, draft_top_p, draft_top_ids]
        flat = torch.cat([piece.reshape(-1).to(torch.float64) for piece in pieces])
        self.sizes = [piece.numel() for piece in pieces]
        self.top = top
        self.ready = None
        if flat.device.type == "cuda":
            self.values = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
            self.values.copy_(flat, non_blocking=True)
            self.ready = torch.cuda.Event()
            self.ready.record()
        else:
            self.values = flat

    def read(self) -> list[list[float]]:
        """The figures on the host, in the order they were packed: waits for their copy only."""
        if self.ready is not None:
            self.ready.synchronize()
        values, out, at = self.values.tolist(), [], 0
        for size in self.sizes:
            out.append(values[at: at + size])
            at += size
        return out


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
    trace: PackedTrace | None = None  # the drafted tokens' figures, on their way to the host (None: nothing drafted)


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
            drafted = () if record.trace is None else self.drafted(record.trace, record.confidences)
            bonus_id = record.verdict.bonus_id if record.verdict is not None else record.kept_ids[0]
        parents = record.block.parents if record.block is not None else None
        return Step(record.index, record.kind, drafted, record.num_verified, a, bonus_id, committed,
                    self.clock.resolve(record.spans) + self.clock.take(), record.finish_reason, parents,
                    record.batch_size, record.batch_tokens)

    def _tops(self, probs: list[float], ids: list[float], rows: int, width: int) -> list[tuple[TopToken, ...]]:
        """Each row's likeliest tokens with their text, from the packed top-k figures."""
        return [tuple(TopToken(int(t), self.texts.token_text(int(t)), p)
                      for t, p in zip(ids[r * width:(r + 1) * width], probs[r * width:(r + 1) * width]))
                for r in range(rows)]

    def drafted(self, trace: PackedTrace, confidences: list[float] | None) -> tuple[DraftedToken, ...]:
        """The drafted tokens with their probabilities and verdicts, as plain values."""
        ids, draft_p, accept_p, draws, target_p, tv, t_top_p, t_top_ids, d_top_p, d_top_ids = trace.read()
        ids = [int(t) for t in ids]
        draws = draws if trace.has_draws else [None] * trace.k
        judged, width = trace.judged, trace.top
        judged_values = {i: (target_p[j], top, tv[j])
                         for j, (i, top) in enumerate(zip(judged, self._tops(t_top_p, t_top_ids, len(judged), width)))}
        # every drafted token of a chain keeps its drafter's top tokens; a tree's nodes off the judged path do not (up
        # to 64 a step, they would be most of a file, and of the host's work)
        draft_top = dict(zip(trace.shown, self._tops(d_top_p, d_top_ids, len(trace.shown), width)))
        tokens = []
        for i, (_, verdict_name) in enumerate(trace.verdicts):
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
