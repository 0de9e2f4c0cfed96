"""engine/train/teacher.py: the target's outputs kept per row give the same features, logits and losses as the
target run on every batch, and the target runs once per distinct row, each alone."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import tiny_qwen3


def _target_and_rows():
    target = tiny_qwen3(300, layers=4, context=64)
    rows = torch.randint(2, 300, (5, 32), generator=torch.Generator().manual_seed(1))
    return target, rows


def _counting(target) -> list[int]:
    """How many rows each call of the target's layers ran."""
    calls: list[int] = []
    target.model.register_forward_hook(lambda module, args, kwargs, out: calls.append(len(args[0] if args else
                                                                                          kwargs["input_ids"])),
                                       with_kwargs=True)
    return calls


def test_kept_rows_give_the_targets_own_outputs_and_run_once_each_alone():
    from engine.train.teacher import RowTeacher, target_outputs

    target, rows = _target_and_rows()
    reference = copy.deepcopy(target)  # the target run on every batch, as before
    layer_ids = (0, 2)
    teacher = RowTeacher(target, layer_ids)
    calls = _counting(target)
    for draw in ([0, 1, 1, 3], [3, 0, 4, 4], [1, 4, 0, 3]):  # rows drawn again, in other batches
        x = rows[draw]
        features, logits = teacher(x)
        want_features, want_logits = target_outputs(reference, x, layer_ids)
        assert features.shape == want_features.shape == (4, 32, 2 * 64) and logits.dtype == torch.float32
        torch.testing.assert_close(features, want_features, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(logits, want_logits, atol=1e-4, rtol=1e-5)
    assert calls == [1, 1, 1, 1]  # rows 0, 1 and 3 in the first draw, row 4 in the second: each once, alone
    assert len(teacher.rows) == 4
    assert RowTeacher(target)(rows[:2])[0] is None  # no feature layers asked: logits only


def test_the_losses_on_kept_rows_equal_those_on_the_target_run_each_step():
    from engine.drafters.eagle3 import Eagle3DraftModel
    from engine.train import eagle3
    from engine.train.lm import distill_loss

    target, rows = _target_and_rows()
    drafter = Eagle3DraftModel(eagle3.eagle3_config(target.config, layer_ids=[0, 1, 2]))
    student = tiny_qwen3(300, layers=1, context=64, seed=3)
    for labels in ("argmax", "written"):
        losses = {}
        for kept in (False, True):
            generator = torch.Generator().manual_seed(5)  # the same anchors both ways
            loss = eagle3.eagle3_loss(drafter, target, generator, anchors_per_window=8, labels=labels, rows=kept)
            losses[kept] = [loss(rows[[0, 2, 2, 4]]).item(), loss(rows[[2, 4, 1, 0]]).item()]
        assert losses[True] == pytest.approx(losses[False], rel=1e-5), labels
    plain, kept = distill_loss(student, target), distill_loss(student, target, rows=True)
    for draw in ([0, 1], [1, 1]):
        assert kept(rows[draw]).item() == pytest.approx(plain(rows[draw]).item(), rel=1e-5)


@pytest.mark.parametrize("kind, labels", [("dflash", "argmax"), ("dflash", "written"), ("dspark", "paper"),
                                          ("dspark", "argmax")])
def test_the_block_drafters_losses_on_kept_rows_equal_those_on_the_target_run_each_step(kind, labels):
    from conftest import tiny_dflash, tiny_dspark
    from engine.train import dflash, dspark

    target = tiny_qwen3(300, layers=4, context=128)
    # 32 blocks cut from each row, the target's written tokens labelled past the first 64 ("written")
    rows = torch.randint(2, 300, (5, 96), generator=torch.Generator().manual_seed(1))
    drafter = tiny_dflash(target) if kind == "dflash" else tiny_dspark(target)
    loss_of = dflash.dflash_loss if kind == "dflash" else dspark.dspark_loss
    calls = _counting(target)
    losses = {}
    for kept in (False, True):
        calls.clear()
        generator = torch.Generator().manual_seed(5)  # the same anchors both ways
        loss = loss_of(drafter, target, generator, labels=labels, rows=kept)
        losses[kept] = [loss(rows[[0, 2, 2, 4]]).item(), loss(rows[[2, 4, 1, 0]]).item()]
        assert calls == ([1, 1, 1, 1] if kept else [4, 4])  # kept: rows 0, 2, 4, then 1, each once and alone
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


def test_only_the_fixed_rows_are_kept_and_corpus_windows_run_together_as_they_come():
    """A phase mixing the fixed rows with corpus windows: a window that starts a fixed row is kept (computed alone,
    once), every other window runs through the target with the other fresh ones of its batch, and is never kept."""
    from engine.train.teacher import RowTeacher, target_outputs

    target, rows = _target_and_rows()
    reference = copy.deepcopy(target)
    fixed = torch.cat([rows[:3], torch.randint(2, 300, (3, 8), generator=torch.Generator().manual_seed(2))], dim=1)
    teacher = RowTeacher(target, (0, 2), only=fixed)  # rows 0-2, longer than the windows cut from them
    calls = _counting(target)
    corpus = torch.randint(2, 300, (4, 32), generator=torch.Generator().manual_seed(3))
    for x in (torch.cat([corpus[:2], rows[[0, 1]]]), torch.cat([corpus[2:], rows[[1, 2]]]), rows[[3, 0]]):
        features, logits = teacher(x)
        want_features, want_logits = target_outputs(reference, x, (0, 2))
        torch.testing.assert_close(features, want_features, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(logits, want_logits, atol=1e-4, rtol=1e-5)
    # the two corpus windows together, then rows 0 and 1 alone; again; row 2 alone; row 3 (not fixed) as it comes
    assert calls == [2, 1, 1, 2, 1, 1]
    assert len(teacher.rows) == 3


def test_the_losses_of_a_mixing_phase_keep_the_fixed_rows_and_equal_the_target_run_each_step():
    from engine.drafters.eagle3 import Eagle3DraftModel
    from engine.train import eagle3
    from engine.train.lm import distill_loss

    target, rows = _target_and_rows()
    drafter = Eagle3DraftModel(eagle3.eagle3_config(target.config, layer_ids=[0, 1, 2]))
    student = tiny_qwen3(300, layers=1, context=64, seed=3)
    corpus = torch.randint(2, 300, (2, 32), generator=torch.Generator().manual_seed(3))
    batches = [torch.cat([corpus[:1], rows[[0, 2]]]), torch.cat([corpus[1:], rows[[2, 4]]])]
    for make in (lambda kept: eagle3.eagle3_loss(drafter, target, torch.Generator().manual_seed(5),
                                                 anchors_per_window=8, rows=kept),
                 lambda kept: distill_loss(student, target, rows=kept)):
        plain, kept = make(False), make(rows)
        assert [kept(x).item() for x in batches] == pytest.approx([plain(x).item() for x in batches], rel=1e-5)
