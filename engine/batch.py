"""Many requests at once: the speculative loop over a batch, one target forward verifying every request's drafts.

The single-request loop (engine/run.py) with a batch dimension and nothing else new. Each step, every live
request drafts (one batched drafter pass where the drafter has one, drafters/batched.py), the target reads each
request's anchor and drafts in one forward over one cache for all of them (target/batch.py BatchTarget: each request
its own length, positions and mask), and each request accepts its own number of drafts under the same rules (sampling.verify).
A request that finishes leaves the batch, and the next waiting request joins it (its prompt prefilled, its rows
appended): a serving engine's continuous batching, which keeps the batch full. At temperature 0 each request's
output equals its own single-request greedy run.

What a busy server sees is what this measures: with B requests in the batch a verify forward reads
B × (1 + drafts) tokens, so each extra drafted token costs the batch, not only its own request.

Two ways in: `generate_batch` decodes a list of prompts and returns plain per-request values (the bench);
`traced_steps` decodes one request among others and yields that request's steps for its trace (a Compare lane
with requests at once above 1: the loop's own DeviceSteps, each step the batch's).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch

from .contract.methods import method as method_entry
from .contract.presets import load_prompts
from .contract.types import MAX_REQUESTS_AT_ONCE, EngineError, GenerationConfig
from .drafters.base import DraftBlock
from .drafters.batched import batched
from .rules import drafts_this_step, finish_reason
from .sampling import Verdict, greedy_parts, logits_to_probs, pick, read_verdicts, verify_greedy_batch, verify_parts
from .target import BatchTarget, batch_target_for
from .timing import SpanClock
from .trace import DeviceStep, PackedTrace

MAX_BATCH = MAX_REQUESTS_AT_ONCE  # requests decoded together at most (the KV caches grow with it; docs/benchmarks.md)


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
    steps: int  # batched steps (each one target forward), the prefills not counted
    requests_at_once: int = 0  # requests decoded at once at most
    # While all `requests_at_once` places were taken (a server's steady state, before the last requests drain): the
    # tokens every request committed and the seconds it took, the joining requests' prefills included
    full_tokens: int = 0
    full_s: float = 0.0

    @property
    def num_new_tokens(self) -> int:
        return sum(len(r.output_ids) for r in self.requests)

    @property
    def tokens_per_s(self) -> float:
        return self.num_new_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def steady_tokens_per_s(self) -> float | None:
        """New tokens per second while the batch was full (None if it never was)."""
        return self.full_tokens / self.full_s if self.full_s > 0 else None

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


@dataclass(eq=False)  # one request is equal to itself only (`in`, `index`)
class _Request:
    ids: list[int]  # prompt and output so far
    num_prompt: int
    generator: torch.Generator
    finish_reason: str | None = None
    verified: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)


def _batch_loop(engine, config: GenerationConfig, requests_at_once: int, drafter=None, clock: SpanClock | None = None):
    """The loop for `config` with at most `requests_at_once` requests at once, or one clear line (EngineError): a tree
    method or another without a batch form (methods.Method.batched), a number of requests at once out of range.
    `drafter`: the run's single-request drafter, prepared (made here if None)."""
    config.validate()
    if not 1 <= requests_at_once <= MAX_BATCH:
        raise EngineError(f"requests at once must be from 1 to {MAX_BATCH}, got {requests_at_once}")
    if method_entry(config.method).tree:
        raise EngineError(f"{config.method} drafts trees, which do not run in a batch: run it with requests at once 1, "
                          "or batch its chain method")
    if not method_entry(config.method).batched:  # the registry says which methods have a batch form
        raise EngineError(f"{config.method} does not run in a batch: run it with requests at once 1")
    if drafter is None:
        drafter = engine.new_drafter(config.method, config)
        drafter.prepare(config)
    confident = getattr(getattr(drafter, "model", None), "confidence_head", None) is not None  # DSpark
    if config.scheduler == "throughput" and confident and requests_at_once > 1:
        engine.batch_verify_cost()  # its scheduler's cost model: measured once per machine, before any clock starts
    return _BatchLoop(engine, config, batched(drafter, engine.device, engine.batch_verify_cost), requests_at_once,
                      clock)


def generate_batch(engine, prompts: list[str], config: GenerationConfig,
                   requests_at_once: int | None = None) -> BatchResult:
    """Decode `prompts` with `config` (every request the same settings, each its own generator seeded with
    config.seed), at most `requests_at_once` at once (default: all of them): as one finishes, the next joins."""
    if not prompts:
        raise EngineError("a batch needs at least one prompt")
    loop = _batch_loop(engine, config, len(prompts) if requests_at_once is None else requests_at_once)
    requests = [loop.request(engine.encode_prompt(p)) for p in prompts]
    start, spans, steps = time.perf_counter(), [], 0
    full_tokens, full_s, since = 0, 0.0, start  # each step timed from the one before: joiners' prefills included
    for kind in loop.run(iter(requests)):
        spans.extend(loop.clock.resolve(loop.clock.take()))
        if kind == "decode":
            steps += 1
            now, committed = time.perf_counter(), loop.take_committed()
            if loop.size == loop.requests_at_once:
                full_tokens, full_s = full_tokens + committed, full_s + now - since
            since = now
    return BatchResult(config.method, tuple(RequestResult(tuple(r.ids[: r.num_prompt]), tuple(r.ids[r.num_prompt:]),
                                                          r.finish_reason, tuple(r.verified), tuple(r.accepted))
                                            for r in requests), time.perf_counter() - start,
                       sum(s.end_s - s.start_s for s in spans if s.work == "draft"),
                       sum(s.end_s - s.start_s for s in spans if s.work == "verify"), steps, loop.requests_at_once,
                       full_tokens, full_s)


def traced_steps(engine, prompt_ids: list[int], config: GenerationConfig, drafter, clock: SpanClock) -> Iterator:
    """One request (`prompt_ids`) decoded among config.requests_at_once: the others are the held-out prompts with
    the same settings, cycled, each replaced as it finishes, so the batch stays full while this request runs.
    Yields this request's DeviceSteps (engine/trace.py) as the single loop does, each carrying the batch's size
    and what every request committed during it; ends when this request finishes."""
    loop = _batch_loop(engine, config, config.requests_at_once, drafter, clock)
    traced = loop.request(prompt_ids)
    companions = companion_prompts(engine, prompt_ids, config.max_new_tokens)
    others = (loop.request(ids) for ids in itertools.cycle(companions))
    index = 0
    for _ in loop.run(itertools.chain([traced], others), traced):
        if loop.record is None:  # others joined: their prefill is part of this request's next step
            continue
        yield loop.record.step(index, clock.take())
        loop.record = None
        index += 1
        if traced.finish_reason is not None:
            return


def companion_prompts(engine, prompt_ids: list[int], max_new_tokens: int) -> list[list[int]]:
    """The held-out prompts, tokenized, that leave room in the model's context for `max_new_tokens` (or at least
    as much as `prompt_ids` leaves); the prompt itself where none does."""
    longest = max(engine.context_length - max_new_tokens, len(prompt_ids))
    fitting = []
    for prompt in load_prompts():
        try:
            ids = engine.encode_prompt(prompt)
        except EngineError:  # longer than the whole context
            continue
        if len(ids) <= longest:
            fitting.append(ids)
    return fitting or [list(prompt_ids)]


@dataclass
class _Record:
    """What the traced request did in one step of the batch (the DeviceStep's fields but the index and spans)."""

    kind: str
    block: DraftBlock | None
    verdict: Verdict | None
    target_probs: torch.Tensor | None
    num_verified: int
    confidences: list[float] | None
    kept: list[int]
    finish_reason: str | None
    batch_size: int
    batch_tokens: int

    def step(self, index: int, spans: tuple) -> DeviceStep:
        trace = None
        if self.block is not None and self.block.ids.numel():
            trace = PackedTrace(self.block, self.verdict, self.target_probs, self.num_verified)
        return DeviceStep(index, self.kind, self.block, self.verdict, self.target_probs, self.num_verified,
                          self.confidences, self.kept, self.finish_reason, spans, self.batch_size, self.batch_tokens,
                          trace)


class _BatchLoop:
    """The device work of a batch: prefill the requests that join, then draft / verify / accept for the live ones,
    until every request has finished. `clock` times the batch's work (a new one by default)."""

    def __init__(self, engine, config: GenerationConfig, drafter, requests_at_once: int,
                 clock: SpanClock | None = None):
        self.engine = engine
        self.config = config
        self.drafter = drafter
        self.requests_at_once = requests_at_once
        self.device = engine.device
        self.clock = clock or SpanClock(engine.device)
        self.proposal_temperature = 0.0 if config.proposes == "argmax" else config.temperature
        self.traced: _Request | None = None  # the request whose steps are recorded (traced_steps)
        self.record: _Record | None = None  # what it did in the last step or prefill
        self.committed = 0  # tokens committed by every request since the last record
        self.size = 0  # requests in the batch's last step

    def request(self, prompt_ids: list[int]) -> _Request:
        return _Request(list(prompt_ids), len(prompt_ids), torch.Generator(self.device).manual_seed(self.config.seed))

    @torch.inference_mode()
    def run(self, waiting: Iterable[_Request], traced: _Request | None = None) -> Iterator[str]:
        """Decode the `waiting` requests (an iterator, read as places free up), yielding "prefill" after requests
        joined and "decode" after each step of the batch; `traced`: the request to record."""
        waiting, self.traced = iter(waiting), traced
        target = batch_target_for(self.engine.target, self.engine.fused_target, self.drafter.target_layer_ids,
                                  self.device, self.requests_at_once)
        live: list[_Request] = []
        while True:
            if any(r.finish_reason is not None for r in live):  # finished requests leave the batch
                rows = [b for b, r in enumerate(live) if r.finish_reason is None]
                target.select(rows)
                self.drafter.select(rows)
                live = [live[b] for b in rows]
            joining = list(itertools.islice(waiting, self.requests_at_once - len(live)))
            if joining:  # they join at the end; one may finish at its first token and leave at once
                self._prefill(joining, target)
                live += joining
                yield "prefill"
            elif not live:
                return
            else:
                self.size = len(live)
                self._step(live, target)
                yield "decode"

    def _prefill(self, requests: list[_Request], target: BatchTarget) -> None:
        """The joining requests' prompts in one forward, into rows appended to the batch's cache; each request's
        first token, and the drafter's start on them. Logits only where some prompt ends (the vocabulary's
        projection at every prompt position would be most of a long prefill's work)."""
        config, clock = self.config, self.clock
        counts = [len(r.ids) for r in requests]
        with clock.span("verify", f"target prefill, {len(requests)} joining"):
            logits, ends, features = target.join([r.ids for r in requests])
        firsts = [pick(logits_to_probs(logits[b, ends.index(n - 1)], config.temperature), config.temperature,
                       r.generator) for b, (r, n) in enumerate(zip(requests, counts))]
        self.drafter.start([torch.tensor(r.ids, device=self.device) for r in requests],
                           [features[b, :n] if features is not None else None for b, n in enumerate(counts)], clock)
        firsts = torch.stack(firsts).view(-1).tolist()  # every joining request's first token in one copy
        kept = [self._append(r, [first]) for r, first in zip(requests, firsts)]
        if self.traced in requests:
            traced = self.traced
            self.record = _Record("prefill", None, None, None, 0, None, kept[requests.index(traced)],
                                  traced.finish_reason, target.size, self.take_committed())

    def _step(self, batch: list[_Request], target: BatchTarget) -> None:
        """One step for the live requests: draft, verify every request's drafts in one forward, commit."""
        config, drafter, clock = self.config, self.drafter, self.clock
        step_start = time.perf_counter()
        ks = [drafts_this_step(config, drafter.max_drafts, len(r.ids) - r.num_prompt, len(r.ids),
                               self.engine.context_length) for r in batch]
        if any(ks) and not drafter.drafts_now(len(batch), config):  # the scheduler's call: drafting does not pay
            ks = [0] * len(batch)
        blocks = [None] * len(batch)
        if any(ks):
            committed = [torch.tensor(r.ids, device=self.device) for r in batch]
            blocks = drafter.propose(committed, ks, self.proposal_temperature, [r.generator for r in batch], clock)
            if self.proposal_temperature != config.temperature:  # argmax proposals above 0: q is a point mass
                blocks = [b.as_point_masses() if b is not None else None for b in blocks]
        checked = [block if block is None or n == block.ids.numel() else block.head(n)
                   for block, n in zip(blocks, drafter.verify_lens(blocks, config, clock))]
        with clock.span("verify", f"target verify, {len(batch)} requests"):
            counts = [1 + (c.ids.numel() if c is not None else 0) for c in checked]
            tokens = self._verify_rows(batch, checked, counts)
            logits, features = target.verify(tokens, counts)
            accepted, bonuses, drafted, verdicts = self._verdicts(batch, checked, tokens, counts, logits)
        with clock.span("host", "roll back caches, commit"):
            target.keep([list(range(1 + n)) for n in accepted])
            drafter.accept([len(r.ids) + n for r, n in zip(batch, accepted)],
                           [features[b, : 1 + n] if features is not None else None for b, n in enumerate(accepted)])
            kept = []
            for r, n, bonus, ids, count in zip(batch, accepted, bonuses, drafted, counts):
                r.verified.append(count - 1)
                r.accepted.append(n)
                kept.append(self._append(r, [*ids[:n], bonus]))
        drafter.step_done(len(batch), any(ks), time.perf_counter() - step_start, sum(counts), sum(map(len, kept)))
        if self.traced in batch:
            b = batch.index(self.traced)
            self._record_step(blocks[b], checked[b], logits[b, : counts[b]], verdicts[b] if verdicts else None,
                              kept[b], bonuses[b], len(batch))

    def _verify_rows(self, batch: list[_Request], checked: list, counts: list[int]) -> torch.Tensor:
        """(B, S): each request's anchor then its checked drafts, padded with 0, built on the device from the drafts
        there and the anchors sent in one copy."""
        tokens = torch.zeros(len(batch), max(counts), dtype=torch.long, device=self.device)
        tokens[:, 0] = torch.tensor([r.ids[-1] for r in batch], device=self.device)
        for b, c in enumerate(checked):
            if c is not None and c.ids.numel():
                tokens[b, 1: counts[b]] = c.ids
        return tokens

    def _record_step(self, block: DraftBlock | None, checked: DraftBlock | None, logits: torch.Tensor,
                     verdict: Verdict | None, kept: list[int], bonus: int, batch_size: int) -> None:
        """The traced request's step as the single loop records it (its verdict in full: at temperature 0 the
        batch's was reached without one; its figures are computed on the device, its outcome is the batch's)."""
        temperature, traced = self.config.temperature, self.traced
        target_probs = logits_to_probs(logits, temperature)
        if block is None:  # nothing drafted: the baseline, or a last step with room for one token only
            block = DraftBlock(torch.empty(0, dtype=torch.long, device=self.device), target_probs[:0])
        checked = checked if checked is not None else block
        if verdict is None:
            parts = greedy_parts(checked.ids, target_probs)
            verdict = Verdict(traced.accepted[-1], bonus, parts.accept_probs, None, committed_ids=tuple(kept))
        confidences = block.confidence_values
        self.record = _Record("decode", block, verdict, target_probs, int(checked.ids.numel()), confidences, kept,
                              traced.finish_reason, batch_size, self.take_committed())

    def _verdicts(self, batch: list[_Request], checked: list, tokens: torch.Tensor, counts: list[int],
                  logits: torch.Tensor) -> tuple[list[int], list[int], list[list[int]], list[Verdict] | None]:
        """Each request's accepted drafts, bonus token and drafts (its accepted ones' ids first) under the run's
        rule, and above temperature 0 its whole verdict, read from the device in one copy: at 0 for the whole batch
        at once (sampling.verify_greedy_batch), above it request by request with its own generator."""
        config = self.config
        if config.temperature == 0:
            accepted, bonuses, rows = verify_greedy_batch(tokens, torch.tensor(counts, device=self.device), logits)
            return accepted, bonuses, [row[1:] for row in rows], None
        parts = []
        for b, (r, c, n) in enumerate(zip(batch, checked, counts)):
            target_probs = logits_to_probs(logits[b, :n], config.temperature)
            ids = c.ids if c is not None else tokens[b, 1:1]
            probs = c.probs if c is not None else target_probs[:0]
            parts.append(verify_parts(config.verify_rule, config.temperature, ids, probs, target_probs, r.generator))
        verdicts = read_verdicts(parts)  # every request's verdict in one copy
        return ([v.num_accepted for v in verdicts], [v.bonus_id for v in verdicts],
                [list(v.committed_ids[:-1]) for v in verdicts], verdicts)

    def _append(self, r: _Request, new_ids: list[int]) -> list[int]:
        """Append tokens, stopping at end-of-text, max_new_tokens or the context limit (rules.finish_reason);
        returns those kept."""
        engine, kept = self.engine, []
        for token_id in new_ids:
            kept.append(int(token_id))
            r.ids.append(int(token_id))
            r.finish_reason = finish_reason(int(token_id), len(r.ids), r.num_prompt, engine.eos_id,
                                            self.config.max_new_tokens, engine.context_length)
            if r.finish_reason is not None:
                break
        self.committed += len(kept)
        return kept

    def take_committed(self) -> int:
        """Tokens every request committed since the last call."""
        committed, self.committed = self.committed, 0
        return committed
