"""The Dockerfile's two images, read and run without Docker: its install step and its command run in a shell with
`pip` and `python` standing in (they write down what they were asked), for DEVICE=cpu and DEVICE=cuda."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

STAND_IN = """#!/bin/sh
printf '%s\\n' "$(basename "$0") $*" >> "$CALLS"
case "$*" in *torch.version.cuda*) [ -n "$TORCH_CUDA" ] || { echo "this torch has no CUDA" >&2; exit 1; };; esac
"""


def dockerfile() -> str:
    return re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))  # continuation lines joined


def instruction(name: str, containing: str) -> str:
    found = [line.split(None, 1)[1] for line in dockerfile().splitlines()
             if line.startswith(name + " ") and containing in line]
    assert len(found) == 1, f"one {name} with {containing!r}, found {len(found)}"
    return found[0]


@pytest.fixture
def shell(tmp_path):
    """Runs a command with the stand-ins first on PATH, in a folder holding requirements.txt; returns (exit code,
    stderr, the calls made, the packages the image's requirements file held)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("pip", "python"):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "requirements.txt").write_text((ROOT / "requirements.txt").read_text())
    image_requirements = tmp_path / "image-requirements.txt"

    def run(command: str, **env):
        calls = tmp_path / "calls"
        calls.unlink(missing_ok=True)
        command = command.replace("/tmp/requirements.txt", str(image_requirements))
        done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                              env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), **env})
        made = calls.read_text().splitlines() if calls.exists() else []
        held = [line.split("==")[0] for line in image_requirements.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if image_requirements.exists() else []
        return done.returncode, done.stderr, made, held

    return run


def test_the_device_is_a_build_argument_and_the_command_runs_the_app_on_it(shell):
    assert re.search(r"^ARG DEVICE=cpu$", dockerfile(), flags=re.M)
    assert "SPECLAB_DEVICE=$DEVICE" in instruction("ENV", "SPECLAB_DEVICE")
    command = json.loads(instruction("CMD", "python -m app"))
    code, _, calls, _ = shell(command[2], SPECLAB_DEVICE="cuda",
                              SPECLAB_ARGS="--preset qwen3-4b")
    assert command[:2] == ["sh", "-c"] and code == 0
    assert calls == ["python -m app --device cuda --preset qwen3-4b"]


def test_the_cuda_image_installs_the_pinned_torch_and_refuses_one_without_cuda(shell):
    install = instruction("RUN", "requirements.txt")
    pin = re.search(r"^torch==\S+", (ROOT / "requirements.txt").read_text(), flags=re.M).group(0)
    code, err, calls, held = shell(install, DEVICE="cuda", TORCH_INDEX="https://example.invalid/cuda",
                                   TORCH_CUDA="12.8")
    assert code == 0, err
    assert calls[0] == f"pip install --no-cache-dir {pin} --index-url https://example.invalid/cuda"
    assert calls[1].startswith("pip install --no-cache-dir -r ") and "torch.version.cuda" in calls[2]
    assert {"gradio", "transformers", "spaces"} <= set(held)
    assert not {"torch", "pytest", "pytest-xdist", "playwright"} & set(held)
    code, err, calls, _ = shell(install, DEVICE="cuda")  # a torch without CUDA: the build fails, saying why
    assert code != 0 and "no CUDA" in err and calls[0] == f"pip install --no-cache-dir {pin}"


def test_the_cpu_image_skips_the_cuda_check_and_other_devices_are_refused(shell):
    install = instruction("RUN", "requirements.txt")
    code, _, calls, _ = shell(install, DEVICE="cpu")
    assert code == 0 and len(calls) == 2 and not any("cuda" in call for call in calls)
    code, err, calls, _ = shell(install, DEVICE="rocm")
    assert code == 2 and "DEVICE must be cpu or cuda" in err and not calls
