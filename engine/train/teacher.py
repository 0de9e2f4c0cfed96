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
empty cache) trains exactly as one never cut. A phase whose batches mix such rows with corpus windows (which never
come back) keeps the rows only (`only`) and runs the target on the windows as they come.
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
    """target_outputs, each distinct row computed once and kept (on the target's device) for every later draw; with
    `only` (a fixed set of rows, (n, ≥ T) tokens), only a window that is the start of one of them is kept, and the
    others run through the target together, as they come."""

    def __init__(self, target, layer_ids: tuple[int, ...] | list[int] = (), only: torch.Tensor | None = None):
        self.target, self.layer_ids, self.only = target, tuple(layer_ids), only
        self.rows: dict[bytes, tuple[torch.Tensor | None, torch.Tensor]] = {}  # row's tokens -> features, last state
        self._keepable: dict[int, set[bytes]] = {}  # window length -> the keys of `only`'s rows cut to it

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        keys = [row.cpu().numpy().tobytes() for row in x]
        keepable = self._keep_keys(x.shape[1])
        fresh_at = [i for i, key in enumerate(keys) if keepable is not None and key not in keepable]
        fresh = dict(zip(fresh_at, self._run(x[fresh_at]))) if fresh_at else {}  # run together, never kept
        outputs = [fresh[i] if i in fresh else self._kept(key, row) for i, (key, row) in enumerate(zip(keys, x))]
        features = torch.stack([f for f, _ in outputs]) if self.layer_ids else None
        with torch.no_grad():
            logits = self.target.lm_head(torch.stack([last for _, last in outputs])).float()
        return features, logits

    def _kept(self, key: bytes, row: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """A row's outputs, computed alone the first time it comes and kept."""
        if key not in self.rows:
            self.rows[key] = self._run(row[None])[0]
        return self.rows[key]

    def _keep_keys(self, length: int) -> set[bytes] | None:
        """The keys of the rows that may be kept, for windows of `length` tokens (None: every row)."""
        if self.only is None:
            return None
        if length not in self._keepable:
            self._keepable[length] = {row.numpy().tobytes() for row in self.only[:, :length].long().cpu()}
        return self._keepable[length]

    def _run(self, x: torch.Tensor) -> list[tuple[torch.Tensor | None, torch.Tensor]]:
        """The target over windows x: each one's features (None without feature layers) and last hidden state."""
        with torch.no_grad():
            out = self.target.model(x, output_hidden_states=True)
        features = (torch.cat([out.hidden_states[i + 1] for i in self.layer_ids], dim=-1).float()
                    if self.layer_ids else [None] * len(x))
        return list(zip(features, out.last_hidden_state.float()))


def row_teacher(target, layer_ids, rows: bool | torch.Tensor) -> RowTeacher | None:
    """A loss's `rows` as a teacher: False none (the target runs on every batch), True every row kept, a tensor of
    rows those rows kept (a phase mixing them with corpus windows)."""
    if rows is False:
        return None
    return RowTeacher(target, layer_ids, only=None if rows is True else rows)
