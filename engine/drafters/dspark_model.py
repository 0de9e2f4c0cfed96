"""The DSpark draft network (Cheng et al., PKU × DeepSeek-AI; deepseek-ai/DeepSpec): the DFlash backbone
with the anchor itself predicting the first token, a Markov head and a confidence head.

- Backbone: as DFlash (dflash_model.py), but the block [anchor, MASK × (γ − 1)] gives γ hidden states
  h_1..h_γ and h_k predicts drafted token k (the anchor's own state predicts token 1).
- Markov head: a low-rank bigram bias B(x_{k−1}, ·) = markov_w2(markov_w1[x_{k−1}]), added to the
  backbone's logits while sampling the block left to right: p_k ∝ exp(U_k + B(x_{k−1}, ·)), x_0 = anchor.
- Confidence head: c_k = σ(proj([h_k ; markov_w1[x_{k−1}]]) / t_k), the chance token k survives given
  tokens 1..k−1 survived, with per-position temperatures t_k fitted on held-out data (calibration).

Config fields and weight names follow DeepSpec's DSpark checkpoints: top-level `block_size`,
`mask_token_id`, `target_layer_ids`, `markov_rank`, `markov_head_type`, `enable_confidence_head`,
`confidence_head_with_markov`; weights `markov_head.markov_w1`, `markov_head.markov_w2`,
`confidence_head.proj`. The embedding table and LM head are the target's (DeepSpec stores frozen copies;
they are not kept here). Written for this project from the paper.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Qwen3Config

from .dflash_model import DFlashDraftModel


class MarkovHead(nn.Module):
    def __init__(self, vocab_size: int, rank: int):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab_size, rank)
        self.markov_w2 = nn.Linear(rank, vocab_size, bias=False)

    def bias(self, prev_ids: torch.Tensor) -> torch.Tensor:
        """Logit bias toward each next token given the previous token."""
        return self.markov_w2(self.markov_w1(prev_ids))


class ConfidenceHead(nn.Module):
    def __init__(self, input_dim: int):
        super().__init__()
        self.proj = nn.Linear(input_dim, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.proj(features).squeeze(-1)


class DSparkDraftModel(DFlashDraftModel):
    """Reuses the DFlash backbone; reads its settings from the config's top level (DeepSpec layout)."""

    def __init__(self, config: Qwen3Config):
        super().__init__(config)
        self.markov_rank = int(getattr(config, "markov_rank", 0))
        self.markov_head = MarkovHead(config.vocab_size, self.markov_rank) if self.markov_rank > 0 else None
        self.enable_confidence_head = bool(getattr(config, "enable_confidence_head", False))
        with_markov = bool(getattr(config, "confidence_head_with_markov", False)) and self.markov_head is not None
        self.confidence_head_with_markov = with_markov
        self.confidence_head = (ConfidenceHead(config.hidden_size + (self.markov_rank if with_markov else 0))
                                if self.enable_confidence_head else None)
        # Calibration: one temperature per block position (1.0 = uncalibrated), kept in the config.
        self.confidence_temperatures = list(getattr(config, "confidence_temperatures", None) or [1.0] * self.block_size)
        self.post_init()

    def markov_bias(self, prev_ids: torch.Tensor) -> torch.Tensor:
        if self.markov_head is None:
            return torch.zeros(*prev_ids.shape, self.config.vocab_size)
        return self.markov_head.bias(prev_ids)

    def confidence_logits(self, hidden: torch.Tensor, prev_ids: torch.Tensor) -> torch.Tensor:
        """Uncalibrated confidence logits for hidden states (..., H) and the tokens before them (...)."""
        features = hidden
        if self.confidence_head_with_markov:
            features = torch.cat([hidden, self.markov_head.markov_w1(prev_ids).to(hidden.dtype)], dim=-1)
        return self.confidence_head(features).float()

    def calibrated_confidence(self, logits: torch.Tensor) -> torch.Tensor:
        """σ(logit_k / t_k) along the last dimension (block positions)."""
        t = torch.tensor(self.confidence_temperatures[: logits.shape[-1]], dtype=logits.dtype, device=logits.device)
        return torch.sigmoid(logits / t)
