"""scripts/gpu_check.py runs here with --cpu: every lane identical to the baseline on both families, and
the JSON it writes carries every figure the device check promises."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def gpu_check():
    """The script as a module, loaded from its file the way `python scripts/gpu_check.py` runs it (its
    `main` is what the script calls); in this process, where torch is already imported."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_gpu_check_runs_on_the_cpu_and_writes_every_figure(gpu_check, tmp_path, capsys):
    out = tmp_path / "check.json"
    assert gpu_check.main(["--cpu", "--prompts", "1", "--max-new-tokens", "6", "--repeats", "2", "--smoke",
                           "--out", str(out)]) == 0, capsys.readouterr().err[-2000:]
    report = json.loads(out.read_text())
    for family in ("embedded", "qwen3_4b_shape"):
        lanes = report[family]["lanes"]
        assert {"baseline/overlap_off", "eagle3/overlap_on", "dflash/overlap_off", "dspark/overlap_on"} <= set(lanes)
        for lane in lanes.values():
            assert lane["identical_to_baseline"] is True
            assert lane["tokens_per_s"] > 0 and 0 <= lane["bubble_share"] < 1
        assert set(report[family]["verify_cost"]) == {"1", "2", "4", "8", "16", "32"}
    assert "dflash_zlab_b16" in report["qwen3_4b_shape"]["lanes"]
    assert report["device"].startswith("cpu")


def test_gpu_check_without_cuda_says_so_in_one_line(gpu_check, capsys):
    """No CUDA, no --cpu: one line, status 2."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert gpu_check.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines() == [
        "error: no CUDA device here; pass --cpu to run the same checks on the CPU"]
