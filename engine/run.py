"""One speculative loop for every method; the baseline is its degenerate case (nothing drafted).

Invariant, kept by explicit lengths: with n tokens committed (prompt + output), the target's KV cache
holds the first n - 1 of them; the newest committed token is the anchor fed first in the next verify
forward, followed by the K drafted tokens. After verification the cache is cropped back to the committed
length minus one, and the drafter is told how many positions are still valid. A tree draft (engine/tree.py) is
the same step with an ancestor-only mask: the cache then keeps the anchor's entry and its accepted path's.

A `Run` reads the models it runs from its engine (engine/loop.py `Engine`: the weights, the tokenizer, the target
and drafter factories); the run's own are its state, the device loop and the appending.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .background import BackgroundSteps
from .batch import traced_steps
from .contract.types import GenerationConfig, Request, RunResult, Step, check_stop
from .drafters.base import DraftBlock, Drafter
from .online import long_output_options
from .rules import drafts_this_step, finish_reason
from .sampling import logits_to_probs, pick, verify
from .timing import SpanClock
from .trace import DeviceStep, PackedTrace, Tracer, build_result
from .tree import verify_tree


@dataclass
class _RunState:
    """What the device loop carries from step to step."""

    committed_ids: torch.Tensor  # (1, n) prompt and output so far
    num_prompt: int
    max_new_tokens: int
    finish_reason: str | None = None

    @property
    def num_new(self) -> int:
        return self.committed_ids.shape[1] - self.num_prompt


class Run:
    """Runs over one engine's models (engine/loop.py Engine): each takes a checked request (engine/contract/types.py
    Request: its prompt encoded, its config validated and capped) as it is, then drafts, verifies and keeps step by
    step on the device, appending what it commits to its state."""

    def __init__(self, engine):
        self.engine = engine

    def stream(self, request: Request) -> Iterator[Step]:
        """Run one generation, yielding each step (the prefill first) as soon as it completes."""
        drafter = self.prepare(request.config)
        yield from self._run(list(request.prompt_ids), request.config, drafter)

    def generate(self, request: Request, stop=None) -> RunResult:
        """Run to completion and return the whole trace with its summary; the result's config is the request's,
        what ran. stop: a threading.Event seen after every step; once set, the run ends and raises Stopped."""
        drafter = self.prepare(request.config)
        prompt_ids = list(request.prompt_ids)
        steps, run = [], self._run(prompt_ids, request.config, drafter)
        try:
            for step in run:
                steps.append(step)
                check_stop(stop)
        finally:
            run.close()
        return build_result(self.engine, prompt_ids, request.config, steps, drafter.label)

    def prepare(self, config: GenerationConfig) -> Drafter:
        """The run's drafter, with its one-time costs paid before any clock starts (the request was checked)."""
        drafter = self.engine.new_drafter(config.method, config)
        if config.drafter_window is not None or config.self_tuning:  # the feature drafters' options (engine/online.py)
            drafter = long_output_options(drafter, config)
        drafter.prepare(config)  # one-time costs (DSpark's verify-speed profile) before any clock starts
        return drafter

    def _run(self, prompt_ids: list[int], config: GenerationConfig, drafter: Drafter) -> Iterator[Step]:
        """Device work (draft, verify, cache bookkeeping) and host work (the trace, the text) of each step.
        With config.overlap the device loop runs in its own thread, a step or two ahead, so the host work
        of step i happens while step i + 1 drafts and verifies; without it they alternate."""
        clock = SpanClock(self.engine.device)
        tracer = Tracer(self.engine.texts, clock.fork(sync=False))  # host work: its own span list, and no device syncs
        device_steps = self.device_steps(prompt_ids, config, drafter, clock)
        if config.requests_at_once == 1:  # CUDA graphs captured here, before the overlap's device thread starts
            self.engine.graphed(drafter.target_layer_ids, len(prompt_ids) + config.max_new_tokens)
        overlap = config.overlap if config.overlap is not None else self.engine.device.type == "cuda"
        records = BackgroundSteps(device_steps, name="speclab-device-loop") if overlap else device_steps
        try:
            for record in records:
                yield tracer.step(record)
        finally:
            records.close()

    @torch.inference_mode()
    def device_steps(self, prompt_ids: list[int], config: GenerationConfig, drafter: Drafter,
                     clock: SpanClock) -> Iterator[DeviceStep]:
        """The control flow of decoding: everything the next step depends on, and nothing else."""
        if config.requests_at_once > 1:  # this request among others: the batched loop's steps (engine/batch.py)
            yield from traced_steps(self.engine, prompt_ids, config, drafter, clock)
            return
        generator = torch.Generator(self.engine.device).manual_seed(config.seed)
        ids = torch.tensor([prompt_ids], device=self.engine.device)
        state = _RunState(ids, len(prompt_ids), config.max_new_tokens)
        target = self.engine.new_target(drafter.target_layer_ids, len(prompt_ids) + config.max_new_tokens)
        vocab_size = self.engine.target.config.vocab_size

        with clock.span("verify", "target prefill"):
            logits, features = target.prefill(ids)
            first = pick(logits_to_probs(logits[0, -1], config.temperature), config.temperature, generator).view(1)
        drafter.start(ids, features, clock)
        kept = self._append(state, first.tolist(), first)
        yield DeviceStep(0, "prefill", None, None, None, 0, None, kept, state.finish_reason, clock.take())

        index = 1
        proposal_temperature = 0.0 if config.proposes == "argmax" else config.temperature
        while state.finish_reason is None:
            num_committed = state.committed_ids.shape[1]  # the cache holds all of them but the newest, the anchor
            # 1. draft: K tokens (a chain) or a tree of nodes; the scheduler may verify fewer
            k = self._drafts_this_step(config, state, drafter)
            if k:
                block = drafter.propose(state.committed_ids, k, proposal_temperature, generator, clock)
                if proposal_temperature != config.temperature:  # argmax proposals above 0: q is a point mass
                    block = block.as_point_masses()
            else:  # the baseline, or a last step with room for one token only
                block = DraftBlock(state.committed_ids.new_empty(0),
                                   torch.empty(0, vocab_size, device=self.engine.device))
            num_verified = drafter.verify_len(block, config, clock) if k else 0
            checked = block if num_verified == block.ids.numel() else block.head(num_verified)
            confidences = block.confidence_values  # read once: the scheduler's read, if it made one
            # 2. verify: the anchor and the checked drafts in one target forward
            with clock.span("verify", f"target verify, a tree of {num_verified} nodes" if block.is_tree
                            else "target verify"):
                verify_ids = torch.cat([state.committed_ids[:, -1:], checked.ids.view(1, -1)], dim=1)
                tree = (checked.parents, checked.parent_rows) if block.is_tree else ()  # a tree: its shape
                logits, features = target.verify(verify_ids, *tree)
                target_probs = logits_to_probs(logits[0], config.temperature)
                # 3. accept: the rule's verdict, how many drafts stand and the target's own token
                verdict = judge(config, checked, target_probs, generator)
            # 4. commit: the caches keep the anchor and what was accepted; the tokens join the output
            with clock.span("host", "roll back caches, commit"):
                a = verdict.num_accepted
                nodes = list(range(a)) if verdict.path is None else list(verdict.path)  # the accepted drafts
                rows = [0, *(node + 1 for node in nodes)]  # the verify's rows that stand: the anchor's and theirs
                kept_rows = verdict.kept_rows  # a tree's: on the device with its verdict, the entries' and features' index
                if verdict.path is not None and kept_rows is None:
                    kept_rows = torch.tensor(rows, device=self.engine.device)
                target.keep(num_committed - 1, rows, kept_rows)
                if features is not None:  # a chain's are its first rows: a slice, no index from the host
                    features = features[:, : a + 1] if verdict.path is None else features[:, kept_rows]
                drafter.accept(num_committed + a, features)
                kept = self._append(state, list(verdict.committed_ids), verdict.committed)
                # the step's figures for its trace, gathered here and sent to the host in one copy
                trace = PackedTrace(block, verdict, target_probs, len(checked.ids)) if block.ids.numel() else None
            yield DeviceStep(index, "decode", block, verdict, target_probs, len(checked.ids), confidences, kept,
                             state.finish_reason, clock.take(), trace=trace)
            index += 1

    def _drafts_this_step(self, config: GenerationConfig, state: _RunState, drafter: Drafter) -> int:
        return drafts_this_step(config, drafter.max_drafts, state.num_new, state.committed_ids.shape[1],
                                self.engine.context_length)

    def _append(self, state: _RunState, new_ids: list[int], on_device: torch.Tensor) -> list[int]:
        """Append new tokens (`new_ids` on the host, the same on the device), stopping at end-of-text,
        max_new_tokens or the context limit; returns those kept."""
        kept = []
        for token_id in new_ids:
            kept.append(token_id)
            state.finish_reason = finish_reason(token_id, state.committed_ids.shape[1] + len(kept), state.num_prompt,
                                                self.engine.eos_id, state.max_new_tokens,
                                                self.engine.context_length)
            if state.finish_reason is not None:
                break
        kept_tensor = on_device[: len(kept)].view(1, -1).to(state.committed_ids.dtype)
        state.committed_ids = torch.cat([state.committed_ids, kept_tensor], dim=1)
        return kept


def judge(config: GenerationConfig, checked: DraftBlock, target_probs: torch.Tensor, generator: torch.Generator):
    """The verdict on the drafts sent to the target: a tree's walk (engine/tree.py) or a chain's rule
    (engine/sampling.py), at the run's temperature."""
    if checked.is_tree:
        return verify_tree(config.temperature, checked.ids, checked.probs, checked.parents, target_probs, generator,
                           checked.host_ids, checked.parent_rows)
    return verify(config.verify_rule, config.temperature, checked.ids, checked.probs, target_probs, generator)
