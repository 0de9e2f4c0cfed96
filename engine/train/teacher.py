"""The frozen target's outputs on rows a training draws again and again, computed once per row.

A serial drafter's last phases (the greedy phase and the self-distillation on the target's own outputs) train on
a fixed set of rows, 2,048 to 3,072 of them, 8 drawn a step for thousands of steps: each row comes back about 30
times. Run on every batch, the target's forward was most of such a step on one CPU core. `RowTeacher` runs the
target once per row instead and keeps what the loss reads: the hidden states of the drafter's feature layers, and
the final hidden state, from which the logits are recomputed (the LM head costs little beside the target's layers;
logits over the whole vocabulary would not fit in memory). In float32, a row of 256 tokens keeps 1.2 MB for EAGLE-3
(five feature layers and the last, 3.6 GB for the 3,072 rows of its last phase) and 0.2 MB for the small LM. What it
saves a step: scripts/row_teacher_times.py, docs/embedded-models.md.

Each row runs alone, so its outputs never depend on which rows shared its batch: a run cut and resumed (with an
empty cache) trains exactly as one never cut.
"""

from __future__ import annotations

import torch


def target_outputs(target, x: torch.Tensor, layer_ids: tuple[int, ...] = ()
                   ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The target over windows x (b, T): the hidden states of `layer_ids` side by side (b, T, len × hidden), None
    without any, and its logits in float32 (b, T, V)."""
    with torch.no_grad():
        out = target(x, output_hidden_states=bool(layer_ids))
    features = torch.cat([out.hidden_states[i + 1] for i in layer_ids], dim=-1) if layer_ids else None
    return features, out.logits.float()


class RowTeacher:
    """target_outputs, each distinct row computed once and kept (on the target's device) for every later draw."""

    def __init__(self, target, layer_ids: tuple[int, ...] | list[int] = ()):
        self.target, self.layer_ids = target, tuple(layer_ids)
        self.rows: dict[bytes, tuple[torch.Tensor | None, torch.Tensor]] = {}  # row's tokens -> features, last state

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        kept = [self._row(row) for row in x]
        features = torch.stack([f for f, _ in kept]) if self.layer_ids else None
        with torch.no_grad():
            logits = self.target.lm_head(torch.stack([last for _, last in kept])).float()
        return features, logits

    def _row(self, row: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        key = row.cpu().numpy().tobytes()
        if key not in self.rows:
            with torch.no_grad():
                out = self.target.model(row[None], output_hidden_states=True)
            features = (torch.cat([out.hidden_states[i + 1][0] for i in self.layer_ids], dim=-1).float()
                        if self.layer_ids else None)
            self.rows[key] = features, out.last_hidden_state[0].float()
        return self.rows[key]
