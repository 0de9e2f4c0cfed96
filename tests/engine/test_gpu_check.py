"""scripts/gpu_check.py in its smoke form on the CPU: every section runs and writes its figures into one report, every
lane identical to the baseline; --only runs some; a section that fails is written down and the others run on; the
quick set's estimates fit a lease; a call writes at most 8 files; the long sections are calls of their own."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import ROOT

SMOKE = ["--cpu", "--smoke", "--prompts", "1", "--max-new-tokens", "6", "--repeats", "1"]
PROMPT_CHARS = 100  # each held-out prompt's last characters (about 30 tokens of its last lines, not 160)


def short_prompts(load_prompts):
    """The held-out prompts' tails: every section's runs prefill a prompt first (most of a smoke run's work on the
    whole prompts); what the tests check (each section ran, wrote its figures, every lane equals the baseline) is
    the same on a shorter one."""
    return lambda *args: [prompt[-PROMPT_CHARS:] for prompt in load_prompts(*args)]


@pytest.fixture(scope="module")
def gpu_check():
    """The script as a module, loaded from its file the way `python scripts/gpu_check.py` runs it (its
    `main` is what the script calls); in this process, where torch is already imported."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def shared_engine(gpu_check, embedded_engine, monkeypatch):
    """The float32 engine the sections load is Engine.load("tiny", "cpu"), as the tests' shared one is: that one
    is handed over (a load and its DSpark verify timing fewer); the bfloat16 one is loaded as the script loads it.
    The prompts are the held-out ones' tails (short_prompts)."""
    load = gpu_check.Engine.load

    def shared_or_loaded(preset, device, dtype=None, cuda_graphs="auto", fixed_width=None, **options):
        if (preset, device, dtype, cuda_graphs, fixed_width, options) == ("tiny", "cpu", "float32", "off", None, {}):
            return embedded_engine
        return load(preset, device, dtype=dtype, cuda_graphs=cuda_graphs, fixed_width=fixed_width, **options)

    monkeypatch.setattr(gpu_check.Engine, "load", shared_or_loaded)
    monkeypatch.setattr(gpu_check, "load_prompts", short_prompts(gpu_check.load_prompts))


@pytest.mark.slow
def test_every_section_runs_on_the_cpu_and_writes_its_figures(gpu_check, shared_engine, tmp_path, capsys):
    sections = [name for name in gpu_check.SECTIONS if name != "recordings"]  # its recorder has tests of its own
    assert gpu_check.main([*SMOKE, "--out", str(tmp_path), "--only", ",".join(sections)]) == 0, \
        capsys.readouterr().err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())["sections"]
    assert list(report) == sections and all(r["seconds"] >= 0 and r["estimated_s"] > 0 for r in report.values())
    assert all("error" not in r for r in report.values())
    assert report["facts"]["quiet"]["launch_us"] > 0 and "beside_a_busy_python_thread" in report["facts"]
    identity = {dtype: {g: set(identity["lanes"]) for g, identity in report["identity"][dtype].items()
                        if isinstance(identity, dict)} for dtype in ("float32", "bfloat16")}
    assert {"dflash", "dspark"} <= identity["float32"]["chains"] and identity["float32"]["trees"] == {
        "dflash_tree/16", "eagle3_tree/16"} and identity["float32"]["batches"] == {"dflash/batch_2"}
    assert identity["bfloat16"]["chains"] == {"baseline", "dflash"} and identity["bfloat16"]["batches"] == {
        "dflash/batch_2"}
    for dtype in ("float32", "bfloat16"):  # chains, trees and batches apart, one status each
        groups = report["identity"][dtype]
        assert groups["batches"]["required"] == (dtype == "float32") and groups["chains"]["required"]
        for group in ("chains", "trees", "batches"):
            lanes = groups[group]["lanes"]
            assert groups[group]["identical"] and all(
                lane["identical"] and set(lane["first_difference"]) == {None} for lane in lanes.values()), dtype
    assert report["census"]["baseline/T0"]["read"] == 1 and report["census"]["dspark/T1"]["read"] <= 2
    assert report["profile"]["dflash"]["aten_ops"] > 0 and (tmp_path / "profile_dflash.json").exists()
    assert set(report["steps"]["summary"]["plain_step_ms"]) == {"eager"}  # graphs: CUDA only
    assert set(report["qwen3_4b"]["verify_cost"]) == {"1", "2", "4", "8", "16", "32", "64"}
    assert "dflash_zlab_b16" in report["qwen3_4b"]["lanes"]
    log = capsys.readouterr().err
    assert all(f"[{name}] ok" in log for name in sections) and "float32 chains ok trees ok batches ok" in log
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "profile_baseline.json", "profile_dflash.json", "report.json"]


def test_a_failing_section_is_written_down_and_the_others_run_on(gpu_check, shared_engine, tmp_path, monkeypatch,
                                                               capsys):
    def broken(check, out):
        raise RuntimeError("no such kernel")

    monkeypatch.setitem(gpu_check.SECTIONS, "census", broken)
    assert gpu_check.main([*SMOKE, "--out", str(tmp_path), "--only", "census,facts"]) == 1
    sections = json.loads((tmp_path / "report.json").read_text())["sections"]
    assert sections["census"]["error"] == "RuntimeError: no such kernel" and "error" not in sections["facts"]
    log = capsys.readouterr().err
    assert "[census] FAILED" in log and "[facts] ok" in log and "1 of 2 sections ok" in log


def test_an_unknown_section_is_one_line(gpu_check, capsys):
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--cpu", "--only", "facts,warp"])
    assert exit_.value.code == 2
    assert "unknown section(s) warp" in capsys.readouterr().err


def test_gpu_check_without_cuda_says_so_in_one_line(gpu_check, capsys):
    """No CUDA, no --cpu: one line, status 2."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert gpu_check.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines() == [
        "error: no CUDA device here; pass --cpu to run the same checks on the CPU"]


def test_the_quick_set_is_estimated_within_five_minutes_on_a_healthy_gpu(gpu_check, capsys):
    assert gpu_check.main(["--plan"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines[:-1]] == list(gpu_check.QUICK)
    total = float(lines[-1].split()[3])
    assert 60 < total <= 300, lines[-1]
    assert sum(float(line.split()[2]) for line in lines[:-1]) == pytest.approx(total, abs=len(lines))


@pytest.mark.parametrize("args", [["--only", "recordings", "--full", "trees"],
                                  ["--only", "recordings", "--full", "load"], ["--only", "concurrency"],
                                  ["--only", "qwen3_4b"]])
def test_each_long_section_fits_a_command_of_its_own(gpu_check, capsys, args):
    assert gpu_check.main([*args, "--plan"]) == 0
    assert float(capsys.readouterr().out.strip().splitlines()[-1].split()[3]) <= 540


@pytest.mark.parametrize("args, words", [(["--only", "concurrency,facts"], "concurrency runs in a call of its own"),
                                         (["--full", "trees"], "--full records at full size in a call of its own")])
def test_the_long_sections_are_refused_beside_others(gpu_check, capsys, args, words):
    assert gpu_check.main([*args, "--cpu"]) == 2
    assert words in capsys.readouterr().err


def test_a_section_that_would_overrun_the_call_is_skipped_and_said(gpu_check, tmp_path, capsys):
    assert gpu_check.main([*SMOKE, "--out", str(tmp_path), "--only", "facts,census", "--budget-s", "0.5"]) == 1
    sections = json.loads((tmp_path / "report.json").read_text())["sections"]
    assert set(sections) == {"facts", "census"} and all("skipped" in s for s in sections.values())
    assert "[facts] FAILED" in capsys.readouterr().err


def test_more_than_eight_files_go_into_one_archive(gpu_check, tmp_path):
    import tarfile

    (tmp_path / "old.json").write_text("{}")
    before = {tmp_path / "old.json"}
    for i in range(9):
        (tmp_path / f"f{i}.json").write_text("{}")
    assert gpu_check._bounded(tmp_path, before) == [tmp_path / "gpu_check.tar.gz"]
    assert len(tarfile.open(tmp_path / "gpu_check.tar.gz").getnames()) == 9 and (tmp_path / "old.json").exists()
    (tmp_path / "gpu_check.tar.gz").unlink()
    (tmp_path / "one.json").write_text("{}")
    assert gpu_check._bounded(tmp_path, before) == [tmp_path / "one.json"]
