"""The benchmark against transformers: same outputs as `generate` and assisted generation, sane report."""

from __future__ import annotations

import pytest

from engine.measure.bench import format_table, load_prompts, run_bench


@pytest.mark.slow
def test_bench_matches_transformers_and_reports_every_lane(random_engine):
    """Two prompts of 12 tokens: every lane still drafts past its prefill on each (the serial lanes' 3 drafts a step)
    and has a decode part to time; what is checked (the same outputs, every lane reported, its sums) holds at any
    size."""
    prompts = ["def parse(self, text):\n", "import os\n"]
    report = run_bench(random_engine, prompts, max_new_tokens=12, drafts_per_step={"serial": 3})
    assert report["identical_outputs"], report["mismatches"]
    assert set(report["lanes"]) == {"baseline", "eagle3", "dflash", "dspark", "dflash_tree", "dflash_overlap_on", "dflash_overlap_off", "dspark_verify_all",
                                    "dspark_static_cut", "dspark_no_markov",
                                    "hf_generate", "hf_assisted"}
    assert report["lanes"]["baseline"]["speedup"] == 1.0
    assert report["lanes"]["baseline"]["tokens"] == report["lanes"]["hf_generate"]["tokens"] == 2 * 12
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
                            "eagle3-drafter-sampled"}
    for name, digest in digests.items():
        assert digest == hashlib.sha256((ASSETS_DIR / name / "model.safetensors").read_bytes()).hexdigest()[:12]
    assert weights_digests(PRESETS["qwen3-4b"]) is None  # hub checkpoints: nothing here to hash
    assert run_bench(random_engine, ["import os\n"], max_new_tokens=4, drafts_per_step={"*": 2}, with_hf=False)["weights"] is None
    monkeypatch.setattr(random_engine, "preset", "tiny")
    assert run_bench(random_engine, ["import os\n"], max_new_tokens=4, drafts_per_step={"*": 2}, with_hf=False)["weights"] == digests


@pytest.mark.slow
def test_the_concurrency_sweep_measures_every_batched_lane_at_every_size(random_engine):
    """`bench --concurrency`: at each batch size every batched lane and transformers' batched generate, the
    batched baseline the reference, every request its own greedy output; at B = 1 the batched path beside the
    single-request loop."""
    from engine.measure.concurrency import BATCHED_LANES, concurrency_sweep, concurrency_table

    prompts = ["def parse(self, text):\n", "import os\n", "class Queue:\n"]
    # 8 tokens a request: every lane still has steps with all 3 places taken (its steady speed, checked below)
    sweep = concurrency_sweep(random_engine, prompts, 8, [1, 3], log=lambda line: None, rounds=1)
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

    assert main(["--requests-at-once", "1,0", "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "0 requests at once is outside 1 to" in err[0]
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


def test_a_pair_is_called_faster_only_where_its_paired_interval_excludes_one():
    from engine.measure.decide import pair_words, paired_ratio, pairwise

    steady = paired_ratio([20.0, 22.0, 30.0, 18.0], [10.0, 11.0, 15.1, 9.0])  # 2× on every prompt
    assert steady["verdict"] == "a faster" and 1 < steady["low"] < 2 < steady["high"] < 2.1
    noisy = paired_ratio([11.0, 9.0, 10.5, 9.4], [10.0, 10.0, 10.0, 10.0])  # ±10 % either way
    assert noisy["verdict"] == "tie" and noisy["low"] < 1 < noisy["high"]
    assert paired_ratio([10.0], [5.0])["verdict"] == "too few prompts"
    rows = pairwise({"baseline": [10.0, 10.0, 10.0], "a": [20.0, 21.0, 19.0], "b": [10.2, 9.7, 10.1]},
                    [("a", "baseline"), ("b", "baseline"), ("b", "a")])
    assert [r["faster"] for r in rows] == ["a", None, "a"]
    assert pair_words(rows[1]).startswith("b / baseline: tie,") and "a faster" in pair_words(rows[0])


def test_per_position_acceptance_carries_its_counts_and_marks_thin_positions():
    from engine.measure.decide import add_counts, position_rows, wilson

    low, high = wilson(3, 3)
    assert high == 1.0 and low < 0.5  # 1.00 from three drafts is not a certainty
    wide, narrow = wilson(15, 20), wilson(150, 200)
    assert narrow[1] - narrow[0] < wide[1] - wide[0] and wide[0] < 0.75 < wide[1]
    rows = position_rows(add_counts([[30, 24], [24, 12]], [[10, 6], [6, 3], [3, 3]]), min_drafts=20)
    assert [(r["drafts"], r["accepted"], r["few"]) for r in rows] == [(40, 30, False), (30, 15, False), (3, 3, True)]
    assert rows[0]["rate"] == 0.75 and rows[0]["low"] < 0.75 < rows[0]["high"]


def test_prompt_files_in_every_form_with_their_labels(tmp_path):
    from engine.contract.types import EngineError
    from engine.measure.decide import labels_of, prompt_file_record, read_prompt_file

    (tmp_path / "p.txt").write_text("def f(x):\n\nimport os\n", encoding="utf-8")
    (tmp_path / "p.jsonl").write_text('{"prompt": "def f(x):", "kind": "code"}\n{"prompt": "Hi", "kind": "chat"}\n')
    (tmp_path / "p.csv").write_text('\ufeffprompt,kind\n"def f(x):\n  return",code\nHi,chat\n', encoding="utf-8")
    assert read_prompt_file(tmp_path / "p.txt") == [{"prompt": "def f(x):"}, {"prompt": "import os"}]
    assert labels_of(read_prompt_file(tmp_path / "p.jsonl"), "kind") == ["code", "chat"]
    rows = read_prompt_file(tmp_path / "p.csv")
    assert rows[0]["prompt"] == "def f(x):\n  return" and labels_of(rows, "kind") == ["code", "chat"]
    record = prompt_file_record(tmp_path / "p.csv", 2)
    assert record["format"] == "csv" and len(record["sha256"]) == 64 and record["prompts_used"] == 2
    with pytest.raises(EngineError, match="has no 'lang' label"):
        labels_of(rows, "lang")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n{"text": "b"}\n')
    with pytest.raises(EngineError, match=r"bad.jsonl:2: each line needs a \"prompt\" string"):
        read_prompt_file(tmp_path / "bad.jsonl")
    (tmp_path / "bad.csv").write_text("text\nb\n")
    with pytest.raises(EngineError, match="needs a 'prompt' column"):
        read_prompt_file(tmp_path / "bad.csv")


def test_the_bench_writes_per_prompt_rows_pairs_and_groups(random_engine, tmp_path, monkeypatch, capsys):
    """`bench --prompts FILE.csv --by kind`: per-prompt rows as JSON and CSV, the prompt file's digest, every pair's
    paired ratio, per-position counts that add up to the lane's rates, and the same split by the label."""
    import csv
    import hashlib
    import json

    from engine.measure import bench

    prompts = tmp_path / "prompts.csv"
    prompts.write_text('prompt,kind\n"def parse(self, text):\n",code\n"import os\n",imports\n"class Queue:\n",code\n')
    monkeypatch.setattr(bench.Engine, "load", classmethod(lambda cls, *a, **k: random_engine))
    out = tmp_path / "bench.json"
    assert bench.main(["--prompts", str(prompts), "--by", "kind", "--methods", "eagle3", "--no-hf",
                       "--max-new-tokens", "8", "--drafts-per-step", "2", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["prompts"]["sha256"] == hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert report["prompts"]["format"] == "csv" and report["num_prompts"] == 3
    rows = report["prompt_rows"]
    assert {(r["lane"], r["prompt_index"]) for r in rows} == {("baseline", i) for i in range(3)} | {
        ("eagle3", i) for i in range(3)}
    assert all(r["identical"] and r["origin"] == "local" and r["tokens"] == 8 for r in rows)
    assert [r["kind"] for r in rows if r["lane"] == "eagle3"] == ["code", "imports", "code"]
    base = [r for r in rows if r["lane"] == "baseline"]
    assert sum(r["wall_s"] for r in base) == pytest.approx(report["lanes"]["baseline"]["wall_s"], abs=1e-3)
    with open(out.with_suffix(".csv"), newline="") as file:
        assert [dict(r)["lane"] for r in csv.DictReader(file)] == [r["lane"] for r in rows]
    (pair,) = report["pairwise"]
    assert (pair["a"], pair["b"], pair["prompts"]) == ("eagle3", "baseline", 3)
    assert pair["low"] <= pair["ratio"] <= pair["high"]
    assert pair["faster"] == ("eagle3" if pair["low"] > 1 else "baseline" if pair["high"] < 1 else None)
    ar = report["lanes"]["eagle3"]
    assert [p["rate"] for p in ar["per_position"]] == pytest.approx(
        [x for x in ar["per_position_acceptance"]], abs=1e-3)
    assert sum(p["accepted"] for p in ar["per_position"]) == sum(r["accepted"] for r in rows if r["lane"] == "eagle3")
    groups = report["by"]["groups"]
    assert report["by"]["column"] == "kind" and {k: g["num_prompts"] for k, g in groups.items()} == {"code": 2, "imports": 1}
    assert groups["imports"]["pairwise"][0]["verdict"] == "too few prompts"
    assert sum(g["lanes"]["eagle3"]["tokens"] for g in groups.values()) == ar["tokens"]
    assert "eagle3 / baseline:" in table and "kind = code (2 prompts):" in table and "sha256" in table
    assert bench.main(["--prompts", str(prompts), "--by", "lang", "--json", str(out)]) == 2
    assert "has no 'lang' label" in capsys.readouterr().err


def test_drafts_per_step_is_one_flag_by_lane_style_or_method(random_engine):
    from engine.measure.bench import lane_drafts, parse_drafts_per_step
    from engine.contract.types import EngineError

    assert parse_drafts_per_step("3") == {"*": 3}
    assert parse_drafts_per_step("serial=4, one_pass=7,ar=2") == {"serial": 4, "one_pass": 7, "eagle3": 2}
    for bad in ("serial=0", "blocks=3", "x"):
        with pytest.raises(EngineError, match="--drafts-per-step"):
            parse_drafts_per_step(bad)
    spec = {"serial": 4, "one_pass": 6, "dspark": 5}
    assert [lane_drafts(random_engine, m, spec) for m in ("eagle3", "dflash", "dspark")] == [4, 6, 5]
    assert lane_drafts(random_engine, "eagle3", {"*": 2}) == 2


def test_the_old_flags_are_gone_from_the_bench(capsys):
    from engine.measure.bench import main

    with pytest.raises(SystemExit):
        main(["--draft-len", "4"])  # once the serial lanes' K here and the one lane's drafts per step elsewhere
    assert "--draft-len" in capsys.readouterr().err


def test_the_blocks_recipe_sweeps_each_one_pass_lane_up_to_its_trained_block_at_each_temperature(random_engine):
    from engine.measure.lesson import blocks, one_pass_methods

    doc = blocks(random_engine, ["def parse(self, text):\n"], (1, 2, 64), 8, rounds=1, temperatures=(0.0, 1.0))
    lanes = one_pass_methods(random_engine.methods())
    assert lanes and set(doc["data"]["temperatures"]) == {"0.0", "1.0"}
    for temperature, measured in doc["data"]["temperatures"].items():
        assert set(measured) == set(lanes)
        for m, sweep in measured.items():
            trained = random_engine.max_drafts(m)
            ks = sorted({k for k in (1, 2) if k <= trained} | {trained})  # 64 is past every trained block
            assert list(sweep["rows"]) == [str(k) for k in ks]  # JSON's keys, as recorded
            assert sweep["temperature"] == float(temperature) and str(sweep["best_k"]) in sweep["rows"]
            assert all(row["speedup"] > 0 for row in sweep["rows"].values())


def test_a_k_sweep_above_temperature_zero_samples_and_is_not_held_to_the_greedy_output(random_engine):
    from engine.measure.sweep import k_sweep

    sweep = k_sweep(random_engine, ["def parse(self, text):\n"], 10, (1, 3), "dflash", temperature=1.0)
    assert sweep["temperature"] == 1.0 and list(sweep["rows"]) == [1, 3]
