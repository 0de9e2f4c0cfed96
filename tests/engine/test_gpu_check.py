"""scripts/gpu_check.py in its smoke form on the CPU: every section runs and writes its JSON, every lane identical to
the baseline; --only runs some; a section that fails is written down and the others run on."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import ROOT

SMOKE = ["--cpu", "--smoke", "--prompts", "1", "--max-new-tokens", "6", "--repeats", "2"]


@pytest.fixture(scope="module")
def gpu_check():
    """The script as a module, loaded from its file the way `python scripts/gpu_check.py` runs it (its
    `main` is what the script calls); in this process, where torch is already imported."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_section_runs_on_the_cpu_and_writes_its_figures(gpu_check, embedded_engine, tmp_path, capsys,
                                                               monkeypatch):
    # The float32 engine the sections load is Engine.load("tiny", "cpu"), as the tests' shared one is: that one
    # is handed over (a load and its DSpark verify timing fewer); the bfloat16 one is loaded as the script loads it.
    load = gpu_check.Engine.load

    def shared_or_loaded(preset, device, dtype=None, cuda_graphs="auto", fixed_width=None, **options):
        if (preset, device, dtype, cuda_graphs, fixed_width, options) == ("tiny", "cpu", "float32", "off", None, {}):
            return embedded_engine
        return load(preset, device, dtype=dtype, cuda_graphs=cuda_graphs, fixed_width=fixed_width, **options)

    monkeypatch.setattr(gpu_check.Engine, "load", shared_or_loaded)
    sections = [name for name in gpu_check.SECTIONS if name != "recordings"]  # its recorder has tests of its own
    assert gpu_check.main([*SMOKE, "--out", str(tmp_path), "--only", ",".join(sections)]) == 0, \
        capsys.readouterr().err[-3000:]
    report = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in sections}
    assert all("error" not in r for r in report.values())
    assert report["facts"]["quiet"]["launch_us"] > 0 and "beside_a_busy_python_thread" in report["facts"]
    assert {"dflash", "dspark", "dflash_tree/16", "eagle3_tree/16", "dflash/batch_2"} <= set(
        report["identity"]["float32"]["lanes"])
    assert {"baseline", "dflash", "dflash/batch_2"} <= set(report["identity"]["bfloat16"]["lanes"])
    for dtype in ("float32", "bfloat16"):
        lanes = report["identity"][dtype]["lanes"]
        assert all(lane["identical"] and set(lane["first_difference"]) == {None} for lane in lanes.values()), dtype
    assert report["census"]["baseline/T0"]["read"] == 1 and report["census"]["dspark/T1"]["read"] <= 2
    assert report["profile"]["dflash"]["aten_ops"] > 0 and (tmp_path / "profile_dflash.json").exists()
    assert set(report["steps"]["summary"]["plain_step_ms"]) == {"eager"}  # graphs: CUDA only
    assert set(report["qwen3_4b"]["verify_cost"]) == {"1", "2", "4", "8", "16", "32", "64"}
    assert "dflash_zlab_b16" in report["qwen3_4b"]["lanes"]
    log = capsys.readouterr().err
    assert all(f"[{name}] ok" in log for name in sections)


def test_a_failing_section_is_written_down_and_the_others_run_on(gpu_check, tmp_path, monkeypatch, capsys):
    def broken(check, out):
        raise RuntimeError("no such kernel")

    monkeypatch.setitem(gpu_check.SECTIONS, "census", broken)
    assert gpu_check.main([*SMOKE, "--out", str(tmp_path), "--only", "census,facts"]) == 1
    assert json.loads((tmp_path / "census.json").read_text())["error"] == "RuntimeError: no such kernel"
    assert "error" not in json.loads((tmp_path / "facts.json").read_text())
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
