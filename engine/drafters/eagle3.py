"""The EAGLE-3 drafter (arXiv 2503.01840), in DeepSpec's checkpoint format (`Qwen3Eagle3Model`).

One decoder layer drafts serially, one forward per token, reading the target's features (DeepSpec ships
and evaluates 1 layer; a checkpoint with more is run causally, the way the training-time test trains it):

- Input of a position: the embedding of a token and a hidden state g, either `fc` of the target's
  features (the hidden states of 5 target layers, concatenated) or the drafter's own previous output.
- Layer: x = [input_layernorm(embedding) ; hidden_norm(g)] (width 2H); q/k/v project x, with Qwen3's
  per-head q_norm/k_norm and RoPE; g ← g + o_proj(attention); g ← g + mlp(post_attention_layernorm(g)).
  The layer returns g before the final norm: that is the hidden state fed back for the next draft.
- Logits: lm_head(norm(g)). `embed_tokens` and `lm_head` are frozen copies of the target's, stored in the
  checkpoint.

Pairing (as DeepSpec's evaluator): the target's feature at position p goes with token p + 1, at RoPE
position p. With n tokens committed, the first draft comes from (f_{n−2}, t_{n−1}) at position n − 2; the
next from (own hidden, first draft) at position n − 1, and so on.

Draft cache bookkeeping: the cache holds one entry per position 0..n−2 built from target features. A
propose first feeds the features new since the last step (causal among themselves), then K − 1 serial
steps whose entries are built from the drafter's own hidden states; `accept` crops those away, and the
target's features of the anchor and accepted tokens become the context fed at the next propose. With a window
(GenerationConfig.drafter_window) each position attends to the latest `window` positions only, masked.

Config fields and weight names are DeepSpec's: top-level `target_layer_ids`, `ttt_length`,
`num_target_layers`; weights `embed_tokens`, `fc`, `layers.N.{self_attn.{q,k,v,o}_proj, self_attn.q_norm,
self_attn.k_norm, mlp.*, hidden_norm, input_layernorm, post_attention_layernorm}`, `norm`, `lm_head`.
Written for this project from a description of the reference behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache, PreTrainedModel, Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RotaryEmbedding

from ..contract.types import EngineError
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
from .base import BaseDrafter, DraftBlock, window_mask
from .dflash_model import DraftAttention, RMSNorm
from .fused import DraftCache, FusedEagle3, kept, roll_back

ARCHITECTURE = "Qwen3Eagle3Model"  # DeepSpec's name, used for our checkpoints too
NUM_FEATURE_LAYERS = 5  # DeepSpec reads exactly 5 target layers (validate_eagle3_target_layer_ids)


# --- the network -------------------------------------------------------------------------------------

class Eagle3DecoderLayer(nn.Module):
    def __init__(self, config: Qwen3Config, layer_idx: int):
        super().__init__()
        self.self_attn = DraftAttention(config, layer_idx, input_width=2 * config.hidden_size)
        self.mlp = Qwen3MLP(config)
        self.hidden_norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, embedded: torch.Tensor, hidden: torch.Tensor, cos, sin, cache=None, attention_mask=None):
        x = torch.cat([self.input_layernorm(embedded), self.hidden_norm(hidden)], dim=-1)  # [embedding | hidden]
        hidden = hidden + self.self_attn(x, None, cos, sin, cache, attention_mask)  # residual: the hidden input
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class Eagle3DraftModel(PreTrainedModel):
    config_class = Qwen3Config
    base_model_prefix = "eagle3"
    _no_split_modules = ["Eagle3DecoderLayer"]
    _supports_sdpa = True  # attention is always torch SDPA here, whatever the config asks

    def __init__(self, config: Qwen3Config):
        super().__init__(config)
        self.target_layer_ids = [int(i) for i in config.target_layer_ids]
        self.ttt_length = int(getattr(config, "ttt_length", 7))
        hidden = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, hidden)
        self.fc = nn.Linear(len(self.target_layer_ids) * hidden, hidden, bias=False)
        self.layers = nn.ModuleList([Eagle3DecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = RMSNorm(hidden, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(hidden, config.vocab_size, bias=False)
        self.rotary_emb = Qwen3RotaryEmbedding(config)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, hidden: torch.Tensor, position_ids: torch.Tensor, cache=None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids (b, q); hidden (b, q, H): `fc` of target features or the drafter's own earlier output;
        position_ids (b, q). Returns the pre-norm outputs (b, q, H), the hidden states fed back."""
        embedded = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(embedded, position_ids)
        for layer in self.layers:  # every layer re-reads the same embeddings
            hidden = layer(embedded, hidden, cos, sin, cache, attention_mask)
        return hidden

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(hidden))

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save under DeepSpec's architecture name (transformers writes the class name), so our checkpoints
        are recognised as theirs are."""
        super().save_pretrained(save_directory, *args, **kwargs)
        self.config.architectures = [ARCHITECTURE]
        path = Path(save_directory) / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["architectures"] = [ARCHITECTURE]
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def causal_mask(num_new: int, num_cached: int, device=None) -> torch.Tensor | None:
    """(num_new, num_cached + num_new) bool: each new position sees the cache and the new ones up to itself."""
    if num_new == 1:
        return None
    return torch.ones(num_new, num_cached + num_new, dtype=torch.bool, device=device).tril(num_cached)


def new_draft_cache() -> DynamicCache:
    """A plain full-attention cache: built without the config, so no field in it can make sliding layers."""
    return DynamicCache()


# --- the kind's interface (methods.py) ---------------------------------------------------------------

def recognises(config: dict) -> bool:
    return ARCHITECTURE in (config.get("architectures") or [])


def check_config(config: Qwen3Config) -> None:
    """Refuse, in one line, a checkpoint this implementation cannot draft with as its trainer meant."""
    layer_ids = getattr(config, "target_layer_ids", None)
    if not isinstance(layer_ids, (list, tuple)) or len(layer_ids) != NUM_FEATURE_LAYERS:
        raise EngineError(f"EAGLE-3 checkpoint needs {NUM_FEATURE_LAYERS} target_layer_ids, got {layer_ids!r}")
    if any(b <= a for a, b in zip(layer_ids, layer_ids[1:])) or layer_ids[0] < 0:
        raise EngineError(f"EAGLE-3 target_layer_ids must be increasing layer indices, got {list(layer_ids)}")
    num_target_layers = getattr(config, "num_target_layers", None)
    if num_target_layers is not None and layer_ids[-1] >= num_target_layers - 1:
        raise EngineError(f"EAGLE-3 target_layer_ids {list(layer_ids)} include the target's last layer "
                          f"(its hidden state is returned after the final norm)")
    layer_types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types) or len(layer_types) not in (0, config.num_hidden_layers):
        raise EngineError(f"EAGLE-3 checkpoint has layer types {layer_types}; only full attention is supported")
    if config.num_hidden_layers < 1:
        raise EngineError("EAGLE-3 checkpoint has no draft layer")


def load(path: str, device: torch.device, dtype: torch.dtype, **hub) -> Eagle3DraftModel:
    config = Qwen3Config.from_pretrained(path, **hub)
    check_config(config)
    model, info = Eagle3DraftModel.from_pretrained(path, config=config, dtype=dtype, output_loading_info=True, **hub)
    wrong = [f"missing {k}" for k in info.get("missing_keys", [])] + \
            [f"unexpected {k}" for k in info.get("unexpected_keys", [])]
    if wrong:
        raise EngineError(f"EAGLE-3 checkpoint {path!r} does not match the DeepSpec layout: {', '.join(sorted(wrong))}")
    return model.to(device).eval().requires_grad_(False)


def owns(model) -> bool:
    return type(model) is Eagle3DraftModel


def build(model: Eagle3DraftModel, engine) -> "Eagle3Drafter":
    target = engine.target.config
    expected = getattr(model.config, "num_target_layers", None)
    if expected is not None and expected != target.num_hidden_layers:
        raise EngineError(f"this EAGLE-3 drafter was trained on a {expected}-layer target; "
                          f"the target has {target.num_hidden_layers}")
    if model.target_layer_ids[-1] >= target.num_hidden_layers - 1:
        raise EngineError(f"EAGLE-3 target_layer_ids {model.target_layer_ids} reach the target's last layer")
    if (model.config.hidden_size, model.config.vocab_size) != (target.hidden_size, target.vocab_size):
        raise EngineError("this EAGLE-3 drafter's hidden size or vocabulary does not match the target's")
    return Eagle3Drafter(model)


# --- the drafter the loop talks to -------------------------------------------------------------------

class Eagle3Drafter(BaseDrafter):
    max_drafts = None  # serial: any K (DeepSpec trains 7 steps ahead and drafts up to 7)

    def __init__(self, model: Eagle3DraftModel, fused: bool = True):
        self.model = model
        # the fused forward over a cache of its own (fused.py); fused=False, or a network it does not fit: the model's
        # own forward over a transformers cache, cropped after every step
        self.fused = FusedEagle3(model) if fused and FusedEagle3.supports(model) else None
        self.target_layer_ids = model.target_layer_ids
        layers = model.config.num_hidden_layers
        self.label = f"EAGLE-3, {layers} layer{'s' if layers > 1 else ''}"
        self.cache: DraftCache | DynamicCache | None = None
        self.pending: torch.Tensor | None = None  # target features not yet in the cache
        self.context_len = 0  # cache entries built from target features (positions 0..context_len − 1)

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.fused = kept(self.fused, self.model)
        self.cache = DraftCache.for_model(self.model, prompt_ids.shape[1]) if self.fused else new_draft_cache()
        self.pending = features  # f_0..f_{N−1}; they pair with t_1..t_N, and t_N comes with the first propose
        self.context_len = 0

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        n = committed_ids.shape[1]
        assert self.context_len + self.pending.shape[1] == n - 1, "draft context out of step"
        ids, probs = [], []
        with clock.span("draft", f"draft forward 1/{k} ({self.pending.shape[1]} new target features)"):
            hidden = self._feed_context(committed_ids)
            token, token_probs = self._next(hidden, temperature, generator)
        ids.append(token)
        probs.append(token_probs)
        positions = torch.arange(n - 1, n - 2 + k, device=committed_ids.device)  # made on the device, not copied there
        for i in range(1, k):  # own hidden state and the previous draft, at the next position
            with clock.span("draft", f"draft forward {i + 1}/{k}"):
                position = n - 2 + i
                hidden = self.forward(token.view(1, 1), hidden, position, positions[i - 1: i],
                                      window_mask(position, 1, position + 1, self.window, committed_ids.device))
                token, token_probs = self._next(hidden, temperature, generator)
            ids.append(token)
            probs.append(token_probs)
        return DraftBlock(torch.stack(ids), torch.stack(probs))

    def _feed_context(self, committed_ids: torch.Tensor) -> torch.Tensor:
        """Feed the pending features f_c..f_{n−2} with tokens t_{c+1}..t_{n−1} at positions c..n−2 (causal
        among themselves); returns the last position's pre-norm output (1, 1, H)."""
        start, stop = self.context_len, committed_ids.shape[1] - 1
        positions = torch.arange(start, stop, device=committed_ids.device).unsqueeze(0)
        mask = causal_mask(stop - start, start, committed_ids.device) if self.window is None else \
            window_mask(start, stop - start, stop, self.window, committed_ids.device)
        hidden = self.forward(committed_ids[:, start + 1:], self.model.fc(self.pending), start, positions[0], mask)
        self.pending, self.context_len = self.pending[:, :0], stop
        return hidden[:, -1:]

    def forward(self, ids: torch.Tensor, hidden: torch.Tensor, first: int, positions: torch.Tensor, mask,
                one_position: bool = False):
        """The network over `ids` (1, q) at positions first.. (one_position: all at `first`, a tree's level;
        `positions` (q,) the same on the device, the fallback's), the cache extended."""
        if self.fused is not None:
            return self.fused(ids, hidden, first, self.cache, mask, one_position)
        return self.model(ids, hidden, positions[None], self.cache, mask)

    def _next(self, hidden: torch.Tensor, temperature: float, generator: torch.Generator):
        token_probs = logits_to_probs(self.model.logits(hidden)[0, -1], temperature)
        return pick(token_probs, temperature, generator), token_probs

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        # The serial steps' entries were built from the drafter's own hidden states: drop them. The target's
        # features of the anchor and the accepted tokens take their place at the next propose.
        roll_back(self.cache, self.context_len)
        self.pending = torch.cat([self.pending, features], dim=1)
        assert self.context_len + self.pending.shape[1] == num_valid, "draft context out of step"
