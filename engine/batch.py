"""Many requests at once: the speculative loop over a batch, one target forward verifying every request's drafts.

The single-request loop (engine/loop.py) with a batch dimension and nothing else new. Each step, every live
request drafts (one batched drafter pass where the drafter has one, drafters/batched.py), the target reads each
request's anchor and drafts in one forward over a ragged cache (engine/ragged.py: each request its own length,
positions and mask), and each request accepts its own number of drafts under the same rules (sampling.verify).
A request that finishes leaves the batch. At temperature 0 each request's output equals its own single-request
greedy run.

What a busy server sees is what this measures: with B requests in the batch a verify forward reads
B × (1 + drafts) tokens, so each extra drafted token costs the batch, not only its own request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .contract.methods import method as method_entry
from .contract.types import EngineError, GenerationConfig
from .drafters.batched import batched
from .loop import drafts_this_step, finish_reason
from .models import forward_with_features, new_cache
from .ragged import RaggedCache, padded
from .sampling import logits_to_probs, pick, verify, verify_greedy_batch
from .timing import SpanClock

MAX_BATCH = 64  # requests decoded together at most (the KV caches grow with it; docs/benchmarks.md)


@dataclass(frozen=True)
class RequestResult:
    """One request of a batch: what it wrote and, step by step, how many tokens it sent to the target and how
    many of them were accepted (plain values)."""

    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    finish_reason: str
    verified: tuple[int, ...]  # drafted tokens sent to the target at each decode step
    accepted: tuple[int, ...]  # of those, accepted

    @property
    def tau(self) -> float:
        """Tokens committed per verify step (accepted drafts and the target's own token): the papers' τ."""
        return (sum(self.accepted) + len(self.accepted)) / max(len(self.accepted), 1)


@dataclass(frozen=True)
class BatchResult:
    method: str
    requests: tuple[RequestResult, ...]
    wall_s: float  # the whole batch, prefill included
    draft_s: float
    verify_s: float
    steps: int  # batched steps (each one target forward), the prefill not counted

    @property
    def num_new_tokens(self) -> int:
        return sum(len(r.output_ids) for r in self.requests)

    @property
    def tokens_per_s(self) -> float:
        return self.num_new_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def tau(self) -> float:
        """τ over every request's steps."""
        steps = sum(len(r.accepted) for r in self.requests)
        return (sum(sum(r.accepted) for r in self.requests) + steps) / max(steps, 1)

    @property
    def verified_per_request(self) -> float:
        """Drafted tokens each request sent to the target per step, on average: what a scheduler chooses."""
        steps = sum(len(r.verified) for r in self.requests)
        return sum(sum(r.verified) for r in self.requests) / max(steps, 1)


@dataclass
class _Request:
    ids: list[int]  # prompt and output so far
    num_prompt: int
    generator: torch.Generator
    finish_reason: str | None = None
    verified: list[int] | None = None
    accepted: list[int] | None = None


def generate_batch(engine, prompts: list[str], config: GenerationConfig) -> BatchResult:
    """Decode `prompts` together with `config` (every request the same settings, each its own generator seeded
    with config.seed). Chains only: a tree method raises EngineError with one line."""
    config.validate()
    if not 1 <= len(prompts) <= MAX_BATCH:
        raise EngineError(f"a batch holds 1 to {MAX_BATCH} requests, got {len(prompts)}")
    if method_entry(config.method).tree:
        raise EngineError(f"{config.method} drafts trees, which do not run in a batch; choose its chain method")
    drafter = engine.new_drafter(config.method, config)
    drafter.prepare(config)
    prompt_ids = [engine.encode_prompt(p) for p in prompts]
    confident = getattr(getattr(drafter, "model", None), "confidence_head", None) is not None  # DSpark
    if config.scheduler == "throughput" and confident and len(prompts) > 1:
        engine.batch_verify_cost()  # its scheduler's cost model: measured once per machine, before any clock starts
    return _BatchLoop(engine, config, batched(drafter, len(prompts), engine.device, engine.batch_verify_cost)).run(
        prompt_ids)


class _BatchLoop:
    """The device work of one batch: prefill, then draft / verify / accept until every request has finished."""

    def __init__(self, engine, config: GenerationConfig, drafter):
        self.engine = engine
        self.config = config
        self.drafter = drafter
        self.device = engine.device
        self.clock = SpanClock(engine.device)
        self.proposal_temperature = 0.0 if config.proposes == "argmax" else config.temperature

    @torch.inference_mode()
    def run(self, prompt_ids: list[list[int]]) -> BatchResult:
        start = time.perf_counter()
        requests = [_Request(list(ids), len(ids), torch.Generator(self.device).manual_seed(self.config.seed), None,
                             [], []) for ids in prompt_ids]
        cache = RaggedCache(new_cache(self.engine.target), len(requests), self.device)
        self._prefill(requests, cache)
        live = list(range(len(requests)))  # indices into requests of the batch's rows, in order
        steps = 0
        while True:
            rows = [i for i in live if requests[i].finish_reason is None]
            if not rows:
                break
            if rows != live:  # finished requests leave the batch
                keep = [live.index(i) for i in rows]
                cache.select(keep)
                self.drafter.select(keep)
                live = rows
            self._step([requests[i] for i in live], cache)
            steps += 1
        spans = self.clock.resolve(self.clock.take())
        return BatchResult(self.config.method, tuple(RequestResult(tuple(r.ids[: r.num_prompt]),
                                                                   tuple(r.ids[r.num_prompt:]), r.finish_reason,
                                                                   tuple(r.verified), tuple(r.accepted))
                                                     for r in requests), time.perf_counter() - start,
                           sum(s.end_s - s.start_s for s in spans if s.work == "draft"),
                           sum(s.end_s - s.start_s for s in spans if s.work == "verify"), steps)

    def _prefill(self, requests: list[_Request], cache: RaggedCache) -> None:
        """Every prompt in one forward; each request's first token, and the drafter's start. Logits only where some
        prompt ends (the vocabulary's projection at every prompt position would be most of a long prefill's work)."""
        config, clock = self.config, self.clock
        counts = [len(r.ids) for r in requests]
        ends = sorted({n - 1 for n in counts})
        with clock.span("verify", "target prefill"):
            logits, features = self._forward(cache, padded([r.ids for r in requests], self.device),
                                             cache.causal_inputs(counts), torch.tensor(ends, device=self.device))
            cache.keep([list(range(n)) for n in counts])
        firsts = [pick(logits_to_probs(logits[b, ends.index(n - 1)], config.temperature), config.temperature,
                       r.generator) for b, (r, n) in enumerate(zip(requests, counts))]
        self.drafter.start([torch.tensor(r.ids, device=self.device) for r in requests],
                           [features[b, :n] if features is not None else None for b, n in enumerate(counts)], clock)
        for r, first in zip(requests, firsts):
            self._append(r, [int(first)])

    def _step(self, batch: list[_Request], cache: RaggedCache) -> None:
        """One step for the live requests: draft, verify every request's drafts in one forward, commit."""
        config, drafter, clock = self.config, self.drafter, self.clock
        step_start = time.perf_counter()
        ks = [drafts_this_step(config, drafter.max_drafts, len(r.ids) - r.num_prompt, len(r.ids),
                               self.engine.context_length) for r in batch]
        blocks = [None] * len(batch)
        if any(ks):
            committed = [torch.tensor(r.ids, device=self.device) for r in batch]
            blocks = drafter.propose(committed, ks, self.proposal_temperature, [r.generator for r in batch], clock)
            if self.proposal_temperature != config.temperature:  # argmax proposals above 0: q is a point mass
                blocks = [b.as_point_masses() if b is not None else None for b in blocks]
        checked = [block if block is None or n == block.ids.numel() else block.head(n)
                   for block, n in zip(blocks, drafter.verify_lens(blocks, config, clock))]
        with clock.span("verify", f"target verify, {len(batch)} requests"):
            inputs = [[r.ids[-1], *(c.ids.tolist() if c is not None else [])] for r, c in zip(batch, checked)]
            counts, tokens = [len(x) for x in inputs], padded(inputs, self.device)
            logits, features = self._forward(cache, tokens, cache.causal_inputs(counts))
            accepted, bonuses = self._verdicts(batch, checked, tokens, counts, logits)
        with clock.span("host", "roll back caches, commit"):
            cache.keep([list(range(1 + n)) for n in accepted])
            drafter.accept([len(r.ids) + n for r, n in zip(batch, accepted)],
                           [features[b, : 1 + n] if features is not None else None for b, n in enumerate(accepted)])
            for r, c, n, bonus in zip(batch, checked, accepted, bonuses):
                r.verified.append(len(c.ids) if c is not None else 0)
                r.accepted.append(n)
                self._append(r, [*(c.ids[:n].tolist() if c is not None else []), bonus])
        drafter.last_step = (time.perf_counter() - step_start, sum(counts))

    def _verdicts(self, batch: list[_Request], checked: list, tokens: torch.Tensor, counts: list[int],
                  logits: torch.Tensor) -> tuple[list[int], list[int]]:
        """Each request's accepted drafts and bonus token under the run's rule: at temperature 0 for the whole batch
        at once (sampling.verify_greedy_batch), above it request by request with its own generator."""
        config = self.config
        if config.temperature == 0:
            return verify_greedy_batch(tokens, torch.tensor(counts, device=self.device), logits)
        accepted, bonuses = [], []
        for b, (r, c, n) in enumerate(zip(batch, checked, counts)):
            target_probs = logits_to_probs(logits[b, :n], config.temperature)
            ids = c.ids if c is not None else target_probs.new_empty(0, dtype=torch.long)
            probs = c.probs if c is not None else target_probs[:0]
            verdict = verify(config.verify_rule, config.temperature, ids, probs, target_probs, r.generator)
            accepted.append(verdict.num_accepted)
            bonuses.append(verdict.bonus_id)
        return accepted, bonuses

    def _forward(self, cache: RaggedCache, tokens: torch.Tensor, inputs: dict, logits_at: torch.Tensor | int = 0):
        """One target forward over the batch's new tokens (B, S), each row padded to the longest; logits at every
        position, or only at `logits_at` (positions, the same for every row)."""
        return forward_with_features(self.engine.target, tokens, cache.cache, self.drafter.target_layer_ids,
                                     logits_at, **inputs)

    def _append(self, r: _Request, new_ids: list[int]) -> None:
        """Append tokens, stopping at end-of-text, max_new_tokens or the context limit (loop.finish_reason)."""
        engine = self.engine
        for token_id in new_ids:
            r.ids.append(int(token_id))
            r.finish_reason = finish_reason(int(token_id), len(r.ids), r.num_prompt, engine.eos_id,
                                            self.config.max_new_tokens, engine.context_length)
            if r.finish_reason is not None:
                return
