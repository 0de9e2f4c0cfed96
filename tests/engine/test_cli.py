"""The command line as a user runs it: `python -m engine generate ...` in a subprocess, and its `main` in this
process where the subprocess would only import the same modules again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from engine.__main__ import _check_writable, _write_report
from engine.models import pick_device
from engine.contract.types import MAX_PROMPT_CHARS, EngineError


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def run_main(capsys, *args: str) -> subprocess.CompletedProcess:
    """`main` called as `python -m engine` calls it (`sys.exit(main())`), in this process: its exit status and
    what it wrote, as run_cli reports them."""
    from engine.__main__ import main

    capsys.readouterr()
    try:
        status = main(list(args))
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["python", "-m", "engine", *args], status, captured.out, captured.err)


@pytest.fixture
def shared_models(embedded_engine, monkeypatch):
    """`main` run in this process gets the tests' shared engine of the embedded models where it would load the same
    ones again (Engine.load("tiny") on the CPU, the preset's threads): the command line's own code runs whole,
    a second of loading fewer."""
    from engine.loop import Engine

    load = Engine.load

    def shared_or_loaded(preset, device="auto", threads=None, cuda_graphs="auto", **options):
        if (preset, pick_device(device).type, threads, cuda_graphs, options) == ("tiny", "cpu", None, "auto", {}):
            return embedded_engine
        return load(preset, device=device, threads=threads, cuda_graphs=cuda_graphs, **options)

    monkeypatch.setattr(Engine, "load", shared_or_loaded)


def assert_one_clear_line(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    ([], "required"),
    (["generate", "--prompt", ""], "the prompt is empty"),
    (["generate", "--prompt", "x", "--method", "beam"], "unknown method"),
    (["generate", "--prompt", "x", "--preset", "huge"], "unknown preset"),
    (["generate", "--prompt", "x", "--max-new-tokens", "0"], "max new tokens"),
    (["generate", "--prompt", "x", "--max-new-tokens", "99999999"], "max new tokens"),
    (["generate", "--prompt", "x", "--draft-len", "0"], "draft length"),
    (["generate", "--prompt", "x", "--draft-len", "99"], "draft length"),
    (["generate", "--prompt", "x", "--temperature", "-1"], "temperature"),
    (["generate", "--prompt", "x", "--temperature", "nan"], "temperature"),
    (["generate", "--prompt", "x", "--temperature", "inf"], "temperature"),
    (["generate", "--prompt", "x", "--confidence-threshold", "nan"], "confidence threshold"),
    (["generate", "--prompt", "x", "--scheduler", "eager"], "unknown scheduler"),
    (["generate", "--prompt", "x", "--seed", "-1"], "seed must be an integer from 0 to"),
    (["generate", "--prompt", "x", "--seed", str(2**63)], "seed must be an integer from 0 to"),
    (["generate", "--prompt", "x", "--seed", "1.5"], "invalid int"),
    (["generate", "--prompt", "x", "--temperature", "warm"], "invalid float"),
    (["generate", "--prompt", "x", "--verify-rule", "vote"], "verification rule"),
    (["generate", "--prompt-file", "/nonexistent/prompt.txt"], "cannot read prompt file"),
    (["generate", "--prompt-file", str(ROOT / "assets")], "Is a directory"),
    (["generate", "--prompt-file", "/dev/zero"], f"longer than {MAX_PROMPT_CHARS} characters"),
    (["generate", "--prompt", "x" * (MAX_PROMPT_CHARS + 1)], f"longer than {MAX_PROMPT_CHARS} characters"),
    (["generate", "--prompt", "x", "--json", "/nonexistent/run.json"], "No such file or directory"),
    (["generate", "--prompt", "x", "--json", str(ROOT / "tests")], "Is a directory"),
    (["generate", "--prompt", "x", "--json", ""], "cannot write --json file"),
    (["generate", "--prompt", "x", "--device", "mps"], "unknown device 'mps': choose auto, cpu or cuda"),
    (["generate", "--prompt", "x", "--threads", "0"], "--threads must be between 1 and 1024"),
    (["generate", "--prompt", "x", "--threads", "two"], "invalid int"),
])
def test_bad_input_is_one_clear_line(args, message, capsys):
    """Every bad call is refused before a model loads: in this process (an exception that escaped `main` would
    fail the test as a traceback fails the subprocess below)."""
    result = run_main(capsys, *args)
    assert_one_clear_line(result, message)
    assert result.stdout == ""


@pytest.mark.parametrize("args, message", [
    ([], "required"),  # argparse's own refusal
    (["generate", "--prompt", "x", "--temperature", "-1"], "temperature"),  # the engine's
])
def test_a_bad_call_as_a_user_runs_it_is_one_clear_line(args, message):
    """The same, as a shell sees it: `python -m engine ...`, its exit status and all it writes on stderr."""
    assert_one_clear_line(run_cli(*args), message)


def test_a_prompt_past_the_context_is_one_clear_line(capsys, shared_models):
    """Known only once the tokenizer has counted it, after the models load: the same `main` as above, in this
    process (a subprocess would spend its seconds importing torch again)."""
    from engine.__main__ import main

    assert main(["generate", "--prompt", "def f(x): " * 400, "--max-new-tokens", "4"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and "context holds" in lines[0], captured.err


@pytest.mark.parametrize("name", ["mps", "meta", "gpu", "CPU", "", "cuda:", "cuda:x", "cuda:-1", "cuda:0:1"])
def test_unknown_device_is_refused(name):
    with pytest.raises(EngineError, match="unknown device"):
        pick_device(name)


def test_missing_gpu_is_refused():
    assert pick_device("cpu").type == "cpu"
    with pytest.raises(EngineError, match="cuda:99"):  # no CUDA here, or fewer than 100 GPUs
        pick_device("cuda:99")


def test_output_check_leaves_the_path_as_it_was(tmp_path):
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("an earlier run\n")
    _check_writable(str(new))
    _check_writable(str(old))
    assert not new.exists() and old.read_text() == "an earlier run\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_full_disk_is_one_clear_error():
    _check_writable("/dev/full")  # opens fine: the disk fills only as the report is written, after the run
    with pytest.raises(EngineError, match="^cannot write --json file '/dev/full': No space left on device$"):
        _write_report("/dev/full", "{}")


def test_closed_stdout_exits_quietly():
    """`... --json - | head -c 10`: the reader is gone before the report is written."""
    process = subprocess.Popen([sys.executable, "-m", "engine", "generate", "--prompt", "x", "--max-new-tokens", "1",
                                "--json", "-"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # long before the report: loading the models alone takes a second
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 141 and stderr == ""


@pytest.mark.slow
def test_generate_writes_the_contract_json(tmp_path, embedded_engine, shared_models, capsys):
    """One real run from the command line's `main` (the AR lane, the largest seed), in this process (a subprocess
    would spend its seconds importing torch again; the closed-stdout test above runs one): the report follows the
    contract, and its tokens are the target's own greedy ones."""
    from engine.__main__ import main
    from engine.contract.types import GenerationConfig

    prompt = "import os\n\n\ndef list_files(path):"
    seed = 2**63 - 1  # the largest: it reaches the run exactly
    path = tmp_path / "ar.json"
    status = main(["generate", "--method", "eagle3", "--prompt", prompt, "--max-new-tokens", "24", "--seed", str(seed),
                   "--json", str(path)])
    result = capsys.readouterr()
    assert status == 0, result.err
    run = json.loads(path.read_text())
    assert run["config"]["seed"] == seed
    assert {"method", "preset", "device", "output_ids", "text", "steps", "summary"} <= run.keys()
    assert run["method"] == "eagle3" and run["preset"] == "tiny"
    assert run["device"] == "cpu (1 thread)"  # the embedded models' own choice (presets.TINY.cpu_threads)
    assert len(run["output_ids"]) == run["summary"]["num_new_tokens"] == 24
    assert result.out == run["text"] + "\n"
    assert any(step["drafted_ids"] for step in run["steps"])
    for step in run["steps"]:
        assert {"drafted_ids", "num_verified", "num_accepted", "bonus_id", "spans"} <= step.keys()
        assert all(s["lane"] in ("draft", "verify", "host") for s in step["spans"])
    baseline = embedded_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=24))
    assert run["output_ids"] == list(baseline.output_ids)


def test_the_method_id_ar_is_still_accepted_as_eagle3():
    from engine.__main__ import build_parser

    assert build_parser().parse_args(["generate", "--prompt", "x", "--method", "ar"]).method == "eagle3"
