"""The DSpark draft network (Cheng et al., PKU × DeepSeek-AI; deepseek-ai/DeepSpec): the DFlash backbone
with the anchor itself predicting the first token, a Markov head and a confidence head.

- Backbone: as DFlash (dflash_model.py), but the block [anchor, MASK × (γ − 1)] gives γ hidden states
  h_1..h_γ and h_k predicts drafted token k (the anchor's own state predicts token 1).
- Markov head: a low-rank bigram bias B(x_{k−1}, ·) = markov_w2(markov_w1[x_{k−1}]), added to the
  backbone's logits while sampling the block left to right: p_k ∝ exp(U_k + B(x_{k−1}, ·)), x_0 = anchor.
- Confidence head: c_k = σ(proj([h_k ; markov_w1[x_{k−1}]]) / t_k), the chance token k survives given
  tokens 1..k−1 survived, with per-position temperatures t_k fitted on held-out data (calibration).

Config fields and weight names follow DeepSpec's DSpark checkpoints: top-level `block_size`,
`mask_token_id`, `target_layer_ids`, `markov_rank`, `markov_head_type` (vanilla, gated or rnn),
`enable_confidence_head`, `confidence_head_with_markov`; weights `markov_head.markov_w1`,
`markov_head.markov_w2` (+ `gate_proj` or `joint_proj`), `confidence_head.proj`, and the frozen copies of
the target's `embed_tokens` and `lm_head` DeepSpec stores (dflash_model.load_block_model). DeepSpec's
DFlash checkpoints are this model with `markov_rank` 0 and no confidence head. Written for this project
from the paper.

Saved, a drafter is a DeepSpec checkpoint: architecture `Qwen3DSparkModel` (the name DeepSpec's evaluator
looks up), `tie_word_embeddings` false, and, once it holds them (`copy_target_embeddings`, as our training
does), the copies of the target's embedding table and LM head that DeepSpec's class drafts with. Our own
`confidence_temperatures` (fitted at temperature 0) and `confidence_temperatures_sampled` (fitted at 1, where
the same weights also serve sampled runs) ride along in the config; DeepSpec ignores both. Older saves of ours
(architecture `DSparkDraftModel`, no copies, tie flag true) still load: drafters/deepspec.py recognises both
names and the copies are optional here.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Qwen3Config

from .dflash_model import DFlashDraftModel


ARCHITECTURE = "Qwen3DSparkModel"  # DeepSpec's name, used for our checkpoints too
MARKOV_HEAD_TYPES = ("vanilla", "gated", "rnn")  # DeepSpec's three Markov heads


class MarkovHead(nn.Module):
    """The in-block sequential head: a logit bias toward each next token from the previous token x_{k−1}
    (and, for the gated and rnn types, the backbone's output h_k at that position):

    - vanilla: B = W2(W1[x_{k−1}]), a low-rank bigram;
    - gated:   e = W1[x_{k−1}], g = σ(gate_proj([h_k ; e])), B = W2(g ⊙ e);
    - rnn:     z = [s_{k−1} ; W1[x_{k−1}] ; h_k], (g, c, o) = joint_proj(z) in three, s_k = σ(g)·s_{k−1} +
               (1 − σ(g))·tanh(c), B = W2(tanh(o)); the state s starts at zero in every block.
    """

    def __init__(self, vocab_size: int, rank: int, hidden_size: int, head_type: str = "vanilla"):
        super().__init__()
        head_type = (head_type or "vanilla").lower()
        if head_type not in MARKOV_HEAD_TYPES:
            raise ValueError(f"markov_head_type {head_type!r} is not one of DeepSpec's {', '.join(MARKOV_HEAD_TYPES)}")
        self.head_type, self.rank = head_type, rank
        self.markov_w1 = nn.Embedding(vocab_size, rank)
        self.markov_w2 = nn.Linear(rank, vocab_size, bias=False)
        if head_type == "gated":
            self.gate_proj = nn.Linear(hidden_size + rank, rank)
        elif head_type == "rnn":
            self.joint_proj = nn.Linear(2 * rank + hidden_size, 3 * rank)

    def step(self, prev_ids: torch.Tensor, hidden: torch.Tensor, state: torch.Tensor | None = None):
        """One block position: the bias (..., V) given the previous tokens (...) and the backbone's hidden
        states there (..., H); returns (bias, state), state being the rnn's (None for the others)."""
        e = self.markov_w1(prev_ids).to(hidden.dtype)
        if self.head_type == "vanilla":
            return self.markov_w2(e), None
        if self.head_type == "gated":
            return self.markov_w2(torch.sigmoid(self.gate_proj(torch.cat([hidden, e], dim=-1))) * e), None
        if state is None:
            state = e.new_zeros(e.shape)
        gate, candidate, out = self.joint_proj(torch.cat([state, e, hidden], dim=-1)).chunk(3, dim=-1)
        gate = torch.sigmoid(gate)
        state = gate * state + (1 - gate) * torch.tanh(candidate)
        return self.markov_w2(torch.tanh(out)), state

    def block_bias(self, prev_ids: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Teacher-forced biases of whole blocks: prev_ids (..., n), hidden (..., n, H) -> (..., n, V)."""
        if self.head_type != "rnn":  # no state: every position at once
            return self.step(prev_ids, hidden)[0]
        biases, state = [], None
        for k in range(prev_ids.shape[-1]):
            bias, state = self.step(prev_ids[..., k], hidden[..., k, :], state)
            biases.append(bias)
        return torch.stack(biases, dim=-2)


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
        self.markov_rank = int(getattr(config, "markov_rank", 0) or 0)
        self.markov_head = (MarkovHead(config.vocab_size, self.markov_rank, config.hidden_size,
                                       getattr(config, "markov_head_type", "vanilla"))
                            if self.markov_rank > 0 else None)
        self.enable_confidence_head = bool(getattr(config, "enable_confidence_head", False))
        with_markov = bool(getattr(config, "confidence_head_with_markov", False)) and self.markov_head is not None
        self.confidence_head_with_markov = with_markov
        self.confidence_head = (ConfidenceHead(config.hidden_size + (self.markov_rank if with_markov else 0))
                                if self.enable_confidence_head else None)
        # Calibration: one temperature per block position (1.0 = uncalibrated), kept in the config: fitted on the
        # target's greedy continuations, and, where these weights serve sampled runs too, on continuations sampled
        # at temperature 1 (the confidence of a token surviving differs between the two rules).
        self.confidence_temperatures = list(getattr(config, "confidence_temperatures", None) or [1.0] * self.block_size)
        self.sampled_confidence_temperatures = list(getattr(config, "confidence_temperatures_sampled", None)
                                                    or self.confidence_temperatures)
        self.post_init()

    def checkpoint_fields(self) -> dict:
        """DeepSpec's layout rather than z-lab's (DFlashDraftModel): its architecture name, which transformers
        would write as our class name, and its tie flag, false, the LM head being a tensor of its own."""
        return {"architectures": [ARCHITECTURE], "tie_word_embeddings": False}

    def copy_target_embeddings(self, target) -> None:
        """Hold frozen copies of the target's embedding table and LM head, as DeepSpec's drafter does from the
        start of its training, so that a save stores them where DeepSpec's class reads its own. SpecLab drafts
        with the target's all the same (dflash_model.share_target_embeddings drops copies equal to them)."""
        embed, head = target.get_input_embeddings().weight, target.get_output_embeddings().weight
        like = {"device": self.fc.weight.device, "dtype": self.fc.weight.dtype}
        self.embed_tokens = nn.Embedding(embed.shape[0], embed.shape[1], **like)
        self.lm_head = nn.Linear(head.shape[1], head.shape[0], bias=False, **like)
        with torch.no_grad():
            self.embed_tokens.weight.copy_(embed)
            self.lm_head.weight.copy_(head)
        self.embed_tokens.requires_grad_(False)
        self.lm_head.requires_grad_(False)
        self.config.has_own_embeddings = True

    def confidence_logits(self, hidden: torch.Tensor, prev_ids: torch.Tensor) -> torch.Tensor:
        """Uncalibrated confidence logits for hidden states (..., H) and the tokens before them (...)."""
        features = hidden
        if self.confidence_head_with_markov:
            features = torch.cat([hidden, self.markov_head.markov_w1(prev_ids).to(hidden.dtype)], dim=-1)
        return self.confidence_head(features).float()

    def calibrated_confidence(self, logits: torch.Tensor, sampled: bool = False) -> torch.Tensor:
        """σ(logit_k / t_k) along the last dimension (block positions), t_k the calibration fitted at temperature 0,
        or at 1 where `sampled`."""
        temperatures = self.sampled_confidence_temperatures if sampled else self.confidence_temperatures
        key = (tuple(temperatures), logits.dtype, logits.device)
        cached = getattr(self, "_temperatures", {})
        if key not in cached:  # copied to the device once per calibration, not at every draft
            self._temperatures = {**cached, key: torch.tensor(key[0], dtype=logits.dtype, device=logits.device)}
        return torch.sigmoid(logits / self._temperatures[key][: logits.shape[-1]])
