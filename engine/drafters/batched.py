"""Drafters for a batch of requests (engine/batch.py): the drafter's passes batched over every live request.

A block drafter's backbone pass (DFlash, DSpark) runs once for the whole batch over a ragged draft cache
(engine/ragged.py); every request's drafts are then read from that pass by the single-request drafter's own heads,
run over all requests at once (`blocks_from_hidden`: DFlash's LM head, DSpark's Markov head one block position at
a time for every request together, and its confidence head), each request drawing from its own generator; its
scheduler then picks how much of each request's block to verify. So a batch drafts exactly what each request
would have drafted alone, up to the floating-point order of a batched product."""

from __future__ import annotations

import torch

from ..contract.survival import expected_tokens
from ..contract.types import EngineError, GenerationConfig
from ..models import new_cache
from ..sampling import logits_to_probs, pick
from ..ragged import RaggedCache, padded
from ..scheduler import DraftGate, batch_cut
from ..target import fused_forward, ragged_forward
from ..timing import SpanClock
from .base import DraftBlock, NoDrafter
from .dflash import DFlashDrafter
from .eagle3 import Eagle3Drafter, new_draft_cache
from .small_lm import SmallLMDrafter


class BatchDrafter:
    """What the batched loop asks of a drafter; `None` entries are requests that draft nothing this step."""

    target_layer_ids: list[int] | None = None
    max_drafts: int | None = None

    def start(self, prompt_ids: list[torch.Tensor], features: list[torch.Tensor | None], clock: SpanClock) -> None:
        """Requests join the batch, as its last rows: request b's prompt ids (n_b,) and the target's features of
        them, (n_b, F)."""

    def propose(self, committed: list[torch.Tensor], ks: list[int], temperature: float,
                generators: list[torch.Generator], clock: SpanClock) -> list[DraftBlock | None]:
        raise NotImplementedError

    def drafts_now(self, batch_size: int, config: GenerationConfig) -> bool:
        """Whether this step drafts at all (always, by default)."""
        return True

    def verify_lens(self, blocks: list[DraftBlock | None], config: GenerationConfig, clock: SpanClock) -> list[int]:
        """How many leading drafts of each request's block to send to the target (everything, by default)."""
        return [int(block.ids.numel()) if block is not None else 0 for block in blocks]

    def step_done(self, batch_size: int, drafted: bool, seconds: float, verified: int, committed: int) -> None:
        """The loop's measure of the step just done: requests in it, whether it drafted, its seconds, the tokens
        its verify forward read and the tokens it committed."""

    def accept(self, num_valid: list[int], features: list[torch.Tensor | None]) -> None:
        """After verification: request b's first num_valid[b] positions still stand (committed, or drafted and
        accepted); features[b] are the target's features of its anchor and accepted drafts (None for drafters that
        read none)."""

    def select(self, rows: list[int]) -> None:
        """Only the requests `rows` go on (the others finished)."""


class NoBatchDrafter(BatchDrafter):
    """The batched baseline: nothing drafted, one target forward writes one token per request."""

    max_drafts = 0
    label = NoDrafter.label

    def propose(self, committed, ks, temperature, generators, clock):
        raise AssertionError("the baseline never drafts")


class BlockBatchDrafter(BatchDrafter):
    """DFlash and DSpark: the block [anchor, MASK × (B − 1)] of every request in one backbone pass, each request's
    new context features appended to its row of one ragged draft cache."""

    def __init__(self, drafter: DFlashDrafter, device: torch.device, batch_cost=None):
        self.drafter = drafter
        self.batch_cost = batch_cost  # callable: (a, b) of a batched verify's t(N) = a + b·N (Engine.batch_verify_cost)
        self.last_step: tuple[float, int] | None = None  # the last drafting step's seconds and verified tokens
        self.gate = DraftGate()  # DSpark's scheduler in a batch: whether drafting pays at this load
        self.label = drafter.label
        self.target_layer_ids = drafter.target_layer_ids
        self.max_drafts = drafter.max_drafts
        self.cache = RaggedCache(new_cache(drafter.model), 0, device)
        self.device = device
        self.pending: list[torch.Tensor] = []  # per request: target features not yet in the draft cache, (p_b, F)
        self.catching_up = False  # the last pass also read context of steps that drafted nothing
        self.expected: float | None = None  # tokens this step's verify is expected to commit, from the confidences

    def start(self, prompt_ids, features, clock) -> None:
        """The joining requests' prompts read into their own draft cache rows now, beside the target's prefill (a
        pass with a one-token block, its output unused: the context's keys and values do not depend on the block),
        so a step's drafting pass only ever reads what the last step committed."""
        joining = RaggedCache(new_cache(self.drafter.model), len(features), self.device)
        with clock.span("draft", f"drafter reads {len(features)} joining prompts"):
            self._block_hidden(joining, features, [ids[-1] for ids in prompt_ids], 1)
        self.cache.extend(joining)
        self.pending += [f[:0] for f in features]

    def propose(self, committed, ks, temperature, generators, clock):
        # more context waiting than one step commits (its drafts and the bonus): steps went by without drafting
        # (DraftGate), and this pass also reads what they committed
        self.catching_up = max(p.shape[0] for p in self.pending) > (self.max_drafts or 0) + 1
        with clock.span("draft", f"one parallel pass over {len(committed)} blocks"):
            hidden = self._block_hidden(self.cache, self.pending, [c[-1] for c in committed],
                                        self.drafter.model.block_size)
            self.pending = [p[:0] for p in self.pending]
        anchors = torch.stack([c[-1] for c in committed])
        return self.drafter.blocks_from_hidden(hidden, anchors, ks, temperature, generators, clock)

    def drafts_now(self, batch_size, config) -> bool:
        """With DSpark's throughput scheduler and more than one request: drafting while it commits more tokens a
        second than the target alone, as measured at this batch size (scheduler.DraftGate). Alone, always."""
        confident = getattr(self.drafter.model, "confidence_head", None) is not None
        if config.scheduler != "throughput" or batch_size < 2 or not confident:
            return True
        return self.gate.should_draft(batch_size)

    def step_done(self, batch_size, drafted, seconds, verified, committed) -> None:
        # a drafting step's tokens as its confidences expected them: what drafting returns, without the luck of
        # which drafts happened to pass (a few requests' acceptances swing far from step to step)
        tokens = self.expected if drafted and self.expected is not None else committed
        self.expected = None
        self.gate.record(batch_size, drafted, seconds, tokens, settled=not (drafted and self.catching_up))
        if drafted:
            self.last_step = (seconds, verified)

    def verify_lens(self, blocks, config, clock) -> list[int]:
        """DSpark's scheduler: alone, each request's own rule (scheduler.verify_len, as in a single run); in a batch
        with the throughput rule, one length for the batch from every request's confidences and the batch's
        measured verify cost (scheduler.batch_cut)."""
        live = [block for block in blocks if block is not None]
        if config.scheduler == "throughput" and len(live) > 1 and self.batch_cost is not None \
                and all(block.confidences is not None for block in live):
            with clock.span("host", f"scheduler picks ℓ for {len(live)} requests"):
                fixed, per_token = self.batch_cost()
                if self.last_step is not None:  # what the last step cost whatever ℓ was, measured
                    seconds, tokens = self.last_step
                    fixed = max(seconds - per_token * tokens, fixed)
                # every request's confidences in one copy, kept on its block for the trace
                values = torch.cat([block.confidences.view(-1) for block in live]).tolist()
                confidences, at = [], 0
                for block in live:
                    confidences.append(values[at: at + block.confidences.numel()])
                    at += block.confidences.numel()
                    block.__dict__["confidence_values"] = confidences[-1]  # DraftBlock.confidence_values, read
                cut = batch_cut(confidences, (fixed, per_token))
                self.expected = (sum(expected_tokens(c, min(cut, len(c))) for c in confidences)
                                 + len(blocks) - len(live))  # a request that drafted nothing: its one token
            return [min(cut, int(block.ids.numel())) if block is not None else 0 for block in blocks]
        return [self.drafter.verify_len(block, config, clock) if block is not None else 0 for block in blocks]

    def accept(self, num_valid, features) -> None:
        # after the target's features of anchors and accepted drafts: what a step that drafted nothing left unread
        self.pending = [torch.cat([p, f]) for p, f in zip(self.pending, features)]

    def select(self, rows) -> None:
        self.cache.select(rows)
        self.pending = [self.pending[r] for r in rows]

    def _block_hidden(self, cache: RaggedCache, pending: list[torch.Tensor], anchors: list[torch.Tensor],
                      block_size: int) -> torch.Tensor:
        """(B, block_size, H): every request's block, [anchor, MASK × (block_size − 1)], with its new context
        (`pending`: request b's target features not yet in `cache`), one forward; `cache` then holds each request's
        committed context only (the blocks' own keys and values dropped)."""
        model = self.drafter.model
        batch = len(anchors)
        pending = [p.reshape(-1, p.shape[-1]) for p in pending]
        device = pending[0].device
        context = padded(pending, device)  # request b's new context first, padding after
        width = context.shape[1]
        count_list = [p.shape[0] for p in pending]  # host integers: the cache's bookkeeping reads nothing back
        counts = torch.tensor(count_list)
        cached = torch.tensor(cache.lengths)
        block = torch.full((batch, block_size), model.mask_token_id, dtype=torch.long, device=device)
        block[:, 0] = torch.stack([a.view(()) for a in anchors])
        # keys: the cached context (each request's own), its new context (not the padding), and the whole block,
        # which attends both ways
        context_slots = torch.arange(width)[None, :] < counts[:, None]  # (B, P)
        sees = torch.cat([cache.visible(), context_slots, torch.ones(batch, block_size, dtype=torch.bool)], dim=1)
        positions = torch.cat([cached[:, None] + torch.arange(width)[None, :],
                               (cached + counts)[:, None] + torch.arange(block_size)[None, :]], dim=1)
        # no padding (one request, say): no mask, as the single-request drafter
        every_key = len(set(cache.lengths)) <= 1 and len(set(count_list)) == 1
        inputs = cache.inputs(None if every_key else sees[:, None, :].expand(-1, block_size, -1), positions)
        hidden = model(self.drafter.embed_tokens(block), context, inputs["position_ids"], cache.cache,
                       attention_mask=inputs.get("attention_mask"))
        cache.keep([list(range(n)) for n in count_list])
        return hidden


class SmallLMBatchDrafter(BatchDrafter):
    """Classic drafting for a batch: the small LM drafts one token for every request per forward, K forwards, over a
    ragged cache of its own (the serial loop the block drafters remove, now paid once per batch)."""

    def __init__(self, drafter: SmallLMDrafter, device: torch.device):
        self.drafter = drafter
        self.label = drafter.label
        self.cache = RaggedCache(new_cache(drafter.model), 0, device)
        self.device = device

    def start(self, prompt_ids, features, clock) -> None:
        with clock.span("draft", f"drafter prefill, {len(prompt_ids)} joining"):
            joining = RaggedCache(new_cache(self.drafter.model), len(prompt_ids), self.device)
            self._forward([p.tolist() for p in prompt_ids], joining)
            self.cache.extend(joining)

    def propose(self, committed, ks, temperature, generators, clock):
        # what each request's cache has not seen: its last bonus, and after a fully accepted block its last draft
        inputs = [c[n:].tolist() for c, n in zip(committed, self.cache.lengths)]
        drafts: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in committed]
        for i in range(max(ks)):
            with clock.span("draft", f"draft forward {i + 1}/{max(ks)}, {len(committed)} requests"):
                logits = self._forward(inputs, self.cache)
                inputs = []
                for b, (k, row) in enumerate(zip(ks, logits)):
                    probs = logits_to_probs(row, temperature)
                    # a request that needs no more drafts draws nothing (its generator stays as in a single run)
                    token = pick(probs, temperature, generators[b]) if i < k else probs.argmax()
                    if i < k:
                        drafts[b].append((token, probs))
                    inputs.append([int(token)])
        return [DraftBlock(torch.stack([t for t, _ in d]), torch.stack([p for _, p in d])) if d else None
                for d in drafts]

    def accept(self, num_valid, features) -> None:
        self.cache.truncate([min(n, held) for n, held in zip(num_valid, self.cache.lengths)])

    def select(self, rows) -> None:
        self.cache.select(rows)

    def _forward(self, rows: list[list[int]], cache: RaggedCache) -> torch.Tensor:
        """One forward of each request's new tokens (padded to the longest), all kept in `cache`; returns each
        request's logits at its last new token, (B, V)."""
        counts = [len(r) for r in rows]
        model = self.drafter.model
        logits, _ = ragged_forward(model, fused_forward(model), cache, padded(rows, self.device), counts, None)
        cache.keep([list(range(n)) for n in counts])
        return logits[torch.arange(len(rows)), torch.tensor(counts) - 1]


class Eagle3BatchDrafter(BatchDrafter):
    """EAGLE-3 for a batch: each request's new target features fed in one forward for the whole batch, then K − 1
    serial forwards, each drafting one token for every request from its own hidden state."""

    def __init__(self, drafter: Eagle3Drafter, device: torch.device):
        self.drafter = drafter
        self.model = drafter.model
        self.label = drafter.label
        self.target_layer_ids = drafter.target_layer_ids
        self.cache = RaggedCache(new_draft_cache(), 0, device)
        self.device = device
        self.pending: list[torch.Tensor] = []  # per request: target features not yet in the cache, (p_b, 3H)
        self.context: list[int] = []  # per request: cache entries built from target features

    def start(self, prompt_ids, features, clock) -> None:
        self.cache.extend(RaggedCache(new_draft_cache(), len(features), self.device))
        self.pending += features  # f_0..f_{N−1}; they pair with t_1..t_N, and t_N comes with the first propose
        self.context += [0] * len(features)

    def propose(self, committed, ks, temperature, generators, clock):
        model = self.model
        counts = [p.shape[0] for p in self.pending]
        with clock.span("draft", f"draft forward 1/{max(ks)}, {len(committed)} requests"):
            # request b: features f_c..f_{n−2} with tokens t_{c+1}..t_{n−1} at positions c..n−2
            tokens = padded([c[len(c) - n:] for c, n in zip(committed, counts)], self.device)
            features = padded(self.pending, self.device)
            inputs = self.cache.causal_inputs(counts)
            hidden = model(tokens, model.fc(features), inputs["position_ids"], self.cache.cache,
                           inputs.get("attention_mask"))
            self.cache.keep([list(range(n)) for n in counts])
            self.context = list(self.cache.lengths)
            self.pending = [p[:0] for p in self.pending]
            hidden = hidden[torch.arange(len(counts)), torch.tensor(counts) - 1][:, None]  # (B, 1, H)
            drafts = self._draw(hidden, ks, 0, temperature, generators, [[] for _ in committed])
            no_token = torch.zeros((), dtype=committed[0].dtype, device=self.device)
        for i in range(1, max(ks)):  # own hidden state and the previous draft, at the next position
            with clock.span("draft", f"draft forward {i + 1}/{max(ks)}, {len(committed)} requests"):
                inputs = self.cache.causal_inputs([1] * len(committed))
                # a request that drafts nothing more reads a stand-in token (on the device: no host tensor, and
                # one device for every row), whose row nobody reads
                last = torch.stack([d[-1][0] if d else no_token for d in drafts]).view(-1, 1)
                hidden = model(last, hidden, inputs["position_ids"], self.cache.cache, inputs.get("attention_mask"))
                self.cache.keep([[0]] * len(committed))
                drafts = self._draw(hidden, ks, i, temperature, generators, drafts)
        return [DraftBlock(torch.stack([t for t, _ in d]), torch.stack([p for _, p in d])) if d else None
                for d in drafts]

    def _draw(self, hidden, ks, i, temperature, generators, drafts):
        """Each request's draft i from its row of `hidden` (B, 1, H); a request that needs no more draws nothing
        and goes on with its last token."""
        logits = self.model.logits(hidden)[:, -1]
        for b, k in enumerate(ks):
            if i < k:
                probs = logits_to_probs(logits[b], temperature)
                drafts[b].append((pick(probs, temperature, generators[b]), probs))
        return drafts

    def accept(self, num_valid, features) -> None:
        # the serial steps' entries were built from the drafter's own hidden states: drop them; the target's
        # features of the anchor and the accepted tokens take their place at the next propose
        self.cache.truncate(self.context)
        self.pending = [torch.cat([p, f]) for p, f in zip(self.pending, features)]  # unread ones kept (nothing drafted)

    def select(self, rows) -> None:
        self.cache.select(rows)
        self.pending = [self.pending[r] for r in rows]
        self.context = [self.context[r] for r in rows]


def batched(drafter, device: torch.device, batch_cost=None) -> BatchDrafter:
    """The batch form of a single-request drafter (no request yet: they join through `start`), or one clear line
    where a method has none yet. batch_cost: the batch's verify cost model, for a scheduler
    (Engine.batch_verify_cost)."""
    if isinstance(drafter, NoDrafter):
        return NoBatchDrafter()
    # DSpark's and DeepSpec's DFlash too (drafters/deepspec.py); not the ablation without target features
    if isinstance(drafter, DFlashDrafter) and drafter.target_layer_ids is not None:
        return BlockBatchDrafter(drafter, device, batch_cost)
    if isinstance(drafter, Eagle3Drafter):
        return Eagle3BatchDrafter(drafter, device)
    if isinstance(drafter, SmallLMDrafter):
        return SmallLMBatchDrafter(drafter, device)
    raise EngineError(f"{drafter.label} does not run in a batch")
