"""The command line as a user runs it: `python -m engine generate ...` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


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
    (["generate", "--prompt", "x", "--temperature", "warm"], "invalid float"),
    (["generate", "--prompt", "x", "--verify-rule", "vote"], "verification rule"),
    (["generate", "--prompt-file", "/nonexistent/prompt.txt"], "cannot read prompt file"),
    (["generate", "--prompt", "def f(x): " * 400], "context holds"),
])
def test_bad_input_is_one_clear_line(args, message):
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_generate_writes_the_contract_json(tmp_path):
    prompt = "import os\n\n\ndef list_files(path):"
    outputs = {}
    for method in ("baseline", "ar"):
        path = tmp_path / f"{method}.json"
        result = run_cli("generate", "--method", method, "--prompt", prompt, "--max-new-tokens", "24",
                         "--json", str(path))
        assert result.returncode == 0, result.stderr
        run = json.loads(path.read_text())
        assert {"method", "preset", "device", "output_ids", "text", "steps", "summary"} <= run.keys()
        assert run["method"] == method and run["preset"] == "tiny" and run["device"].startswith("cpu")
        assert len(run["output_ids"]) == run["summary"]["num_new_tokens"] == 24
        assert result.stdout == run["text"] + "\n"
        for step in run["steps"]:
            assert {"drafted_ids", "num_verified", "num_accepted", "bonus_id", "spans"} <= step.keys()
            assert all(s["lane"] in ("draft", "verify", "host") for s in step["spans"])
        outputs[method] = run["output_ids"]
    assert outputs["ar"] == outputs["baseline"]
