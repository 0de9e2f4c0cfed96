"""Training code: the batched multi-block training forward of DFlash must compute exactly what the
cached one-block inference path computes, and the masks must hide what they should."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from engine.contract.methods import METHOD_REGISTRY
from engine.drafters.dflash import DFlashDrafter
from engine.models import forward_with_features, new_cache
from engine.timing import SpanClock
from engine.train.dflash import block_attention_mask, dflash_batch, position_weights, sample_anchors
from engine.train.lm import distillation_loss, lr_at, TrainConfig


def test_block_mask_hides_later_context_and_other_blocks():
    anchors = torch.tensor([[3, 7]])
    mask = block_attention_mask(anchors, seq_len=10, block_size=2)[0, 0]  # (4 queries, 10 + 4 keys)
    assert mask[0, :10].tolist() == [True] * 3 + [False] * 7  # block 0 sees positions 0..2 only
    assert mask[2, :10].tolist() == [True] * 7 + [False] * 3
    assert mask[0, 10:].tolist() == [True, True, False, False]  # its own block, both ways
    assert mask[3, 10:].tolist() == [False, False, True, True]


def test_anchors_leave_room_for_context_and_the_block():
    anchors = sample_anchors(4, 32, 8, 10, torch.Generator().manual_seed(0))
    assert anchors.min() >= 1 and anchors.max() <= 32 - 8
    assert all(len(set(row.tolist())) == 10 for row in anchors)


def test_training_forward_equals_the_inference_forward(random_engine):
    """Teacher-forced training logits of a block == what the lane drafts from the same context."""
    target, drafter_model = random_engine.target, random_engine.drafter_models["dflash"]
    x = torch.randint(2, 4000, (1, 40), generator=torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(5)
    anchors = sample_anchors(1, 40, drafter_model.block_size, 4, torch.Generator().manual_seed(5))
    train_logits, teacher = dflash_batch(drafter_model, target, x, generator, anchors_per_window=4)
    clock = SpanClock(torch.device("cpu"))
    for m, anchor in enumerate(anchors[0].tolist()):
        drafter = DFlashDrafter(drafter_model, target)
        features = forward_with_features(target, x[:, :anchor], new_cache(target), drafter_model.target_layer_ids)[1]
        drafter.start(x[:, :anchor], features, clock)
        block = drafter.propose(x[:, : anchor + 1], drafter_model.block_size - 1, 1.0, torch.Generator(), clock)
        assert torch.allclose(train_logits[0, m].softmax(-1), block.probs, atol=1e-5)
        expected_teacher = target(x).logits[0, anchor: anchor + drafter_model.block_size - 1]
        assert torch.allclose(teacher[0, m], expected_teacher, atol=1e-4)


def test_position_weights_decay():
    w = position_weights(8, gamma=4.0)
    assert w[0] == 1.0 and len(w) == 7
    assert torch.allclose(w[1:] / w[:-1], torch.full((6,), torch.exp(torch.tensor(-0.25)).item()))


def test_distillation_loss_is_zero_only_when_distributions_match():
    logits = torch.randn(2, 5, 11)
    assert distillation_loss(logits, logits).abs() < 1e-6
    assert distillation_loss(logits, logits + torch.randn(2, 5, 11)) > 0.01


def test_the_tv_mix_is_a_tenth_argmax_cross_entropy_and_nine_tenths_total_variation():
    """DFlash's `tv` labels: the DSpark paper's mix, by hand. At the target's own distribution only the cross-entropy
    term is left; the TV term sees the whole distribution: a student with the teacher's argmax but another spread of
    the rest pays for it, where the argmax loss alone would not tell them apart."""
    from engine.train.dflash import LABELS, argmax_cross_entropy

    teacher, student = torch.randn(3, 4, 9), torch.randn(3, 4, 9)
    p, q = teacher.softmax(-1), student.softmax(-1)
    by_hand = 0.1 * -q.log().gather(-1, p.argmax(-1, keepdim=True)).squeeze(-1) + 0.9 * 0.5 * (p - q).abs().sum(-1)
    assert torch.allclose(LABELS["tv"](teacher, student), by_hand, atol=1e-6)
    assert torch.allclose(LABELS["tv"](teacher, teacher), 0.1 * argmax_cross_entropy(teacher, teacher), atol=1e-6)
    flatter = teacher / 3  # the same argmax everywhere, another distribution
    assert torch.equal(flatter.argmax(-1), teacher.argmax(-1))
    assert (LABELS["tv"](teacher, flatter) - 0.1 * argmax_cross_entropy(teacher, flatter)).min() > 0.01


def test_schedule_warms_up_then_decays():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == 0.1 and lr_at(9, cfg) == 1.0
    assert lr_at(50, cfg) < 1.0 and abs(lr_at(100, cfg) - 0.1) < 1e-9


def test_dspark_loss_trains_every_part(random_engine):
    from engine.train.dspark import dspark_loss

    drafter = copy.deepcopy(random_engine.drafter_models["dspark"]).train().requires_grad_(True)
    x = torch.randint(2, 4000, (2, 40), generator=torch.Generator().manual_seed(0))
    loss = dspark_loss(drafter, random_engine.target, torch.Generator().manual_seed(1))(x)
    loss.backward()
    assert torch.isfinite(loss)
    for name in ("fc.weight", "layers.0.self_attn.q_proj.weight", "markov_head.markov_w2.weight",
                 "confidence_head.proj.weight"):
        assert drafter.get_parameter(name).grad.abs().sum() > 0, name


def test_dspark_argmax_labels_keep_the_ce_and_confidence_terms_only(random_engine):
    """labels="argmax" (the greedy phase): Σ_k w_k (CE(q_k, argmax p_k) + BCE(c_k, [argmax q_k = argmax p_k]));
    the paper's mix differs; an unknown kind is refused."""
    import math

    import torch.nn.functional as F

    from engine.train.dspark import _outputs, dspark_loss

    drafter, target = random_engine.drafter_models["dspark"], random_engine.target
    x = torch.randint(2, 4000, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hard = dspark_loss(drafter, target, torch.Generator().manual_seed(1), labels="argmax")(x)
        paper = dspark_loss(drafter, target, torch.Generator().manual_seed(1))(x)
        hidden, logits, teacher, prev = _outputs(drafter, target, x, torch.Generator().manual_seed(1))
        log_q = logits.log_softmax(-1)
        ce = -log_q.gather(-1, teacher.argmax(-1, keepdim=True)).squeeze(-1)
        matches = (logits.argmax(-1) == teacher.argmax(-1)).float()  # survival at temperature 0, not 1 − TV
        bce = F.binary_cross_entropy_with_logits(drafter.confidence_logits(hidden, prev), matches, reduction="none")
    w = torch.tensor([math.exp(-k / 4) for k in range(drafter.block_size)])
    assert torch.allclose(hard, ((ce + bce) * w).sum(-1).mean() / w.sum(), atol=1e-5)
    assert not torch.allclose(hard, paper, atol=1e-3)
    with pytest.raises(ValueError, match="labels"):
        dspark_loss(drafter, target, torch.Generator(), labels="soft")


def test_temperature_scaling_recovers_an_overconfident_head():
    """Outcomes drawn from σ(logit / 3): the fitted temperatures come out near 3 and the error drops."""
    from engine.train.dspark import fit_temperatures, survival_ece

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4000, 3, generator=g) * 4 + 2
    correct = torch.rand(4000, 3, generator=g) < torch.sigmoid(logits / 3)
    temperatures = fit_temperatures(logits, correct)
    assert all(2.4 < t < 3.7 for t in temperatures), temperatures
    assert survival_ece(logits, correct, temperatures) < 0.5 * survival_ece(logits, correct, [1.0] * 3)


@pytest.mark.parametrize("test_half_scale, kept", [(3.0, "fitted"), (1.0, "identity")])
def test_calibration_keeps_temperatures_only_when_they_lower_the_held_out_error(monkeypatch, test_half_scale, kept):
    """Outcomes of the fitting half drawn from σ(logit / 3): the fit finds temperatures near 3. They are stored if
    the other half behaves alike, and replaced by 1 if it is calibrated as it is (the fit would make it worse)."""
    import engine.train.dspark as dspark

    def outcomes(drafter, target, windows, seed):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(4000, 3, generator=g) * 4 + 2
        scale = 3.0 if seed == 1 else test_half_scale
        return logits, torch.rand(4000, 3, generator=g) < torch.sigmoid(logits / scale)

    monkeypatch.setattr(dspark, "greedy_outcomes", outcomes)
    drafter = type("Drafter", (), {"config": type("Config", (), {})()})()
    record = dspark.calibrate(drafter, None, torch.zeros(8, 4))
    assert all(2.4 < t < 3.7 for t in record["fitted_temperatures"])
    expected = record["fitted_temperatures"] if kept == "fitted" else [1.0, 1.0, 1.0]
    assert record["temperatures"] == drafter.confidence_temperatures == drafter.config.confidence_temperatures == expected
    assert record["survival_ece_after"] == min(record["survival_ece_before"], record["survival_ece_with_fitted"])


def test_loop_detector_sees_periodic_tails_only():
    from engine.train.card import is_loop

    assert is_loop(list(range(10)) + [7, 8, 9] * 9)
    assert is_loop([4] * 30)
    assert not is_loop(list(range(40)))
    assert not is_loop([1, 2, 3] * 3)  # too short to judge


def test_the_card_reads_a_models_history_through_its_earlier_records():
    """A model trained on with --from-shipped keeps each earlier record under "earlier": the card names its
    rounds, oldest first, and finds the growth of the target in whichever record it happened."""
    from engine.train.card import grown_from, record_chain, rounds_text

    first = {"train_config": {"steps": 3000}, "grow_phase": {"from_layers": 16}}
    one = {"more": {"phase": {"steps": 2000}, "unloop_phase": {"steps": 100}}, "earlier": first}
    two = {"more": {"phase": {"steps": 500}}, "earlier": one}
    assert record_chain(two) == [first, one, two]
    assert rounds_text(first) is None and rounds_text(one) == "1 round (2000 steps + 100 of unlikelihood)"
    assert rounds_text(two) == "2 rounds (2000 steps + 100 of unlikelihood, then 500 steps)"
    assert grown_from(two) == grown_from(first) == 16 and grown_from({"train_config": {}}) is None
    drafter = {"more": {"greedy_phase": {"steps": 6000}}, "earlier": {"more": {"greedy_phase": {"steps": 2000}},
                                                                       "earlier": {"train_config": {}}}}
    assert rounds_text(drafter) == "2 rounds (2000 greedy steps, then 6000 greedy steps)"


def _bench_report(weights: dict, busy: bool = False, **changes) -> dict:
    """A report shaped as `python -m engine.measure.bench --json` writes it (only the fields the card reads)."""
    def lane(speedup):
        return {"speedup": speedup, "decode_speedup": speedup + 0.1, "tau": 3.0, "per_position_acceptance": [0.8, None]}

    report = {"preset": "tiny", "weights": weights, "identical_outputs": True, "busy_machine": busy, "num_prompts": 65,
              "max_new_tokens": 64, "serial_k": 4, "drafts_per_block": 7, "device": "cpu", "threads": 1,
              "lanes": {"baseline": {"tokens_per_s": 60.0 if busy else 70.0}, "eagle3": lane(1.9),
                        "dflash": lane(2.05 if busy else 2.1), "hf_generate": {"speedup": 0.9}}}
    return {**report, **changes}


def test_the_cards_speed_table_is_a_quiet_and_a_busy_bench_of_its_own_weights():
    from engine.train.card import bench_lines, bench_pair, kept_bench

    weights = {"target": "a" * 12, "dflash-drafter": "b" * 12}
    pair = bench_pair([_bench_report(weights, busy=True), _bench_report(weights)], weights)
    assert (pair["quiet"]["busy"], pair["busy"]["busy"]) == (False, True)
    assert set(pair["quiet"]["lanes"]) == {"eagle3", "dflash"}  # transformers' peers are not the card's
    table = "\n".join(bench_lines(pair))
    assert "| dflash | 3.00 | 0.80, — | 2.10× | 2.20× | 2.05× | 2.15× |" in table
    assert "| baseline | 1.00 | — | 1.00× (70.0 tokens/s) | 1.00× | 1.00× (60.0 tokens/s) | 1.00× |" in table
    assert "busy: speedup" not in "\n".join(bench_lines({**pair, "busy": None}))
    refused = [([_bench_report({**weights, "target": "c" * 12})], "other weights"),
               ([_bench_report(weights, identical_outputs=False)], "baseline's output"),
               ([_bench_report(weights, preset="qwen3-4b")], "preset"),
               ([_bench_report(weights, busy=True)], "got 0 quiet and 1 busy"),
               ([_bench_report(weights), _bench_report(weights)], "got 2 quiet and 0 busy"),
               ([_bench_report(weights), _bench_report(weights, busy=True, drafts_per_block=5)], "different settings"),
               ([{"preset": "tiny", "weights": weights, "identical_outputs": True}], "not a report")]
    for reports, message in refused:
        with pytest.raises(ValueError, match=message):
            bench_pair(reports, weights)
    # a card written again on the same weights keeps the table; once they change, it is dropped
    assert kept_bench({"weights": weights, "bench": pair}, weights) == pair
    assert kept_bench({"weights": {**weights, "target": "c" * 12}, "bench": pair}, weights) is None
    assert kept_bench(None, weights) is None


def test_the_card_keeps_one_bench_above_temperature_zero_with_each_lanes_greedy_weights_beside():
    from engine.train.card import bench_pair, sampled_lines

    weights = {"target": "a" * 12, "dflash-drafter": "b" * 12}

    def hot(name_speedups):
        lanes = {"baseline": {"tokens_per_s": 70.0}}
        lanes.update({name: {"speedup": s, "tau": 2.5, "expected_acceptance": 0.41, "one_minus_tv": 0.42,
                             "judged": 3100} for name, s in name_speedups.items()})
        return _bench_report(weights, temperature=1.0, verify_rule="rejection", lanes=lanes)

    pair = bench_pair([_bench_report(weights), hot({"dflash": 1.6, "dflash_greedy_weights": 1.1})], weights)
    assert pair["quiet"] is not None and set(pair["sampled"]["lanes"]) == {"dflash", "dflash_greedy_weights"}
    table = "\n".join(sampled_lines(pair["sampled"]))
    assert "| dflash | 2.50 | 0.410 | 0.420 | 3100 | 1.60× |" in table and "--temperature 1" in table
    with pytest.raises(ValueError, match="at most one bench report above temperature 0"):
        bench_pair([_bench_report(weights), hot({"dflash": 1.6}), hot({"dflash": 1.5})], weights)
    assert bench_pair([_bench_report(weights)], weights)["sampled"] is None


def test_the_shipped_card_describes_the_shipped_weights():
    """assets/MODEL_CARD.md is what its measurements (model_card.json) render, and they were taken on the weights
    in assets/: new weights shipped without `python -m engine.train card` fail here."""
    from engine.contract.presets import ASSETS_DIR, PRESETS, weights_digests
    from engine.train.card import render_markdown

    card = json.loads((ASSETS_DIR / "model_card.json").read_text())
    assert card["weights"] == weights_digests(PRESETS["tiny"])
    assert card["bench"]["quiet"] and card["bench"]["busy"]  # the speed table, quiet and busy
    assert (ASSETS_DIR / "MODEL_CARD.md").read_text() == render_markdown(card)


def test_the_card_stage_refuses_a_bench_report_before_measuring(tmp_path, capsys):
    """A wrong --bench fails in one line at once, not after the card's minutes of measuring."""
    import engine.train.__main__ as cli
    from engine.contract.presets import PRESETS, weights_digests

    other = tmp_path / "other.json"
    other.write_text(json.dumps(_bench_report({**weights_digests(PRESETS["tiny"]), "target": "0" * 12})))
    assert cli.main(["card", "--bench", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli.main(["card", "--bench", str(other)]) == 2
    assert "other weights" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["target", "--bench", str(other)])


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu,
                                   pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")])


def _cli_in(tmp_path, monkeypatch):
    """`python -m engine.train` writing into tmp_path (assets/ with the shipped tokenizer, runs/) and reading
    a tiny random corpus instead of the standard library's."""
    import shutil

    import engine.train.__main__ as cli
    import engine.train.lm as lm

    assets, runs = tmp_path / "assets", tmp_path / "runs"
    shutil.copytree(cli.ASSETS / "tokenizer", assets / "tokenizer")
    g = torch.Generator().manual_seed(0)
    # held out: one 512-token window for a target, two 256-token ones for a drafter, 8 64-token calibration prefixes
    streams = {"train": torch.randint(2, 4000, (6000,), generator=g),
               "heldout": torch.randint(2, 4000, (600,), generator=g)}
    monkeypatch.setattr(cli, "ASSETS", assets)
    monkeypatch.setattr(cli, "RUNS", runs)
    monkeypatch.setattr(lm, "tokenize_corpus", lambda tokenizer, path: streams)
    # greedy-data's function openings: two small training files instead of the standard library
    import engine.train.selfdata as selfdata
    from engine.train.corpus import CorpusFile

    files = []
    for name in ("a.py", "b.py"):
        path = tmp_path / name
        path.write_text(("x = 1\n" * 120 + "def f(y):\n    return y\n") * 3)
        files.append(CorpusFile(name, path, False))
    monkeypatch.setattr(selfdata, "corpus_files", lambda: files)
    monkeypatch.setattr(cli, "DRAFTER_BATCH", 2)  # the stages' code runs whole; a quarter of the arithmetic
    return cli, assets, runs


_ROWS_WRITTEN: dict = {}
_ROW_FILES = {"self-data": ("selfdata.pt",), "greedy-data": ("greedy.pt", "greedy.json"),
              "sampled-data": ("sampled.pt", "sampled.json")}


def _rows_of(cli, assets, runs, command: list[str]) -> None:
    """`python -m engine.train self-data|greedy-data|sampled-data ...`, run once per module for each target (its
    weights' bytes), command and row sizes: the rows depend on nothing else (the same tiny corpus and seed in every
    test), so a later test that asks for the same ones gets the files as the stage wrote them (the target's
    continuations, seconds of forwards, once)."""
    import hashlib

    import engine.train.selfdata as selfdata

    weights = hashlib.sha256((assets / "target" / "model.safetensors").read_bytes()).hexdigest()
    key = (tuple(command), weights, selfdata.NEW_TOKENS, selfdata.BATCH)
    if key not in _ROWS_WRITTEN:
        assert cli.main(command) == 0
        _ROWS_WRITTEN[key] = {name: (runs / name).read_bytes() for name in _ROW_FILES[command[0]]}
    runs.mkdir(parents=True, exist_ok=True)
    for name, data in _ROWS_WRITTEN[key].items():
        (runs / name).write_bytes(data)


def _calibration_rows_once(cli, monkeypatch) -> None:
    """DSpark's calibration rows (the target's greedy continuations of held-out windows) made once per target's
    weights: every export of a test calibrates on them anew (dspark.calibrate runs each time), and from the same
    target and windows they are the same rows."""
    made, rows_of = {}, cli._heldout_greedy_rows

    def once(target, streams):
        key = (tuple(hash(v.detach().cpu().numpy().tobytes()) for v in target.state_dict().values()),
               id(streams["heldout"]))
        if key not in made:
            made[key] = rows_of(target, streams)
        return made[key].clone()

    monkeypatch.setattr(cli, "_heldout_greedy_rows", once)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("stage", ["dflash", "dspark"])
def test_block_drafter_training_runs_end_to_end(stage, device, tmp_path, monkeypatch, tokenizer, random_engine):
    """`python -m engine.train dflash|dspark` on a tiny random target and a tiny corpus: it trains, resumes,
    calibrates (DSpark) and exports a checkpoint the engine loads; on the CPU, and on a GPU where there is one."""
    import engine.train.lm as lm
    from engine.models import load_drafter

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    random_engine.target.save_pretrained(assets / "target")
    monkeypatch.setattr(cli, "SELF_DATA_STEPS", 1)
    monkeypatch.setattr(cli, "GREEDY_STEPS", dict.fromkeys(cli.GREEDY_STEPS, 1))
    monkeypatch.setattr(cli, "CALIBRATION_ROWS", 4)  # DSpark's calibration: few rows are enough to run it
    import engine.train.selfdata as selfdata

    monkeypatch.setattr(selfdata, "BATCH", 16)  # the 16 self-data rows in one batch, not the first 16 of 32
    _calibration_rows_once(cli, monkeypatch)
    assert cli.main([stage, "--steps", "2", "--threads", "1", "--device", "tpu"]) == 2  # refuses an unknown device
    assert cli.main([stage, "--steps", "2", "--threads", "1"]) == 2  # refuses: no self-data yet
    on = ["--threads", "1", "--device", device]
    _rows_of(cli, assets, runs, ["self-data", "--steps", "16", *on])
    assert torch.load(runs / "selfdata.pt").shape == (16, 256)
    assert cli.main([stage, "--steps", "2", *on]) == 2  # refuses: no greedy data yet (its last phase needs them)
    one_cycle = ["--restart-steps", "0", "--greedy-steps", "0"]
    assert cli.main([stage, "--steps", "1", *one_cycle, *on]) == 0
    assert cli.main([stage, "--steps", "2", *one_cycle, *on]) == 0  # resumes from step 1
    model = load_drafter(str(assets / f"{stage}-drafter"), METHOD_REGISTRY[stage].kinds, torch.device("cpu"))
    record = json.loads((assets / f"{stage}-drafter" / "training.json").read_text())
    assert record["train_config"]["steps"] == 2
    assert record["train_config"]["device"] == device
    # the default: bfloat16 autocast where the device computes it natively, float32 weights
    assert record["train_config"]["precision"] == lm.native_precision(device)
    assert record["self_data_phase"]["self_data_fraction"] == 0.75
    assert "second_cycle" not in record and not (runs / stage / "cycle2").exists()
    assert "greedy_phase" not in record and not (runs / stage / "self" / "greedy").exists()
    if stage == "dspark":
        assert len(record["calibration"]["temperatures"]) == model.block_size
        assert model.confidence_temperatures == pytest.approx(record["calibration"]["temperatures"])
    # By default a second cycle as long as the first, from those weights, the self-data phase again, and last
    # the greedy phase on greedy-data's rows; recorded
    before = load_drafter(str(assets / f"{stage}-drafter"), METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
    _rows_of(cli, assets, runs, ["greedy-data", "--steps", "6", *on])
    assert torch.load(runs / "greedy.pt").shape == (6, 256)
    assert cli.main([stage, "--steps", "2", *on]) == 0
    assert torch.load(runs / stage / "cycle2" / "self" / "ckpt.pt", weights_only=False)["step"] == 1
    assert torch.load(runs / stage / "cycle2" / "self" / "greedy" / "ckpt.pt", weights_only=False)["step"] == 1
    record = json.loads((assets / f"{stage}-drafter" / "training.json").read_text())
    assert record["second_cycle"]["steps"] == 2
    assert record["second_cycle"]["lr"] == record["train_config"]["lr"] / 2
    assert record["second_self_data_phase"]["lr"] == record["second_cycle"]["lr"] / 2
    assert record["greedy_phase"]["self_data_fraction"] == 1.0
    assert record["greedy_phase"]["labels"] == "argmax"
    after = load_drafter(str(assets / f"{stage}-drafter"), METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the export is the second cycle's


@pytest.mark.slow
def test_eagle3_training_ends_with_the_greedy_phase(tmp_path, monkeypatch, tokenizer):
    """`python -m engine.train eagle3`: its phase on corpus and self-data, then the greedy phase (argmax labels,
    greedy rows only) from those weights; the export is the greedy phase's and records it; --greedy-steps 0
    skips it, and the option is refused on stages without that phase."""
    from engine.models import load_drafter

    from conftest import tiny_qwen3

    import engine.train.selfdata as selfdata

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    tiny_qwen3(len(tokenizer), layers=8, hidden=32).save_pretrained(assets / "target")  # EAGLE-3 reads 5 layers
    monkeypatch.setattr(cli, "GREEDY_STEPS", dict.fromkeys(cli.GREEDY_STEPS, 1))
    monkeypatch.setattr(selfdata, "BATCH", 8)  # the 8 self-data rows in one batch of 8, not the first 8 of 32
    for wrong in (["target", "--greedy-steps", "2"], ["eagle3", "--greedy-steps", "-1"]):
        with pytest.raises(SystemExit):
            cli.main(wrong)
    on = ["--threads", "1"]
    assert cli.main(["self-data", "--steps", "8", *on]) == 0
    assert cli.main(["eagle3", "--steps", "1", "--greedy-steps", "0", *on]) == 0
    assert "greedy_phase" not in json.loads((assets / "eagle3-drafter" / "training.json").read_text())
    first = load_drafter(str(assets / "eagle3-drafter"), ("eagle3",), torch.device("cpu")).state_dict()
    assert cli.main(["greedy-data", "--steps", "4", *on]) == 0
    assert cli.main(["eagle3", "--steps", "1", *on]) == 0
    assert torch.load(runs / "eagle3" / "greedy" / "ckpt.pt", weights_only=False)["step"] == 1
    record = json.loads((assets / "eagle3-drafter" / "training.json").read_text())
    assert record["greedy_phase"]["labels"] == "argmax" and record["greedy_phase"]["self_data_fraction"] == 1.0
    after = load_drafter(str(assets / "eagle3-drafter"), ("eagle3",), torch.device("cpu")).state_dict()
    assert any(not torch.equal(first[k], after[k]) for k in first)


def test_target_training_runs_a_second_cycle_on_request_and_exports(tmp_path, monkeypatch):
    """`python -m engine.train target --restart-steps N`: a first cosine cycle, then a second one from its weights
    (half the peak rate, other windows) in runs/target/cycle2; the export records both and counts both cycles'
    tokens. Without the option, one cycle."""
    import engine.train.configs as configs
    from engine.models import load_causal_lm

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    monkeypatch.setattr(configs, "target_config",
                        lambda vocab_size: tiny_qwen3(vocab_size, layers=1, context=512).config)
    for wrong in (["eagle3", "--restart-steps", "2"], ["target", "--restart-steps", "-1"]):
        with pytest.raises(SystemExit):  # argparse's usage error, before anything trains
            cli.main(wrong)
    assert cli.main(["target", "--steps", "1", "--threads", "1"]) == 0
    assert not (runs / "target/cycle2").exists()
    assert "second_cycle" not in json.loads((assets / "target" / "training.json").read_text())
    assert not (runs / "target/unloop").exists()  # the unloop phase only on request (tested below)
    assert cli.main(["target", "--steps", "1", "--restart-steps", "1", "--threads", "1"]) == 0
    first, second = (torch.load(d / "ckpt.pt", weights_only=False) for d in (runs / "target", runs / "target/cycle2"))
    assert first["step"] == second["step"] == 1
    # the second cycle trained further: the export is its weights, not the first cycle's
    assert any(not torch.equal(first["model"][k], second["model"][k]) for k in first["model"])
    record = json.loads((assets / "target" / "training.json").read_text())
    assert record["second_cycle"]["lr"] == record["train_config"]["lr"] / 2
    assert record["second_cycle"]["seed"] == record["train_config"]["seed"] + 1
    assert record["train_tokens"] == 2 * 1 * 8 * 512
    model = load_causal_lm(str(assets / "target"), torch.device("cpu"))
    exported = model.state_dict()
    assert all(torch.allclose(exported[k].float(), v.float(), atol=1e-2)
               for k, v in second["model"].items() if k in exported)


def test_repeated_ngrams_are_found_in_the_continuation_only():
    from engine.train.unloop import repeated_ngram_mask

    rows = torch.tensor([[1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 9],  # "1 2 3 4" again at 7, "2 3 4 1" again at 8 …
                         [5, 6, 7, 8, 5, 6, 7, 8, 0, 0, 0]])
    mask = repeated_ngram_mask(rows, start=0)
    assert mask[0].nonzero().flatten().tolist() == [7, 8, 9]  # … "3 4 1 2" at 9; "4 1 2 9" is new
    assert mask[1].nonzero().flatten().tolist() == [7]
    # n-grams of the prompt part do not count: from position 4 on, only "5 6 7 8 | 0 0 0" is seen
    assert repeated_ngram_mask(rows, start=4)[1].nonzero().flatten().tolist() == []
    assert repeated_ngram_mask(rows, start=4)[0].nonzero().flatten().tolist() == []
    assert repeated_ngram_mask(torch.tensor([[3] * 7]), start=0, n=2)[0].tolist() == [False, False] + [True] * 5


def test_loop_tails_are_the_tokens_of_a_loop_under_way_only():
    from engine.train.card import LOOP_WINDOW
    from engine.train.unloop import loop_tail_mask

    prompt, fresh = [7] * 5, list(range(100, 130))  # the prompt repeats itself: it does not count
    row = torch.tensor([prompt + fresh + [1, 2, 3] * 12])
    mask = loop_tail_mask(row, start=5)[0]
    loop_start = 5 + len(fresh)
    # a loop is under way once LOOP_WINDOW tokens of it repeat: from then on every token is penalised
    assert mask.nonzero().flatten().tolist() == list(range(loop_start + LOOP_WINDOW - 1, row.shape[1]))
    # repeats that are not a loop (a line written twice, then new text) are left alone
    assert not loop_tail_mask(torch.tensor([fresh[:10] * 2 + fresh[10:]]), start=0).any()


def test_unlikelihood_is_minus_log_one_minus_p_of_the_penalised_tokens():
    from engine.train.unloop import unlikelihood

    logits = torch.randn(2, 5, 11)
    ids = torch.randint(0, 11, (2, 5))
    penalised = torch.zeros(2, 5, dtype=torch.bool)
    penalised[0, 2] = penalised[1, 4] = True
    p = logits.softmax(-1)
    expected = -(torch.log(1 - p[0, 1, ids[0, 2]]) + torch.log(1 - p[1, 3, ids[1, 4]])) / 2
    assert unlikelihood(logits, ids, penalised).item() == pytest.approx(expected.item(), rel=1e-5)
    assert unlikelihood(logits, ids, torch.zeros_like(penalised)).item() == 0.0


def test_unloop_loss_lowers_the_probability_of_a_loop():
    """A few steps of the unloop loss on a looping continuation make its repeated tokens less likely, while the
    corpus rows keep a next-token loss (the loss is their cross-entropy plus the unlikelihood)."""
    from engine.train.unloop import repeated_ngram_mask, unlikelihood, unloop_loss

    from conftest import tiny_qwen3

    model = tiny_qwen3(50, layers=1).requires_grad_(True)
    corpus = torch.randint(2, 50, (2, 24), generator=torch.Generator().manual_seed(0))
    loop = torch.cat([torch.arange(10, 18), torch.tensor([20, 21, 22, 23] * 4)])[None]  # prompt of 8, then a loop
    batch = torch.cat([corpus, loop])
    loss_fn = unloop_loss(model, num_loop_rows=1, prefix_tokens=8, rule="ngrams")
    penalised = repeated_ngram_mask(loop, 8)
    with torch.no_grad():
        ce = model(corpus, labels=corpus).loss
        assert loss_fn(batch).item() == pytest.approx((ce + unlikelihood(model(loop).logits, loop, penalised)).item(),
                                                      rel=1e-5)

    def p_repeated() -> float:
        with torch.no_grad():
            p = model(loop).logits[:, :-1].softmax(-1).gather(-1, loop[:, 1:, None]).squeeze(-1)
        return p[penalised[:, 1:]].mean().item()

    before = p_repeated()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(5):
        loss_fn(batch).backward()
        optimizer.step()
        optimizer.zero_grad()
    assert p_repeated() < before


@pytest.mark.slow
def test_target_training_ends_with_the_unloop_phase(tmp_path, monkeypatch):
    """`python -m engine.train target --unloop-steps N`: after its cycles, the target continues prompts greedily
    (rows kept in runs/target/unloop/rows.pt), trains the unlikelihood phase from its weights and exports that; the
    record says so. The option is refused on other stages and below zero."""
    import engine.train.configs as configs
    from engine.models import load_causal_lm

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    monkeypatch.setattr(configs, "target_config",
                        lambda vocab_size: tiny_qwen3(vocab_size, layers=1, context=512).config)
    monkeypatch.setattr(cli, "UNLOOP_ROWS", 8)
    import engine.train.selfdata as selfdata

    monkeypatch.setattr(selfdata, "NEW_TOKENS", 32)  # the unloop phase's greedy rows: 64 + 32 tokens
    for wrong in (["dflash", "--unloop-steps", "2"], ["target", "--unloop-steps", "-1"]):
        with pytest.raises(SystemExit):
            cli.main(wrong)
    assert cli.main(["target", "--steps", "1", "--unloop-steps", "1", "--threads", "1"]) == 0
    rows = torch.load(runs / "target/unloop/rows.pt")
    assert rows.shape == (8, 96)
    first, unloop = (torch.load(d / "ckpt.pt", weights_only=False) for d in (runs / "target", runs / "target/unloop"))
    assert unloop["step"] == 1 and unloop["config"]["batch_size"] == 16 and unloop["config"]["seq_len"] == 96
    assert any(not torch.equal(first["model"][k], unloop["model"][k]) for k in first["model"])
    record = json.loads((assets / "target" / "training.json").read_text())
    assert record["unloop_phase"]["steps"] == 1 and record["unloop_phase"]["rule"] == "tails"
    assert record["train_tokens"] == 1 * 8 * 512 + 1 * 16 * 96
    exported = load_causal_lm(str(assets / "target"), torch.device("cpu")).state_dict()
    assert all(torch.allclose(exported[k].float(), v.float(), atol=1e-2)
               for k, v in unloop["model"].items() if k in exported)


def test_batches_mix_in_target_written_rows():
    from engine.train.lm import TrainConfig, sample_batch

    streams = {"train": torch.arange(1000) % 7 + 100, "self": torch.full((5, 64), 3)}
    x = sample_batch(streams, TrainConfig(batch_size=8, seq_len=32, self_data_fraction=0.75), torch.Generator())
    assert x.shape == (8, 32)
    assert (x[:2] >= 100).all() and (x[2:] == 3).all()


def test_a_batch_can_be_all_target_written_rows():
    """self_data_fraction 1.0 (the greedy phase): every window is the head of a row of streams["self"]."""
    from engine.train.lm import TrainConfig, sample_batch

    streams = {"train": torch.arange(1000) % 7 + 100, "self": torch.arange(5 * 64).view(5, 64) + 1000}
    x = sample_batch(streams, TrainConfig(batch_size=4, seq_len=32, self_data_fraction=1.0), torch.Generator())
    assert x.shape == (4, 32) and (x >= 1000).all() and ((x[:, 0] - 1000) % 64 == 0).all()  # whole rows' heads


def test_argmax_labels_score_only_the_targets_greedy_choice(random_engine):
    """dflash_loss(labels="argmax"): the position-weighted −log q(argmax p) of every drafted position; "soft"
    is the cross-entropy to the whole of p; they differ, and an unknown label kind is refused."""
    from engine.train.dflash import dflash_loss

    target, drafter = random_engine.target, random_engine.drafter_models["dflash"]
    x = torch.randint(2, 4000, (2, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        hard = dflash_loss(drafter, target, torch.Generator().manual_seed(4), labels="argmax")(x)
        soft = dflash_loss(drafter, target, torch.Generator().manual_seed(4))(x)
        draft_logits, teacher_logits = dflash_batch(drafter, target, x, torch.Generator().manual_seed(4))
    w = position_weights(drafter.block_size)
    picked = draft_logits.log_softmax(-1).gather(-1, teacher_logits.argmax(-1, keepdim=True)).squeeze(-1)
    assert torch.allclose(hard, (-picked * w).sum(-1).mean() / w.sum(), atol=1e-5)
    expected_soft = -(teacher_logits.softmax(-1) * draft_logits.log_softmax(-1)).sum(-1)
    assert torch.allclose(soft, (expected_soft * w).sum(-1).mean() / w.sum(), atol=1e-5)
    assert not torch.allclose(hard, soft, atol=1e-3)
    with pytest.raises(ValueError, match="labels"):
        dflash_loss(drafter, target, torch.Generator(), labels="hard")


def test_greedy_rows_are_the_targets_greedy_continuations(tmp_path, monkeypatch, tokenizer, random_engine):
    """greedy-data: three quarters of the rows continue text ending at a line that opens a function (cut from
    training files only), the rest random windows; every continuation is the target's greedy decoding."""
    import engine.train.selfdata as selfdata
    from engine.train.corpus import CorpusFile

    monkeypatch.setattr(selfdata, "PREFIX_TOKENS", 12)
    monkeypatch.setattr(selfdata, "NEW_TOKENS", 6)
    monkeypatch.setattr(selfdata, "PROMPT_CHARS", 40)
    body = "x = 1\n" * 8
    files = []
    for name, heldout in (("a.py", False), ("b.py", False), ("held.py", True)):
        path = tmp_path / name
        path.write_text(f"{body}def {name[0]}_one(self):\n    pass\n{body}def {name[0]}_two(y):\n    return y\n")
        files.append(CorpusFile(name, path, heldout))
    monkeypatch.setattr(selfdata, "corpus_files", lambda: files)
    target = random_engine.target
    rows = selfdata.generate_greedy_rows(target, tokenizer, torch.randint(2, 4000, (500,)), 4, seed=0, log=lambda _: None)
    assert rows.shape == (4, 18)
    openings = {tokenizer.decode(r[:12].tolist()).splitlines()[-1] for r in rows[:3]}  # three quarters
    assert openings <= {"def a_one(self):", "def a_two(y):", "def b_one(self):", "def b_two(y):"}, openings
    with torch.no_grad():
        for row in rows:
            ids = row[None, :12].long()
            for _ in range(6):  # greedy decoding without a cache, one whole forward per token
                ids = torch.cat([ids, target(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            assert row.tolist() == ids[0].tolist()
    with pytest.raises(ValueError, match="function openings"):
        selfdata.def_line_prefixes(tokenizer, 5, seed=0)  # four in the training files, none from held.py


@pytest.mark.parametrize("native", [True, False])
def test_training_defaults_to_bf16_only_where_it_is_computed_natively(native, monkeypatch):
    import engine.train.lm as lm

    monkeypatch.setattr(lm, "cpu_computes_bf16", lambda: native)
    assert lm.native_precision("cpu") == ("bf16" if native else "fp32")
    assert lm.native_precision("cuda") == lm.native_precision("cuda:1") == "bf16"


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_precision_sets_the_forward_dtype_and_keeps_float32_weights(precision, dtype, tmp_path):
    """bf16 runs the loss's forward in bfloat16 autocast (half the step time on these CPUs); the weights, and
    so the checkpoint and the export, stay float32 either way."""
    from engine.train.lm import train

    model = torch.nn.Linear(4, 3)
    seen = []

    def loss_fn(x):
        out = model(x[:, :4].float())
        seen.append(out.dtype)
        return out.float().pow(2).mean()

    streams = {"train": torch.arange(200) % 50, "heldout": torch.arange(100) % 50}
    cfg = TrainConfig(steps=2, batch_size=2, seq_len=8, warmup_steps=1, threads=1, precision=precision, eval_every=2)
    train(model, streams, tmp_path, cfg, loss_fn, lambda windows: 0.0)
    assert seen == [dtype, dtype]
    assert model.weight.dtype == torch.float32
    with pytest.raises(ValueError, match="precision"):
        train(model, streams, tmp_path / "other", TrainConfig(precision="fp16"), loss_fn, lambda windows: 0.0)


def test_a_run_cut_and_resumed_trains_exactly_as_one_never_cut(tmp_path):
    """The batches' generator and the loss's own (a drafter's anchor positions) are both checkpointed: a run
    killed after its step-2 checkpoint and resumed as a fresh process would ends with the uncut run's weights."""
    from engine.train.lm import train

    class Cut(Exception):
        pass

    def run(run_dir, cut_at=None):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        anchors = torch.Generator().manual_seed(1)  # as a drafter's stage makes it: anew in every process
        calls = []

        def loss_fn(x):
            calls.append(1)
            if len(calls) == cut_at:
                raise Cut
            keep = torch.rand(x.shape[0], 8, generator=anchors) < 0.5  # the loss's own random choice
            return model(x[:, :8].float() * keep).pow(2).mean()

        streams = {"train": torch.arange(500) % 37, "heldout": torch.arange(100) % 37}
        cfg = TrainConfig(steps=4, batch_size=4, seq_len=8, warmup_steps=1, threads=1, save_every=2, precision="fp32")
        return train(model, streams, run_dir, cfg, loss_fn, lambda w: 0.0, [anchors]).weight.detach().clone()

    uncut = run(tmp_path / "uncut")
    with pytest.raises(Cut):
        run(tmp_path / "cut", cut_at=4)  # dies in step 4, after the checkpoint of step 2
    assert torch.load(tmp_path / "cut" / "ckpt.pt", weights_only=False)["step"] == 2
    assert torch.equal(run(tmp_path / "cut"), uncut)


def test_eagle3_reads_low_middle_and_high_target_layers_never_the_last():
    from engine.train.eagle3 import feature_layers

    assert feature_layers(8) == [1, 2, 4, 5, 6]  # an 8-layer target's layers
    assert feature_layers(16) == [1, 4, 8, 11, 14]  # the 16-layer target's, before it grew
    assert feature_layers(24) == [1, 6, 12, 17, 22]  # the shipped target's (assets/eagle3-drafter/config.json)
    assert all(max(feature_layers(n)) == n - 2 for n in (8, 16, 24, 36))


@pytest.mark.parametrize("old,new", [(16, 16), (16, 20), (16, 24), (16, 28), (16, 32), (16, 36)])
def test_growing_keeps_the_drafters_feature_layers(old, new):
    """layer_map puts every old layer somewhere new, in order, and the block drafters' default feature layers of
    the grown target are the images of the old target's (EAGLE-3's too at the depths the docstring names)."""
    from engine.drafters.dflash_model import evenly_spaced_layers
    from engine.train.eagle3 import feature_layers as eagle3_layers
    from engine.train.grow import layer_map

    mapping = layer_map(old, new)
    assert len(mapping) == old and mapping[0] == 0 and mapping[-1] == new - 1
    assert all(b > a for a, b in zip(mapping, mapping[1:]))
    assert [mapping[i] for i in evenly_spaced_layers(old)] == evenly_spaced_layers(new)
    if (old, new) in ((16, 16), (16, 20), (16, 24)):
        assert [mapping[i] for i in eagle3_layers(old)] == eagle3_layers(new)
    with pytest.raises(ValueError):
        layer_map(old, old - 1)


def test_a_grown_target_computes_the_same_function_and_learns_in_its_new_layers():
    """Growing 6 layers to 9: the same logits, the old layers' hidden states at their new indices, the same
    greedy continuation through the KV cache (each layer its own cache slot); the new layers' zeroed output
    projections get gradient at once, so training uses them."""
    from engine.train.grow import grow

    from conftest import tiny_qwen3

    model = tiny_qwen3(97, layers=6).eval()
    x = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(0))
    before = model(x, output_hidden_states=True)
    before_text = model.generate(x[:1], max_new_tokens=10, do_sample=False)
    mapping = grow(model, 9)
    assert len(model.model.layers) == model.config.num_hidden_layers == 9
    after = model(x, output_hidden_states=True)
    torch.testing.assert_close(after.logits, before.logits, rtol=0, atol=1e-5)
    for old, new in enumerate(mapping):
        torch.testing.assert_close(after.hidden_states[new + 1], before.hidden_states[old + 1], rtol=0, atol=1e-5)
    assert torch.equal(model.generate(x[:1], max_new_tokens=10, do_sample=False), before_text)
    model.train().requires_grad_(True)
    model(x, labels=x).loss.backward()
    new_layers = [j for j in range(9) if j not in mapping]
    assert new_layers and all(model.model.layers[j].self_attn.o_proj.weight.grad.abs().sum() > 0
                              and model.model.layers[j].mlp.down_proj.weight.grad.abs().sum() > 0 for j in new_layers)


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_a_grown_drafter_drafts_the_same_and_learns_in_its_new_layers(kind, tokenizer):
    """A block drafter grown from 2 layers to 5: the same block hidden states, the same drafts step by step in the
    engine through its cache (each layer its own slot); the new layers' zeroed output projections get gradient."""
    from engine.contract.types import GenerationConfig
    from engine.loop import Engine
    from engine.train.grow import drafter_layer_map, grow_drafter

    from conftest import tiny_dflash, tiny_dspark, tiny_qwen3

    target = tiny_qwen3(len(tokenizer))
    drafter = (tiny_dflash if kind == "dflash" else tiny_dspark)(target, layers=2)
    width = target.config.hidden_size
    generator = torch.Generator().manual_seed(0)
    noise, features = torch.randn(1, 7, width, generator=generator), torch.randn(1, 5, 2 * width, generator=generator)
    positions = torch.arange(12)[None]

    def drafts():
        engine = Engine(target, tokenizer, {kind: drafter}, torch.device("cpu"), preset="random")
        result = engine.generate("def f(x):\n", GenerationConfig(method=kind, max_new_tokens=24, drafts_per_step=6))
        return [step.drafted_ids for step in result.steps]

    before, before_drafts = drafter(noise, features, positions), drafts()
    assert grow_drafter(drafter, 5) == drafter_layer_map(2, 5) == [0, 4]
    assert len(drafter.layers) == drafter.config.num_hidden_layers == len(drafter.config.layer_types) == 5
    assert [layer.self_attn.layer_idx for layer in drafter.layers] == list(range(5))
    torch.testing.assert_close(drafter(noise, features, positions), before, rtol=0, atol=1e-5)
    assert drafts() == before_drafts and any(before_drafts)
    drafter.train().requires_grad_(True)
    drafter(noise, features, positions).square().sum().backward()
    assert all(drafter.layers[j].self_attn.o_proj.weight.grad.abs().sum() > 0
               and drafter.layers[j].mlp.down_proj.weight.grad.abs().sum() > 0 for j in (1, 2, 3))
    with pytest.raises(ValueError):
        drafter_layer_map(5, 4)


@pytest.mark.slow
def test_target_training_grows_the_target_on_request(tmp_path, monkeypatch):
    """`python -m engine.train target --grow-layers N --grow-steps M`: after its cycles the target is deepened
    (runs/target/grow), trained M steps and exported N layers deep; the record says how. A depth below the
    target's is refused before anything trains, the options elsewhere by argparse."""
    import engine.train.configs as configs
    from engine.models import load_causal_lm

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    monkeypatch.setattr(configs, "target_config",
                        lambda vocab_size: tiny_qwen3(vocab_size, layers=5, context=512).config)
    for wrong in (["dflash", "--grow-layers", "8"], ["target", "--grow-steps", "2"],
                  ["target", "--grow-layers", "8", "--grow-steps", "-1"]):
        with pytest.raises(SystemExit):
            cli.main(wrong)
    assert cli.main(["target", "--steps", "1", "--grow-layers", "4", "--threads", "1"]) == 2
    assert not (runs / "target").exists()
    assert cli.main(["target", "--steps", "1", "--grow-layers", "7", "--grow-steps", "1", "--threads", "1"]) == 0
    grown = torch.load(runs / "target/grow/ckpt.pt", weights_only=False)
    assert grown["step"] == 1 and "model.layers.6.mlp.down_proj.weight" in grown["model"]
    record = json.loads((assets / "target" / "training.json").read_text())
    assert record["grow_phase"]["layers"] == 7 and record["grow_phase"]["from_layers"] == 5
    assert record["grow_phase"]["lr"] == record["train_config"]["lr"] / 2
    assert record["train_tokens"] == 2 * 1 * 8 * 512  # the first cycle's step and the grown target's
    model = load_causal_lm(str(assets / "target"), torch.device("cpu"))
    assert model.config.num_hidden_layers == 7
    exported = model.state_dict()
    assert all(torch.allclose(exported[k].float(), v.float(), atol=1e-2) for k, v in grown["model"].items() if k in exported)


@pytest.mark.slow
def test_the_shipped_target_trains_on_from_its_weights(tmp_path, monkeypatch):
    """`target --from-shipped`: a further cycle from the weights in assets/target (runs/target-more), then its
    unloop phase; the export keeps the earlier record beside the new one, and a second round trains in
    runs/target-more2 with a seed of its own. The small LM drafter distilled from each target lives in a folder of that
    target's own: a new target never resumes it."""
    import engine.train.configs as configs
    from engine.models import load_causal_lm

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    tiny = lambda vocab_size: tiny_qwen3(vocab_size, layers=1, context=512).config  # noqa: E731
    monkeypatch.setattr(configs, "target_config", tiny)
    monkeypatch.setattr(configs, "small_lm_config", tiny)
    monkeypatch.setattr(cli, "UNLOOP_ROWS", 8)
    import engine.train.selfdata as selfdata

    monkeypatch.setattr(selfdata, "NEW_TOKENS", 32)  # the unloop phase's greedy rows: 64 + 32 tokens
    for wrong in (["small-lm-drafter", "--from-shipped"], ["target", "--from-shipped", "--restart-steps", "2"],
                  ["target", "--from-shipped", "--grow-layers", "2"]):
        with pytest.raises(SystemExit):
            cli.main(wrong)
    on = ["--threads", "1"]
    assert cli.main(["target", "--steps", "1", *on]) == 0
    assert cli.main(["small-lm-drafter", "--steps", "1", *on]) == 0
    first = json.loads((assets / "target" / "training.json").read_text())
    before = load_causal_lm(str(assets / "target"), torch.device("cpu")).state_dict()

    assert cli.main(["target", "--from-shipped", "--steps", "1", "--unloop-steps", "1", *on]) == 0
    more = torch.load(runs / "target-more" / "ckpt.pt", weights_only=False)
    unloop = torch.load(runs / "target-more" / "unloop" / "ckpt.pt", weights_only=False)
    assert more["step"] == 1 and unloop["step"] == 1
    record = json.loads((assets / "target" / "training.json").read_text())
    assert record["earlier"] == first
    assert record["more"]["phase"]["lr"] == first["train_config"]["lr"] / 2
    assert record["more"]["phase"]["seed"] != first["train_config"]["seed"]
    assert record["more"]["unloop_phase"]["steps"] == 1
    assert record["train_tokens"] == first["train_tokens"] + 1 * 8 * 512 + 1 * 16 * 96
    assert record["heldout_ce_fp32_before"] == pytest.approx(first["heldout_ce_fp32"], abs=0.05)
    after = load_causal_lm(str(assets / "target"), torch.device("cpu")).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # trained on from the shipped weights
    assert all(torch.allclose(after[k].float(), v.float(), atol=1e-2) for k, v in unloop["model"].items() if k in after)
    assert cli.main(["target", "--from-shipped", "--steps", "1", *on]) == 0  # a second round: a folder of its own
    assert torch.load(runs / "target-more2" / "ckpt.pt", weights_only=False)["step"] == 1
    second = json.loads((assets / "target" / "training.json").read_text())
    assert second["earlier"] == record and second["earlier"]["earlier"] == first
    assert second["more"]["phase"]["seed"] not in (first["train_config"]["seed"], record["more"]["phase"]["seed"])

    assert cli.main(["small-lm-drafter", "--steps", "1", *on]) == 0  # a fresh run, not the first one resumed
    ar_runs = sorted((runs / "small-lm-drafter").iterdir())
    assert len(ar_runs) == 2 and all(torch.load(d / "ckpt.pt", weights_only=False)["step"] == 1 for d in ar_runs)


def _ship_untrained_drafters(cli, assets, tokenizer, monkeypatch) -> None:
    """A tiny target in assets/target and the "shipped" feature drafters beside it: built as their stages build them,
    exported untrained with a record of their own; short calibration and continuation rows (96 tokens, longer
    than any block)."""
    from engine.drafters.dflash_model import DFlashDraftModel
    from engine.drafters.dspark_model import DSparkDraftModel
    from engine.drafters.eagle3 import Eagle3DraftModel
    from engine.train import dflash, dspark, eagle3
    import engine.train.selfdata as selfdata
    from engine.train.lm import TrainConfig

    from conftest import tiny_qwen3

    target = tiny_qwen3(len(tokenizer), layers=8, hidden=32)  # EAGLE-3 reads 5 layers
    target.save_pretrained(assets / "target")
    monkeypatch.setattr(cli, "CALIBRATION_ROWS", 4)
    monkeypatch.setattr(selfdata, "NEW_TOKENS", 32)
    drafters = {"dflash": DFlashDraftModel(dflash.dflash_config(target.config, tokenizer.mask_token_id)),
                "dspark": DSparkDraftModel(dspark.dspark_config(target.config, tokenizer.mask_token_id)),
                "eagle3": Eagle3DraftModel(eagle3.eagle3_config(target.config))}
    dspark.init_markov_head(drafters["dspark"])
    eagle3.init_from_target(drafters["eagle3"], target)
    for stage, drafter in drafters.items():
        cli._export(drafter, f"{stage}-drafter", TrainConfig(steps=2, batch_size=2, seq_len=256, lr=1.5e-3),
                    {"train_minutes": 0.5})


@pytest.mark.slow
def test_shipped_drafters_train_a_greedy_phase_more_on_the_new_target(tmp_path, monkeypatch, tokenizer):
    """`dflash|dspark|eagle3 --from-shipped`: one more greedy phase from the shipped drafter's weights
    (runs/<stage>-more), on greedy rows of the target now shipped — rows another target wrote are refused; DSpark
    calibrates anew, EAGLE-3 keeps its frozen embeddings and head; the export keeps the earlier record. A second
    round trains in runs/<stage>-more2 with seeds of its own."""
    from engine.models import load_drafter

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    monkeypatch.setattr(cli, "MORE_GREEDY_STEPS", dict.fromkeys(cli.GREEDY_STEPS, 1))
    _ship_untrained_drafters(cli, assets, tokenizer, monkeypatch)
    on = ["--threads", "1"]
    assert cli.main(["dflash", "--from-shipped", *on]) == 2  # refuses: no greedy rows yet
    _rows_of(cli, assets, runs, ["greedy-data", "--steps", "4", *on])
    tiny_qwen3(len(tokenizer), layers=8, hidden=32, seed=1).save_pretrained(assets / "target")  # a new target
    assert cli.main(["dflash", "--from-shipped", *on]) == 2  # refuses: those rows are the earlier target's
    _rows_of(cli, assets, runs, ["greedy-data", "--steps", "4", *on])
    for stage in ("dflash", "dspark", "eagle3"):
        path = str(assets / f"{stage}-drafter")
        earlier = json.loads((Path(path) / "training.json").read_text())
        weights = load_drafter(path, METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
        assert cli.main([stage, "--from-shipped", *on]) == 0
        assert torch.load(runs / f"{stage}-more" / "greedy" / "ckpt.pt", weights_only=False)["step"] == 1
        record = json.loads((Path(path) / "training.json").read_text())
        assert record["earlier"] == earlier
        assert record["more"]["greedy_phase"]["labels"] == "argmax"
        assert ("calibration" in record["more"]) == ("calibration_sampled" in record["more"]) == (stage == "dspark")
        if stage == "dspark":  # calibrated anew at both temperatures, each list as long as the block
            config = json.loads((Path(path) / "config.json").read_text())
            assert len(config["confidence_temperatures"]) == len(config["confidence_temperatures_sampled"]) \
                == config["block_size"]
            assert config["confidence_temperatures_sampled"] == record["more"]["calibration_sampled"]["temperatures"]
        trained = load_drafter(path, METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
        assert any(not torch.equal(weights[k], trained[k]) for k in weights)
        if stage == "eagle3":  # its frozen copies of the target's embeddings and head stay as they were
            assert torch.equal(weights["embed_tokens.weight"], trained["embed_tokens.weight"])
            assert torch.equal(weights["lm_head.weight"], trained["lm_head.weight"])
    first_round = json.loads((assets / "dflash-drafter" / "training.json").read_text())
    assert cli.main(["dflash", "--from-shipped", *on]) == 0  # a second round: a folder and seed of its own
    assert torch.load(runs / "dflash-more2" / "greedy" / "ckpt.pt", weights_only=False)["step"] == 1
    second = json.loads((assets / "dflash-drafter" / "training.json").read_text())
    assert second["earlier"] == first_round and "more" in first_round  # the chain: this round, the one before, ...
    assert second["more"]["greedy_phase"]["seed"] != first_round["more"]["greedy_phase"]["seed"]


@pytest.mark.slow
def test_shipped_drafters_train_a_distribution_phase_into_checkpoints_for_sampling(tmp_path, monkeypatch, tokenizer):
    """`sampled-data`, then `dflash|eagle3 --sampled`: from the shipped drafter's weights, a distribution
    phase on the target's sampled continuations (runs/<stage>-sampled), exported beside the shipped drafter as
    assets/<stage>-drafter-sampled, which is left as it was; rows of another target are refused; DSpark, whose one
    set of weights serves every temperature, is refused; EAGLE-3 keeps its frozen embeddings and head."""
    from engine.models import load_drafter

    from conftest import tiny_qwen3

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    monkeypatch.setattr(cli, "SAMPLED_STEPS", dict.fromkeys(cli.SAMPLED_STEPS, 1))
    _ship_untrained_drafters(cli, assets, tokenizer, monkeypatch)
    on = ["--threads", "1"]
    assert cli.main(["dflash", "--sampled", *on]) == 2  # refuses: no sampled rows yet
    with pytest.raises(SystemExit):
        cli.main(["small-lm-drafter", "--sampled", *on])
    with pytest.raises(SystemExit):
        cli.main(["dspark", "--sampled", *on])
    _rows_of(cli, assets, runs, ["sampled-data", "--steps", "4", *on])
    tiny_qwen3(len(tokenizer), layers=8, hidden=32, seed=1).save_pretrained(assets / "target")  # a new target
    assert cli.main(["dflash", "--sampled", *on]) == 2  # refuses: those rows are the earlier target's
    _rows_of(cli, assets, runs, ["sampled-data", "--steps", "4", *on])
    for stage in ("dflash", "eagle3"):
        kinds = METHOD_REGISTRY[stage].kinds
        shipped = load_drafter(str(assets / f"{stage}-drafter"), kinds, torch.device("cpu")).state_dict()
        assert cli.main([stage, "--sampled", *on]) == 0
        assert torch.load(runs / f"{stage}-sampled" / "ckpt.pt", weights_only=False)["step"] == 1
        record = json.loads((assets / f"{stage}-drafter-sampled" / "training.json").read_text())
        assert record["from"] == f"assets/{stage}-drafter as shipped" and "earlier" in record
        trained = load_drafter(str(assets / f"{stage}-drafter-sampled"), METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
        again = load_drafter(str(assets / f"{stage}-drafter"), METHOD_REGISTRY[stage].kinds, torch.device("cpu")).state_dict()
        assert all(torch.equal(shipped[k], again[k]) for k in shipped)  # the temperature-0 weights stay
        assert any(not torch.equal(shipped[k], trained[k]) for k in shipped)
        if stage == "eagle3":
            assert torch.equal(shipped["embed_tokens.weight"], trained["embed_tokens.weight"])


def test_position_weights_follow_the_papers_decay_for_each_block_size():
    """γ is the DFlash paper's for its block sizes (4 at 8, 5 at 10, 7 at 16), between them on a line, and the
    default weights of a block of 16 decay by exp(−1/7) a position."""
    from engine.train.dflash import gamma_for

    assert [gamma_for(b) for b in (4, 8, 10, 16, 24)] == [4.0, 4.0, 5.0, 7.0, 7.0]
    assert gamma_for(13) == pytest.approx(6.0)
    w = position_weights(16)
    assert len(w) == 15 and w[0] == 1.0
    assert torch.allclose(w[1:] / w[:-1], torch.full((14,), torch.exp(torch.tensor(-1 / 7)).item()))
    assert torch.equal(position_weights(8), position_weights(8, gamma=4.0))  # the shipped block's weights stay


def test_written_labels_are_the_tokens_the_target_wrote_past_its_prefix():
    """Past the prefix every label is the row's own next token; before it, the target's prediction stays."""
    from engine.train.dflash import written_labels

    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(2, 12, 50, generator=g)
    x = torch.randint(0, 50, (2, 12), generator=g)
    labels = written_labels(teacher, x, 5)
    assert labels.shape == teacher.shape
    assert torch.equal(labels[:, 4:-1].argmax(-1), x[:, 5:])  # position p − 1 predicts token p
    assert torch.equal(labels[:, :4], teacher[:, :4]) and torch.equal(labels[:, -1], teacher[:, -1])
    assert torch.equal(written_labels(teacher, x, 12), teacher)  # nothing written inside the window


def test_written_loss_scores_the_written_token_at_every_drafted_position(random_engine, monkeypatch):
    """dflash_loss(labels="written") is the position-weighted −log q(x_p) of the token each drafted position
    stands on, once past the prefix; inside it, the target's greedy choice as with "argmax"."""
    from engine.train import dflash
    from engine.train.dflash import dflash_loss

    target, drafter = random_engine.target, random_engine.drafter_models["dflash"]
    x = torch.randint(2, 4000, (2, 40), generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(dflash, "PREFIX_TOKENS", 1)  # every token but the first written by "the target"
    with torch.no_grad():
        written = dflash_loss(drafter, target, torch.Generator().manual_seed(4), labels="written")(x)
        argmax = dflash_loss(drafter, target, torch.Generator().manual_seed(4), labels="argmax")(x)
        draft_logits, _ = dflash_batch(drafter, target, x, torch.Generator().manual_seed(4))
    bs = drafter.block_size
    anchors = sample_anchors(2, 40, bs, dflash.ANCHORS_PER_WINDOW, torch.Generator().manual_seed(4))
    tokens = x.gather(1, (anchors[:, :, None] + torch.arange(1, bs)).reshape(2, -1)).view(2, -1, bs - 1)
    picked = draft_logits.log_softmax(-1).gather(-1, tokens[..., None]).squeeze(-1)
    w = position_weights(bs)
    assert torch.allclose(written, (-picked * w).sum(-1).mean() / w.sum(), atol=1e-5)
    assert not torch.allclose(written, argmax, atol=1e-3)  # random text: the target would not write it
    monkeypatch.setattr(dflash, "PREFIX_TOKENS", 40)  # nothing written: the greedy choice throughout
    with torch.no_grad():
        prefix_only = dflash_loss(drafter, target, torch.Generator().manual_seed(4), labels="written")(x)
    assert torch.allclose(prefix_only, argmax, atol=1e-6)


@pytest.mark.slow
def test_self_distillation_trains_the_three_drafters_on_the_same_rows_outside_assets(tmp_path, monkeypatch, tokenizer):
    """`dflash|dspark --self-distill --drafts 15` and `eagle3 --self-distill`: refused without both row sets;
    from the shipped weights, one phase on the greedy and sampled rows together, the same steps and batch for
    the three; exported inside runs/ at the asked block size, loadable by the engine, while assets/ stays as it
    was; DSpark's one export calibrated at both temperatures, and, once shipped, exported again byte for byte
    from its finished checkpoint (a checkpoint not finished is refused: its starting weights are gone)."""
    import shutil

    from engine.models import load_drafter

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    _ship_untrained_drafters(cli, assets, tokenizer, monkeypatch)
    on = ["--threads", "1", "--steps", "1"]
    _rows_of(cli, assets, runs, ["greedy-data", "--steps", "4", "--threads", "1"])
    assert cli.main(["dflash", "--self-distill", *on]) == 2  # refuses: no sampled rows yet
    _rows_of(cli, assets, runs, ["sampled-data", "--steps", "4", "--threads", "1"])
    with pytest.raises(SystemExit):
        cli.main(["eagle3", "--self-distill", "--drafts", "15", *on])
    with pytest.raises(SystemExit):
        cli.main(["dflash", "--drafts", "15", *on])
    shipped = {k: (assets / f"{k}-drafter" / "model.safetensors").read_bytes() for k in ("dflash", "dspark", "eagle3")}
    configs = {}
    for stage, args, folder in (("dflash", ["--drafts", "15"], "dflash-selfdistill-d15"),
                                ("dspark", ["--drafts", "15"], "dspark-selfdistill-d15"),
                                ("eagle3", [], "eagle3-selfdistill")):
        assert cli.main([stage, "--self-distill", *args, *on]) == 0
        state = torch.load(runs / folder / "ckpt.pt", weights_only=False)
        assert state["step"] == 1 and state["config"]["self_data_fraction"] == 1.0
        configs[stage] = state["config"]
        record = json.loads((runs / folder / "export" / "training.json").read_text())
        assert record["from"] == f"assets/{stage}-drafter as shipped" and "4 greedy" in record["rows"]
        model = load_drafter(str(runs / folder / "export"), METHOD_REGISTRY[stage].kinds, torch.device("cpu"))
        if stage != "eagle3":
            assert model.block_size == {"dflash": 16, "dspark": 15}[stage] == record["drafts_per_block"] + (stage == "dflash")
        assert (assets / f"{stage}-drafter" / "model.safetensors").read_bytes() == shipped[stage]
    assert "exp(−(k−1)/7.0)" in json.loads((runs / "dflash-selfdistill-d15" / "export" / "training.json").read_text())["labels"]
    for wrong in (["dflash", "--tv-loss"], ["dspark", "--self-distill", "--tv-loss"]):  # DFlash's self-distilling only
        with pytest.raises(SystemExit):
            cli.main([*wrong, *on])
    assert cli.main(["dflash", "--self-distill", "--tv-loss", *on]) == 0  # the DSpark paper's loss, a folder of its own
    record = json.loads((runs / "dflash-selfdistill-tv" / "export" / "training.json").read_text())
    assert record["labels"].startswith("tv: 0.1 CE") and record["from"] == "assets/dflash-drafter as shipped"
    layers = json.loads((assets / "dflash-drafter" / "config.json").read_text())["num_hidden_layers"]
    for wrong in (["eagle3", "--grow-layers", str(layers + 2)], ["dflash", "--grow-layers", "9", "--grow-steps", "1"]):
        with pytest.raises(SystemExit):
            cli.main([*wrong, "--self-distill", *on])
    assert cli.main(["dflash", "--self-distill", "--grow-layers", str(layers - 1), *on]) == 2  # shallower: refused
    assert cli.main(["dflash", "--self-distill", "--grow-layers", str(layers + 2), *on]) == 0
    export = runs / f"dflash-selfdistill-g{layers + 2}" / "export"
    grown = json.loads((export / "training.json").read_text())["grown"]
    assert grown == {"from_layers": layers, "layers": layers + 2, "old_layer_at": grown["old_layer_at"]}
    assert len(load_drafter(str(export), METHOD_REGISTRY["dflash"].kinds, torch.device("cpu")).layers) == layers + 2
    assert {(c["steps"], c["batch_size"], c["seq_len"]) for c in configs.values()} == {(1, 2, 96)}  # matched
    export = runs / "dspark-selfdistill-d15" / "export"
    config, record = (json.loads((export / name).read_text()) for name in ("config.json", "training.json"))
    assert len(config["confidence_temperatures"]) == len(config["confidence_temperatures_sampled"]) == 15
    assert config["confidence_temperatures"] == record["calibration"]["temperatures"]
    assert config["confidence_temperatures_sampled"] == record["calibration_sampled"]["temperatures"]
    assert record["calibration_sampled"]["outcome"].startswith("token k passes the rejection rule")
    assert not (export.parent / "export-sampled").exists()
    model = load_drafter(str(export), METHOD_REGISTRY["dspark"].kinds, torch.device("cpu"))
    assert model.sampled_confidence_temperatures == config["confidence_temperatures_sampled"]
    assert not list(assets.glob("*-d15")) and not list(assets.glob("*-drafter-sampled"))
    made = {path.name: path.read_bytes() for path in export.iterdir()}
    shutil.copytree(export, assets / "dspark-drafter", dirs_exist_ok=True)  # shipped as it is
    assert cli.main(["dspark", "--self-distill", "--drafts", "15", *on]) == 0  # finished: exported again
    assert {path.name: path.read_bytes() for path in export.iterdir()} == made
    assert cli.main(["dspark", "--self-distill", "--drafts", "15", "--threads", "1", "--steps", "2"]) == 2
    assert torch.load(runs / "dspark-selfdistill-d15" / "ckpt.pt", weights_only=False)["step"] == 1


def test_reexport_keeps_a_dspark_drafter_at_15_drafts_with_both_calibrations(tmp_path):
    """`reexport` on DSpark's shipped shape (15 drafts a block, calibrated at temperatures 0 and 1): the builder takes
    its block size, both calibrations stay in the config, and the folder is written again byte for byte."""
    from engine.drafters.dspark_model import DSparkDraftModel
    from engine.train import dspark
    from engine.train.reexport import reexport

    from conftest import tiny_qwen3

    target = tiny_qwen3(300, layers=4, hidden=32)
    drafter = DSparkDraftModel(dspark.dspark_config(target.config, 1, block_size=15))
    dspark.init_markov_head(drafter)
    drafter.copy_target_embeddings(target)
    drafter.config.confidence_temperatures = [0.5 + i / 100 for i in range(15)]
    drafter.config.confidence_temperatures_sampled = [1.5 + i / 100 for i in range(15)]
    folder = tmp_path / "dspark-drafter"
    drafter.to(torch.float16).save_pretrained(folder)
    written = {path.name: path.read_bytes() for path in folder.iterdir()}
    reexport(folder, "dspark", target)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == written
    config = json.loads((folder / "config.json").read_text())
    assert config["block_size"] == 15 and config["confidence_temperatures_sampled"][0] == 1.5


@pytest.mark.slow
def test_eagle3_matched_follows_the_block_drafters_schedule_phase_for_phase_outside_assets(tmp_path, monkeypatch,
                                                                                          tokenizer):
    """`eagle3 --matched`: a fresh EAGLE-3 drafter through DSpark's recorded schedule, phase for phase (the first
    cycle, the self-data phase, the second cycle and its self-data phase, the greedy phase, the self-distillation
    phase on the greedy and sampled rows), each with the steps DSpark's record gives, each phase in its own folder;
    exported inside runs/, loadable by the engine, assets/ untouched; refused with a schedule of its own."""
    from engine.models import load_drafter

    cli, assets, runs = _cli_in(tmp_path, monkeypatch)
    _ship_untrained_drafters(cli, assets, tokenizer, monkeypatch)
    monkeypatch.setattr(cli, "SELF_DATA_STEPS", 1)
    # windows as long as the test's target-written rows (64 + 32 tokens; the shipped schedule's 256 are its rows')
    first = {"steps": 2, "batch_size": 2, "seq_len": 96, "lr": 1.5e-3, "warmup_steps": 1, "self_data_fraction": 0.5}
    schedule = {"train_config": first, "second_cycle": {**first, "steps": 1}, "greedy_phase": {**first, "steps": 1},
                "train_minutes": 1.0}
    (assets / "dspark-drafter" / "training.json").write_text(json.dumps(
        {"train_config": {**first, "steps": 1, "warmup_steps": 1, "self_data_fraction": 1.0},
         "self_distill_minutes": 0.5, "train_minutes": 1.5, "earlier": schedule}))
    for wrong in (["eagle3", "--matched", "--steps", "3"], ["dflash", "--matched"],
                  ["eagle3", "--matched", "--self-distill"]):
        with pytest.raises(SystemExit):
            cli.main(wrong)
    on = ["--threads", "1"]
    _rows_of(cli, assets, runs, ["self-data", "--steps", "8", *on])
    _rows_of(cli, assets, runs, ["greedy-data", "--steps", "4", *on])
    assert cli.main(["eagle3", "--matched", *on]) == 2  # refuses: no sampled rows yet
    _rows_of(cli, assets, runs, ["sampled-data", "--steps", "4", *on])
    shipped = (assets / "eagle3-drafter" / "model.safetensors").read_bytes()
    assert cli.main(["eagle3", "--matched", *on]) == 0
    matched = runs / "eagle3-matched"
    steps = {folder: torch.load(matched / folder / "ckpt.pt", weights_only=False)["step"]
             for folder in (".", "self", "cycle2", "cycle2/self", "cycle2/self/greedy", "distill")}
    assert steps == {".": 2, "self": 1, "cycle2": 1, "cycle2/self": 1, "cycle2/self/greedy": 1, "distill": 1}
    distill = torch.load(matched / "distill" / "ckpt.pt", weights_only=False)["config"]
    assert distill["self_data_fraction"] == 1.0 and distill["batch_size"] == 2  # DSpark's self-distillation batch
    record = json.loads((matched / "export" / "training.json").read_text())
    assert record["matched_with"] == "assets/dspark-drafter's schedule"
    assert record["greedy_phase"]["labels"] == "argmax" and record["self_distill_phase"]["labels"] == "written"
    assert "4 greedy" in record["self_distill_phase"]["rows"] and record["second_cycle"]["steps"] == 1
    load_drafter(str(matched / "export"), METHOD_REGISTRY["eagle3"].kinds, torch.device("cpu"))
    assert (assets / "eagle3-drafter" / "model.safetensors").read_bytes() == shipped
    # the small LM likewise, with its own distillation loss in every phase
    assert cli.main(["small-lm-drafter", "--matched", *on]) == 0
    small = runs / "small-lm-matched"
    assert torch.load(small / "cycle2" / "self" / "greedy" / "ckpt.pt", weights_only=False)["step"] == 1
    record = json.loads((small / "export" / "training.json").read_text())
    assert record["self_distill_phase"]["labels"] == "soft" and record["heldout_ce_fp32"] > 0
    assert record["train_tokens"] == (2 + 1 + 1 + 1 + 1 + 1) * 2 * 96  # the six phases' steps × batch × window
    assert not (assets / "small-lm-drafter").exists()
