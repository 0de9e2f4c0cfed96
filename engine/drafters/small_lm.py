"""Classic speculative decoding's drafter: a small causal LM with the target's tokenizer drafts K tokens,
one forward each (Leviathan et al. 2023). Drafting cost grows linearly with K: this is the serial loop the
block drafters remove. Kind "small-lm" in methods.py: any `*ForCausalLM` checkpoint.
"""

from __future__ import annotations

import torch

from ..models import crop_cache, forward_logits, load_causal_lm, new_cache
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
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
    def __init__(self, model):
        self.model = model
        self.cache = None
        self.label = f"small LM, {model.config.num_hidden_layers} layers"

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.cache = new_cache(self.model)
        with clock.span("draft", "drafter prefill"):
            forward_logits(self.model, prompt_ids, self.cache, logits_to_keep=1)

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        # Feed what the cache has not seen yet: the last bonus, and after a fully accepted block the last
        # drafted token too (it was sampled but never fed).
        inputs = committed_ids[:, self.cache.get_seq_length():]
        ids, probs = [], []
        for i in range(k):
            with clock.span("draft", f"draft forward {i + 1}/{k}"):
                logits = forward_logits(self.model, inputs, self.cache, logits_to_keep=1)[0, -1]
                token_probs = logits_to_probs(logits, temperature)
                token = pick(token_probs, temperature, generator)
            ids.append(token)
            probs.append(token_probs)
            inputs = token.view(1, 1)
        return DraftBlock(torch.stack(ids), torch.stack(probs))

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        crop_cache(self.cache, num_valid)
