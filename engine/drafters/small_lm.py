"""Classic speculative decoding's drafter: a small causal LM with the target's tokenizer drafts K tokens,
one forward each (Leviathan et al. 2023). Drafting cost grows linearly with K: this is the serial loop the
block drafters remove. Kind "small-lm" in methods.py: any `*ForCausalLM` checkpoint.
"""

from __future__ import annotations

import torch

from ..models import load_causal_lm
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
from ..target import fused_forward, target_for
from .base import BaseDrafter, DraftBlock


def recognises(config: dict) -> bool:
    return any(name.endswith("ForCausalLM") for name in config.get("architectures") or [])


def load(path: str, device: torch.device, dtype: torch.dtype, **hub):
    return load_causal_lm(path, device, dtype, **hub)


def owns(model) -> bool:
    return hasattr(model, "generate")  # checked last: any causal LM


def build(model, engine) -> "SmallLMDrafter":
    return SmallLMDrafter(model)


class SmallLMDrafter(BaseDrafter):
    """Runs the small LM through a Target of its own (engine/target/request.py): for a Qwen3 model the fused forward
    over a cache it owns, so the K serial forwards cost what the target's own forwards do per layer."""

    def __init__(self, model):
        self.model = model
        self.target = None
        self.label = f"small LM, {model.config.num_hidden_layers} layers"

    @property
    def length(self) -> int:
        """Positions the drafter's cache holds."""
        return self.target.length if self.target is not None else 0

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.target = target_for(self.model, fused_forward(self.model), None, prompt_ids.shape[1] + 64)
        with clock.span("draft", "drafter prefill"):
            self.target.prefill(prompt_ids)

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        # Feed what the cache has not seen yet: the last bonus, and after a fully accepted block the last
        # drafted token too (it was sampled but never fed).
        inputs = committed_ids[:, self.target.length:]
        ids, probs = [], []
        for i in range(k):
            with clock.span("draft", f"draft forward {i + 1}/{k}"):
                logits = self.target.verify(inputs)[0][0, -1]
                self.target.keep(self.target.length, list(range(inputs.shape[1])))  # every fed token stands
                token_probs = logits_to_probs(logits, temperature)
                token = pick(token_probs, temperature, generator)
            ids.append(token)
            probs.append(token_probs)
            inputs = token.view(1, 1)
        return DraftBlock(torch.stack(ids), torch.stack(probs))

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        # at most what it holds: after a fully accepted block the last draft was never fed
        self.target.keep(min(num_valid, self.target.length))
