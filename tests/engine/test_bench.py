"""The benchmark against transformers: same outputs as `generate` and assisted generation, sane report."""

from __future__ import annotations

import pytest

from engine.measure.bench import format_table, load_prompts, run_bench


@pytest.mark.slow
def test_bench_matches_transformers_and_reports_every_lane(random_engine):
    prompts = ["def parse(self, text):\n", "import os\n", "class Queue:\n"]
    report = run_bench(random_engine, prompts, max_new_tokens=20, serial_k=3)
    assert report["identical_outputs"], report["mismatches"]
    assert set(report["lanes"]) == {"baseline", "eagle3", "dflash", "dspark", "dflash_tree", "dflash_overlap_on", "dflash_overlap_off", "dspark_verify_all",
                                    "dspark_static_cut", "dspark_no_markov",
                                    "hf_generate", "hf_assisted"}
    assert report["lanes"]["baseline"]["speedup"] == 1.0
    assert report["lanes"]["baseline"]["tokens"] == report["lanes"]["hf_generate"]["tokens"] == 60
    ar = report["lanes"]["eagle3"]
    assert ar["tau"] == pytest.approx(ar["alpha"] + 1, abs=1e-3)
    assert len(ar["per_position_acceptance"]) == 3
    base = report["lanes"]["baseline"]
    assert base["decode_speedup"] == 1.0 and 0 < base["prefill_s"] < base["wall_s"]
    assert ar["decode_speedup"] == pytest.approx(
        (base["wall_s"] - base["prefill_s"]) / (ar["wall_s"] - ar["prefill_s"]), rel=1e-2)
    assert "decode_speedup" not in report["lanes"]["hf_generate"]  # transformers' runs have no trace to split
    table = format_table(report)
    assert "| eagle3 |" in table and "eagle3_vs_hf_assisted" in table


def test_heldout_and_validation_prompts_are_shipped_apart():
    """Two sets from the modules no model was trained on, sharing no prompt: the validation set checks that a
    figure measured on the held-out set was not tuned to it."""
    import json

    from engine.contract.presets import ASSETS_DIR

    manifest = json.loads((ASSETS_DIR / "corpus_manifest.json").read_text())
    sets = {}
    for name in ("heldout", "validation"):
        path = ASSETS_DIR / "prompts" / f"{name}.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(rows) >= 30 and load_prompts(path) == [r["prompt"] for r in rows]
        assert all(r["prompt"].rstrip().endswith(":") for r in rows)
        assert {r["source"] for r in rows} <= set(manifest["heldout_files"])
        sets[name] = {r["prompt"] for r in rows}
    assert load_prompts() == load_prompts(ASSETS_DIR / "prompts" / "heldout.jsonl")  # the default
    assert not sets["heldout"] & sets["validation"]


def test_k_sweep_reports_every_k_and_its_best(random_engine):
    from engine.measure.bench import run_k_sweep

    sweep = run_k_sweep(random_engine, ["def parse(self, text):\n"], max_new_tokens=12, ks=range(1, 4))
    assert list(sweep["rows"]) == [1, 2, 3]
    assert sweep["best_k"] == max(sweep["rows"], key=lambda k: sweep["rows"][k]["speedup"])
    assert all(row["speedup"] > 0 and 1 <= row["tau"] <= k + 1 for k, row in sweep["rows"].items())
    assert "| K | 1 | 2 | 3 |" in format_table({"preset": "p", "device": "d", "num_prompts": 1, "max_new_tokens": 12,
                                                "serial_k": 1, "drafts_per_block": 1, "lanes": {}, "ratios": {},
                                                "identical_outputs": True, "k_sweep": sweep})


def test_busy_machine_runs_a_second_process_only_meanwhile():
    from engine.measure.bench import BusyMachine

    with BusyMachine() as busy:
        assert busy.process.poll() is None  # spinning
    assert busy.process.poll() is not None  # gone afterwards


def test_a_report_names_the_weights_it_measured(random_engine, monkeypatch):
    """The embedded preset's report carries a digest of every checkpoint's weights (the model card takes only a
    report of its own weights); a model that is no preset's has none."""
    import hashlib

    from engine.contract.presets import ASSETS_DIR, PRESETS, weights_digests

    tiny = PRESETS["tiny"]
    digests = weights_digests(tiny)
    assert set(digests) == {"target", "eagle3-drafter", "small-lm-drafter", "dflash-drafter", "dspark-drafter",
                            "eagle3-drafter-sampled", "dflash-drafter-sampled", "dspark-drafter-sampled"}
    for name, digest in digests.items():
        assert digest == hashlib.sha256((ASSETS_DIR / name / "model.safetensors").read_bytes()).hexdigest()[:12]
    assert weights_digests(PRESETS["qwen3-4b"]) is None  # hub checkpoints: nothing here to hash
    assert run_bench(random_engine, ["import os\n"], max_new_tokens=4, serial_k=2, with_hf=False)["weights"] is None
    monkeypatch.setattr(random_engine, "preset", "tiny")
    assert run_bench(random_engine, ["import os\n"], max_new_tokens=4, serial_k=2, with_hf=False)["weights"] == digests


@pytest.mark.slow
def test_the_concurrency_sweep_measures_every_batched_lane_at_every_size(random_engine):
    """`bench --concurrency`: at each batch size every batched lane and transformers' batched generate, the
    batched baseline the reference, every request its own greedy output; at B = 1 the batched path beside the
    single-request loop."""
    from engine.measure.concurrency import BATCHED_LANES, concurrency_sweep, concurrency_table

    prompts = ["def parse(self, text):\n", "import os\n", "class Queue:\n"]
    sweep = concurrency_sweep(random_engine, prompts, 12, [1, 3], log=lambda line: None, rounds=1)
    assert sweep["identical_outputs"] and list(sweep["rows"]) == ["1", "3"] and sweep["requests"] == 6  # 2 a place
    for size, row in sweep["rows"].items():
        assert set(row["lanes"]) == set(BATCHED_LANES) - {"classic"}  # the random engine has no small-LM lane
        assert row["lanes"]["baseline"]["speedup"] == 1.0 and row["lanes"]["baseline"]["tau"] == 1.0
        assert all(lane["steady_tokens_per_s"] > 0 and lane["speedup_all"] > 0 for lane in row["lanes"].values())
        assert row["hf_generate"]["identical"]  # transformers' own batched greedy decoding writes the same
        assert row["lanes"]["dspark_verify_all"]["verified_per_request"] >= row["lanes"]["dspark"]["verified_per_request"]
        assert all(lane["tokens_per_s"] > 0 and lane["wall_s"] >= lane["verify_s"] > 0 for lane in row["lanes"].values())
    assert set(sweep["rows"]["1"]["batched_vs_single_path"]) == set(BATCHED_LANES) - {"classic"}
    assert "batched_vs_single_path" not in sweep["rows"]["3"]
    table = "\n".join(concurrency_table(sweep))
    assert "| 3 |" in table and "identical to its single-request greedy run: True" in table
    assert "scheduler_vs_all" not in sweep and "adjacent pairs" not in table  # only when asked for


def test_paired_runs_set_the_scheduler_against_verifying_everything_with_an_interval(random_engine):
    """`bench --concurrency … --pairs N`: at the largest size, N adjacent pairs of runs of DSpark's scheduler and of
    DSpark verifying everything; each pair's ratio of speeds, their mean inside its 95 % interval, every run's
    requests their own greedy output."""
    from engine.measure.concurrency import concurrency_sweep, concurrency_table

    prompts = ["def parse(self, text):\n", "import os\n"]
    sweep = concurrency_sweep(random_engine, prompts, 8, [2], ("baseline", "dspark", "dspark_verify_all"),
                              log=lambda line: None, rounds=1, pairs=3)
    paired = sweep["scheduler_vs_all"]
    assert paired["size"] == 2 and paired["pairs"] == 3 and len(paired["ratios"]) == 3 and paired["identical"]
    assert paired["low"] <= paired["mean"] <= paired["high"] and paired["low"] < paired["high"]
    assert abs(paired["mean"] - sum(paired["ratios"]) / 3) < 1e-3
    assert "over 3 adjacent pairs of runs" in "\n".join(concurrency_table(sweep))
    without = concurrency_sweep(random_engine, prompts, 8, [2], ("baseline", "dflash"), log=lambda line: None,
                                rounds=1, pairs=3)
    assert "scheduler_vs_all" not in without  # no DSpark lanes to pair


def test_a_concurrency_outside_the_range_is_one_clear_line(capsys):
    from engine.measure.bench import main

    assert main(["--concurrency", "1,0", "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a concurrency of 0 is outside 1 to" in err[0]
    assert main(["--concurrency", "2", "--lanes", "dspark_verify_x", "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no batched lane 'dspark_verify_x'" in err[0]
    assert main(["--concurrency", "2", "--pairs", "-1", "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pairs is how many pairs of runs to make: 0 or more, got -1" in err[0]


def test_a_fixed_cut_lane_verifies_that_many_drafts():
    from engine.measure.concurrency import lane_config

    assert (lane_config("dspark_verify_3", 8).drafts_per_step, lane_config("dspark_verify_3", 8).scheduler) == (3, "none")
    assert lane_config("dspark_verify_all", 8).scheduler == "none" and lane_config("dspark", 8).scheduler == "throughput"
