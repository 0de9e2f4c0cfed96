"""DeepSpec's checkpoints (kind "deepspec" in engine/contract/methods.py, `Qwen3DSparkModel`): its DSpark, and its
DFlash, which is the same network with no Markov head and no confidence head (`markov_rank` 0).

DSpark: one parallel backbone pass, then the Markov head samples the block left to right and the confidence head
scores each token; `verify_len` then lets the scheduler choose how much to verify. DeepSpec's DFlash is drafted the
same way with no Markov step, and everything it drafts is verified.

Faithful to the reference: the anchor's own state predicts the first drafted token, and the backbone
always runs the checkpoint's whole block (B positions) and keeps the first k. Cache bookkeeping is
DFlash's (the draft cache holds committed context only). The distribution each token was drawn from,
p_k ∝ exp(U_k + B(x_{k−1}, ·)), is the p_draft the rejection rule uses.
"""

from __future__ import annotations

import torch

from ..contract.types import EngineError, GenerationConfig
from ..sampling import logits_to_probs, pick
from ..scheduler import verify_len
from ..timing import SpanClock
from .base import DraftBlock
from .dflash import DFlashDrafter, block_words
from .dflash_model import load_block_model
from .dspark_model import DSparkDraftModel

_ARCHITECTURES = ("Qwen3DSparkModel", "DSparkDraftModel")


def recognises(config: dict) -> bool:
    return any(a in _ARCHITECTURES for a in config.get("architectures") or []) or "markov_rank" in config


def load(path: str, device: torch.device, dtype: torch.dtype, **hub):
    return load_block_model(DSparkDraftModel, path, device, dtype, **hub)


def owns(model) -> bool:
    return isinstance(model, DSparkDraftModel)


def build(model, engine) -> "DSparkDrafter":
    return DSparkDrafter(model, engine.target, engine.verify_steps_per_s)


class DSparkDrafter(DFlashDrafter):
    def __init__(self, model, target, verify_steps_per_s=None):
        super().__init__(model, target)
        self.max_drafts = model.block_size  # the anchor's own state predicts the first token
        self.verify_steps_per_s = verify_steps_per_s  # callable: SPS(n), profiled once by the engine
        self.use_markov_head = True  # GenerationConfig.markov_head: False drafts from the backbone's logits alone
        self.sampled_calibration = False  # the confidence calibration fitted at temperature 1 (for_sampling)
        layers, block = model.config.num_hidden_layers, block_words(model.block_size)
        if model.markov_head is None and model.confidence_head is None:
            self.label = f"DFlash (DeepSpec format), {layers} layers, {block}"
        else:
            head = model.markov_head.head_type if model.markov_head is not None else "no"
            self.label = f"DSpark, {layers} layers, {block}, {head} Markov head"

    def prepare(self, config: GenerationConfig) -> None:
        if self.model.markov_head is not None and not config.markov_head:  # the ablation: the backbone alone
            self.use_markov_head = False
            self.label += " (off in this run)"
        if config.scheduler == "throughput" and self.model.confidence_head is not None and self.verify_steps_per_s:
            self.verify_steps_per_s()  # profiled once, before any run's clock starts

    def for_sampling(self) -> bool:
        """Score tokens with the confidence calibration fitted at temperature 1, where the checkpoint has one (one set
        of weights serving both temperatures: only how sure the head may be that a token survives differs)."""
        model = self.model
        self.sampled_calibration = (model.confidence_head is not None
                                    and model.sampled_confidence_temperatures != model.confidence_temperatures)
        return self.sampled_calibration

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        with clock.span("draft", f"one parallel backbone pass over the block, keep {k}"):
            hidden = self.block_hidden(committed_ids)
        return self.block_from_hidden(hidden, committed_ids[0, -1], k, temperature, generator, clock)

    def blocks_from_hidden(self, hidden: torch.Tensor, anchor_ids: torch.Tensor, ks: list[int], temperature: float,
                           generators: list[torch.Generator], clock: SpanClock) -> list[DraftBlock | None]:
        """The heads over R blocks' hidden states (R, B, H) at once: the Markov head samples request r's ks[r]
        tokens left to right, every request's position together (each draw from its own generator), and the
        confidence head scores each token. A request with ks[r] = 0 drafts nothing (None)."""
        hidden = hidden[:, : max(ks)]  # the anchor's state predicts token 1
        markov = self.model.markov_head is not None and self.use_markov_head
        label = f"Markov head: {hidden.shape[1]} cheap serial steps" if markov else "sample"
        with clock.span("draft", label + (f" over {len(ks)} blocks" if len(ks) > 1 else "")):
            ids, probs = markov_sample(self.lm_head(hidden), anchor_ids, self._bias_step(hidden), temperature,
                                       generators, ks)
            confidences = None
            if self.model.confidence_head is not None:
                prev_ids = torch.cat([anchor_ids[:, None], ids[:, :-1]], dim=1)  # the token before each drafted one
                confidences = self.model.calibrated_confidence(self.model.confidence_logits(hidden, prev_ids),
                                                               self.sampled_calibration)
        return [DraftBlock(ids[r, :k], probs[r, :k], confidences[r, :k] if confidences is not None else None)
                if k else None for r, k in enumerate(ks)]

    def position_probs(self, committed_ids: torch.Tensor, k: int, temperature: float) -> torch.Tensor:
        """DeepSpec's DFlash (no Markov head): (k, V), each drafted position's distribution from one pass. With a
        Markov head each token's distribution depends on the one before, so no tree is grown from it."""
        if self.model.markov_head is not None:
            raise EngineError("a DSpark checkpoint drafts each token from the one before (its Markov head); "
                              "a tree is grown from a DFlash checkpoint")
        return logits_to_probs(self.lm_head(self.block_hidden(committed_ids)[:k]), temperature)

    def _bias_step(self, hidden: torch.Tensor):
        head = self.model.markov_head
        if head is None or not self.use_markov_head:
            return None
        return lambda prev, k, state: head.step(prev, hidden[..., k, :], state)

    def verify_len(self, block: DraftBlock, config: GenerationConfig, clock: SpanClock) -> int:
        if block.confidences is None:
            return int(block.ids.numel())
        with clock.span("host", "scheduler picks ℓ"):
            sps = self.verify_steps_per_s() if config.scheduler == "throughput" else None
            return verify_len(config.scheduler, block.confidence_values, config.confidence_threshold, sps)


def markov_sample(base_logits: torch.Tensor, anchor_ids: torch.Tensor, bias_step, temperature: float,
                  generators: list[torch.Generator], ks: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample R blocks left to right, all R at each position together: p_k ∝ exp(U_k + B_k), B_k =
    bias_step(x_{k−1}, k, state) with x_0 the anchor (bias_step None: no Markov head, every position drawn from U_k
    at once). base_logits (R, K, V), anchor_ids (R,); request r draws its first ks[r] tokens (default all K) from
    its own generator, in order, and no more (a request's draws never depend on the others in the batch).
    Returns the ids (R, K) and the distributions they were drawn from (R, K, V); past ks[r], argmax fillers."""
    ks = [base_logits.shape[1]] * base_logits.shape[0] if ks is None else ks
    if bias_step is None:
        probs = logits_to_probs(base_logits, temperature)
        return _draw(probs, temperature, generators, ks, None), probs
    prev, state, ids, probs = anchor_ids, None, [], []
    for k in range(base_logits.shape[1]):
        bias, state = bias_step(prev, k, state)
        step_probs = logits_to_probs(base_logits[:, k] + bias, temperature)
        prev = _draw(step_probs, temperature, generators, ks, k)
        ids.append(prev)
        probs.append(step_probs)
    return torch.stack(ids, dim=1), torch.stack(probs, dim=1)


def _draw(probs: torch.Tensor, temperature: float, generators: list[torch.Generator], ks: list[int],
          position: int | None) -> torch.Tensor:
    """Each request's token(s) from its rows of `probs` ((R, V) at one `position`, or (R, K, V) for all K): the
    argmax at temperature 0, else draws from request r's generator, only at positions below ks[r]."""
    picked = probs.argmax(dim=-1)
    if temperature == 0:
        return picked
    for r, (generator, k) in enumerate(zip(generators, ks)):
        if position is None:
            picked[r, :k] = pick(probs[r, :k], temperature, generator)
        elif position < k:
            picked[r] = pick(probs[r], temperature, generator)
    return picked
