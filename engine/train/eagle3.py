"""Training the EAGLE-3 drafter on our frozen target with "training-time test" (DeepSpec's
recipe, ttt_length 7).

Each window goes through the frozen target once, which gives the features (hidden states of the drafter's
5 target layers) and the target's next-token distributions. Then the drafter runs 7 steps over the whole
window. Step 0: index i reads fc(f_i) and token i + 1 at position i. Step k: index i reads the drafter's own
output of step k − 1 at i and the true token i + 1 + k at position i + k, so it learns to continue from its
own hidden states as it must at inference. Index i of step k attends to step-0 keys j ≤ i and, in every
later step, only to its own index (the same chain of serial forwards an inference draft runs). Its loss is
the soft cross-entropy to the target's distribution of token i + 2 + k, weighted 0.8^k. The embedding table
and LM head are frozen copies of the target's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import Qwen3Config

from ..drafters.dflash_model import spaced_layers
from ..drafters.eagle3 import ARCHITECTURE, Eagle3DraftModel, new_draft_cache
from .dflash import LABELS, written_labels
from .selfdata import PREFIX_TOKENS
from .teacher import RowTeacher, row_teacher, target_outputs

TTT_LENGTH = 7  # serial steps trained (DeepSpec: 7)
STEP_DECAY = 0.8  # weight of step k is STEP_DECAY ** k
ANCHORS_PER_WINDOW = 64  # indices per window that run the later steps (step 0 runs on all)


def feature_layers(num_target_layers: int, count: int = 5) -> list[int]:
    """Target layers the drafter reads: low, middle and high, evenly spaced from layer 1 to the one below
    the last (the last layer's state is already the next-token prediction). 8 layers: 1, 2, 4, 5, 6;
    16: 1, 4, 8, 11, 14."""
    return spaced_layers(1, num_target_layers - 2, count)


def eagle3_config(target_config: Qwen3Config, layer_ids: list[int] | None = None,
                  ttt_length: int = TTT_LENGTH, layers: int = 1) -> Qwen3Config:
    """The target's config with DeepSpec's EAGLE-3 fields (its build_draft_config, our values)."""
    if layer_ids is None:
        layer_ids = feature_layers(target_config.num_hidden_layers)
    inherited = {k: v for k, v in target_config.to_dict().items()
                 if k not in ("architectures", "dtype", "torch_dtype", "transformers_version", "layer_types",
                              "num_hidden_layers", "tie_word_embeddings")}
    config = Qwen3Config(**inherited, num_hidden_layers=layers, tie_word_embeddings=False)
    config.architectures = [ARCHITECTURE]
    config.layer_types = ["full_attention"] * layers
    config.update(dict(target_layer_ids=list(layer_ids), num_target_layers=target_config.num_hidden_layers,
                       ttt_length=ttt_length, step_loss_decay=STEP_DECAY, draft_num_hidden_layers=layers))
    return config


@torch.no_grad()
def init_from_target(drafter: Eagle3DraftModel, target) -> None:
    """Copy and freeze the embedding table and LM head; start the draft layer from the target's last layer
    where shapes allow (the hidden half of q/k/v, o_proj, the MLP and norms) and `fc` as a read-out of the
    highest feature layer, so the first drafts already live in the space the LM head reads."""
    drafter.embed_tokens.weight.copy_(target.get_input_embeddings().weight)
    drafter.lm_head.weight.copy_(target.get_output_embeddings().weight)
    drafter.embed_tokens.requires_grad_(False)
    drafter.lm_head.requires_grad_(False)
    drafter.norm.load_state_dict(target.model.norm.state_dict())
    source = target.model.layers[-1]
    hidden = drafter.config.hidden_size
    for layer in drafter.layers:
        attn = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj"):
            weight = getattr(attn, name).weight
            weight[:, :hidden].mul_(0.5)  # the embedding half starts random and small
            weight[:, hidden:].copy_(getattr(source.self_attn, name).weight)
        for name in ("o_proj", "q_norm", "k_norm"):
            getattr(attn, name).load_state_dict(getattr(source.self_attn, name).state_dict())
        layer.mlp.load_state_dict(source.mlp.state_dict())
        layer.hidden_norm.load_state_dict(source.input_layernorm.state_dict())
        layer.post_attention_layernorm.load_state_dict(source.post_attention_layernorm.state_dict())
    drafter.fc.weight.mul_(0.1)
    drafter.fc.weight[:, -hidden:].add_(torch.eye(hidden))


def sample_anchors(batch: int, seq_len: int, count: int, steps: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, count) distinct sorted indices whose every step has a target (i + steps ≤ T − 1)."""
    scores = torch.rand(batch, seq_len - steps, generator=generator)
    return scores.topk(min(count, seq_len - steps), dim=1).indices.sort(dim=1).values


def ttt_attention_mask(anchors: torch.Tensor, seq_len: int, step: int) -> torch.Tensor:
    """(b, 1, M, T + step·M) bool over keys laid out [step 0 (all T) | step 1 | … | step (M anchors each)]:
    anchor i sees step-0 keys j ≤ i and, in each later step, only its own key."""
    batch, count = anchors.shape
    context = torch.arange(seq_len, device=anchors.device)[None, None, :] <= anchors[:, :, None]
    own = torch.eye(count, dtype=torch.bool, device=anchors.device).expand(batch, count, count)
    return torch.cat([context] + [own] * step, dim=2)[:, None]


def ttt_logits(drafter: Eagle3DraftModel, target, x: torch.Tensor, steps: int, anchors: torch.Tensor,
               written_from: int | None = None, teacher: RowTeacher | None = None):
    """A training-time test over windows x (b, T): the drafter's logits and the target's they should match.

    Step 0 runs on every index (its keys are the context every later step reads); steps 1.. run on the
    `anchors` (b, M) only, since index i of step k reads step-0 keys and its own chain, nothing else:
    a subsample of DeepSpec's loss that costs a fraction of it. Returns the step-0 draft logits (b, T, V)
    (index i predicts token i + 2), the later steps' (steps − 1, b, M, V) (step k at anchor i predicts
    token i + 2 + k), and the target's logits (b, T, V) (index p predicts token p + 1); with `written_from`,
    as dflash.written_labels makes them. `teacher`: the target's outputs kept per row (teacher.py), else computed."""
    b, t = x.shape
    if teacher is None:
        features, teacher_logits = target_outputs(target, x, tuple(drafter.target_layer_ids))
    else:
        features, teacher_logits = teacher(x)
    if written_from is not None:
        teacher_logits = written_labels(teacher_logits, x, written_from)
    cache = new_draft_cache()  # keys [step 0 | step 1 | …]
    padded = F.pad(x, (0, steps))  # tokens past the window: padding, read only by indices without a target
    causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    hidden = drafter(padded[:, 1: 1 + t], drafter.fc(features), torch.arange(t, device=x.device).expand(b, -1),
                     cache, causal)
    first = drafter.logits(hidden).float()
    hidden = hidden.gather(1, anchors[:, :, None].expand(-1, -1, hidden.shape[-1]))
    later = []
    for k in range(1, steps):
        tokens = padded.gather(1, anchors + 1 + k)
        hidden = drafter(tokens, hidden, anchors + k, cache, ttt_attention_mask(anchors, t, k))
        later.append(drafter.logits(hidden).float())
    later = torch.stack(later) if later else first.new_zeros(0, b, anchors.shape[1], first.shape[-1])
    return first, later, teacher_logits


def later_targets(teacher_logits: torch.Tensor, anchors: torch.Tensor, steps: int) -> torch.Tensor:
    """(steps − 1, b, M, V): the target's logits for step k ≥ 1 at anchor i, those of position i + 1 + k."""
    index = anchors[None] + 1 + torch.arange(1, steps, device=anchors.device)[:, None, None]  # (steps-1, b, M)
    rows = torch.arange(anchors.shape[0], device=anchors.device)[None, :, None]
    return teacher_logits[rows, index]


def eagle3_loss(drafter: Eagle3DraftModel, target, generator: torch.Generator, steps: int = TTT_LENGTH,
                decay: float = STEP_DECAY, anchors_per_window: int = ANCHORS_PER_WINDOW, labels: str = "soft",
                rows: bool | torch.Tensor = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """Σ_k 0.8^k · (mean cross-entropy of step k) / Σ_k 0.8^k, against the target's whole distribution
    ("soft"), its greedy choice ("argmax"), KL + TV against it ("distribution") or the token it wrote ("written"),
    as for DFlash (train/dflash.py). rows: the target's outputs kept per row (teacher.row_teacher: True every window,
    a tensor of rows those rows only)."""
    if labels not in LABELS and labels != "written":
        raise ValueError(f"labels must be one of {', '.join([*LABELS, 'written'])}, not {labels!r}")
    cross_entropy = LABELS["argmax" if labels == "written" else labels]
    written_from = PREFIX_TOKENS if labels == "written" else None
    weights = torch.tensor([decay ** k for k in range(steps)])
    teacher = row_teacher(target, drafter.target_layer_ids, rows)

    def loss(x: torch.Tensor) -> torch.Tensor:
        anchors = sample_anchors(x.shape[0], x.shape[1], anchors_per_window, steps, generator).to(x.device)
        first, later, teacher_logits = ttt_logits(drafter, target, x, steps, anchors, written_from, teacher)
        step0 = cross_entropy(teacher_logits[:, 1:], first[:, :-1]).mean()  # index i ≤ T − 2 has a target
        per_step = torch.cat([step0[None], cross_entropy(later_targets(teacher_logits, anchors, steps), later)
                              .mean((1, 2))])
        w = weights.to(per_step.device)
        return (per_step * w).sum() / w.sum()

    return loss


@torch.no_grad()
def eagle3_acceptance(drafter: Eagle3DraftModel, target, windows: torch.Tensor, k: int = 4) -> float:
    """Held-out proxy for τ − 1 at temperature 0 and draft length k: the expected number of accepted drafts
    when each serial step is right if its argmax equals the target's (teacher-forced tokens), over every
    index of the first 16 windows that has a target for all k steps."""
    x = windows[:16]
    anchors = torch.arange(x.shape[1] - k, device=x.device).expand(x.shape[0], -1)
    first, later, teacher_logits = ttt_logits(drafter, target, x, k, anchors)
    draft = torch.cat([first[None, :, : anchors.shape[1]], later])  # (k, b, M, V)
    teacher = torch.cat([teacher_logits[None, :, 1: anchors.shape[1] + 1], later_targets(teacher_logits, anchors, k)])
    correct = (draft.argmax(-1) == teacher.argmax(-1)).int()
    return correct.cumprod(0).sum(0).float().mean().item()
