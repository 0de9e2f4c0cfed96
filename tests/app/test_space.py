"""The Hugging Face Space: `python -m app.space build DIR` writes a ready ZeroGPU Space, and its entry point
imports cleanly from the built folder, with the real `spaces` package where it is installed (off ZeroGPU, where
it changes nothing). The engine behind ZeroGPU's GPU calls: tests/app/test_zerogpu.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from app import space
from app.hosting import gpu
from engine.contract.presets import PRESETS
from engine.contract.types import EngineError

from conftest import ROOT


# Imports the entry point as the Space does, less the engine's warm-up (seconds of CPU profiling, tested with
# the engine), and shows which app/ package it found; then leaves at once, without the interpreter's teardown of
# torch, transformers and gradio (a second and a half of CPU that is no part of importing).
IMPORT_CHECK = ("from engine.loop import Engine; Engine.warm_up = lambda self, *a, **k: print('warm-up skipped'); "
                "import gradio, app, space_app; assert isinstance(space_app.demo, gradio.Blocks); "
                "print('package', app.__file__); print('spaces', space_app.spaces and space_app.spaces.__file__); "
                "print('page', repr(space_app.demo.config)); "
                "import os, sys; sys.stdout.flush(); sys.stderr.flush(); os._exit(0)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The built Space (.path) and the import of its entry point (.importing): a fresh interpreter that loads
    the tiny models (~8 s) starts at once, in the background, while the other tests run."""
    dest = tmp_path_factory.mktemp("space") / "speclab"
    assert space.main(["build", str(dest)]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPACES_ZERO_GPU")}
    env.update(SPECLAB_PRESET="tiny", HF_HUB_OFFLINE="1")
    importing = subprocess.Popen([sys.executable, "-c", IMPORT_CHECK], cwd=dest, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    yield types.SimpleNamespace(path=dest, importing=importing)
    if importing.poll() is None:
        importing.kill()
        importing.communicate()


@pytest.fixture(scope="module")
def space_dir(built) -> Path:
    return built.path


def front_matter(readme: Path) -> dict:
    match = re.match(r"^---\n(.*?)\n---\n", readme.read_text(encoding="utf-8"), flags=re.S)
    assert match, "README.md must open with YAML front matter"
    return yaml.safe_load(match.group(1))


def real_repos() -> set[str]:
    return {name for p in PRESETS.values() if not p.local for name in (p.target, p.tokenizer, *p.drafters.values())}


def test_front_matter_describes_a_gradio_zerogpu_space(space_dir):
    meta = front_matter(space_dir / "README.md")
    pinned = re.search(r"^gradio==(\S+)", (ROOT / "requirements.txt").read_text(), flags=re.M).group(1)
    assert meta["sdk"] == "gradio" and str(meta["sdk_version"]) == pinned
    assert (space_dir / meta["app_file"]).is_file() and meta["app_file"] != "app.py"  # never shadows app/
    assert re.match(r"^3\.(10|12)(\.|$)", str(meta["python_version"]))
    assert meta["title"] and meta["emoji"] and meta["startup_duration_timeout"]
    assert meta["suggested_hardware"].startswith("zero-")
    assert {"Qwen/Qwen3-4B", "Qwen/Qwen3-0.6B", "deepseek-ai/dspark_qwen3_4b_block7"} <= real_repos()
    assert set(meta["models"]) == real_repos()
    assert {entry.split()[0] for entry in meta["preload_from_hub"]} == real_repos()
    assert "SpecLab" in (space_dir / "README.md").read_text(encoding="utf-8").split("---", 2)[2]


def test_requirements_pin_a_torch_zerogpu_accepts(space_dir):
    lines = [line.strip() for line in (space_dir / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    names = {re.split(r"[=<>!~\[ ]", line)[0].lower(): line for line in lines}
    major, minor, *_ = (int(x) for x in names["torch"].split("==")[1].split("."))
    assert major == 2 and 8 <= minor <= 11
    assert "spaces" in names and not {"pytest", "pytest-xdist", "playwright"} & set(names)
    repo_pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
                 if "==" in line and not line.startswith(("torch", "pytest", "playwright", "spaces", "#"))]
    assert set(repo_pins) <= set(lines)


def test_the_folder_holds_the_app_and_nothing_else(space_dir):
    top = {path.name for path in space_dir.iterdir()}
    assert top == {"README.md", "requirements.txt", space.ENTRY, ".gitattributes", "app", "engine", "assets"}
    for name in ("app/main.py", "app/tabs/compare.py", "engine/loop.py", "assets/target/model.safetensors"):
        assert (space_dir / name).is_file(), name
    files = [path.relative_to(space_dir) for path in space_dir.rglob("*")]
    assert not [f for f in files if {"tests", "runs", ".venv", "__pycache__"} & set(f.parts) or f.suffix == ".pyc"]
    assert "*.safetensors filter=lfs" in (space_dir / ".gitattributes").read_text()


def test_build_refuses_to_overwrite_the_checkout(capsys):
    assert space.main(["build", str(ROOT / "app" / "space")]) == 2
    assert "would overwrite this checkout" in capsys.readouterr().err
    assert not (ROOT / "app" / "space").exists()
    assert space.main(["build", str(ROOT.parent)]) == 2  # would replace the folders beside this checkout


# --- the GPU boundary (tests/app/test_zerogpu.py runs the engine behind a stand-in for ZeroGPU) ----------------

def test_the_decorator_is_spaces_gpu_when_installed_and_a_no_op_otherwise(monkeypatch):
    def f(x):
        return x

    assert gpu.no_gpu(f) is f and gpu.no_gpu(duration=5)(f) is f
    monkeypatch.setitem(sys.modules, "spaces", None)  # `import spaces` raises ImportError
    assert gpu.gpu_decorator() is gpu.no_gpu
    fake = types.ModuleType("spaces")
    fake.GPU = lambda *a, **k: None
    monkeypatch.setitem(sys.modules, "spaces", fake)
    assert gpu.gpu_decorator() is fake.GPU


@pytest.fixture
def warm_ups(monkeypatch):
    calls = []
    monkeypatch.setattr(space, "warm_up_once", calls.append)  # the real warm-up profiles for seconds
    return calls


def test_each_process_warms_the_engine_once(monkeypatch):
    engine = types.SimpleNamespace(warm_up=lambda: calls.append(1))
    calls = []
    gpu.warm_up_once(engine)
    gpu.warm_up_once(engine)
    assert calls == [1]
    monkeypatch.setattr(os, "getpid", lambda: -1)  # a new ZeroGPU worker: a fork of the app's process
    gpu.warm_up_once(engine)
    assert calls == [1, 1]


def test_a_preset_that_cannot_run_falls_back_to_the_embedded_models(random_engine, warm_ups, monkeypatch, capsys):
    from engine.loop import Engine

    memory_checked = []

    def load(preset, device="auto", check_memory=True):
        memory_checked.append(check_memory)
        if preset != "tiny":
            raise EngineError(f"preset {preset!r} needs a CUDA GPU and there is none here")
        return random_engine

    monkeypatch.setattr(Engine, "load", staticmethod(load))
    engine, notice = space.load_space_engine("qwen3-4b")
    assert engine is random_engine and warm_ups == [random_engine]  # on a CPU it warms up at once
    assert "needs a CUDA GPU" in notice and "embedded models (tiny)" in notice
    assert "warning:" in capsys.readouterr().err
    assert space.load_space_engine("tiny") == (random_engine, "")
    assert memory_checked == [True, True, True]
    monkeypatch.setattr(space, "zero_gpu", lambda: True)  # there the app's process reads a stand-in GPU's memory
    space.load_space_engine("tiny")
    assert memory_checked[-1] is False
    monkeypatch.setenv("SPECLAB_PRESET", "")
    assert space.space_preset() == "qwen3-4b"


def test_the_entry_point_imports_cleanly_from_the_built_folder(built):
    out, err = built.importing.communicate(timeout=300)
    assert built.importing.returncode == 0, err[-3000:]
    assert f"package {built.path / 'app' / '__init__.py'}" in out  # the copy, not this checkout
    assert "SpecLab Space: tiny models" in out and "warm-up skipped" in out  # on a CPU it warms up at import
    try:
        import spaces
    except ImportError:
        spaces = None
    if spaces is not None:  # the real package, off ZeroGPU: a no-op, and nothing on the page is its stand-in
        assert f"spaces {spaces.__file__}" in out
        page = out.split("page ", 1)[1]
        assert "cpu (" in page and "H200 MIG" not in page and "ZeroGPU (the GPU is named" not in page
