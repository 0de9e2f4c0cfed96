"""SpecLab as a Hugging Face ZeroGPU Space: `python -m app.space build DIR`, and the Space's runtime.

`build` writes DIR, ready to push to a Space's repository: README.md (the Space's front matter and a short
description), requirements.txt (a torch ZeroGPU accepts, `spaces`, this repo's other pins), .gitattributes
(model weights through LFS, as the hub wants binary files), the entry point space_app.py, and copies of
app/, engine/ and assets/. The entry point is not called app.py so that it never shadows the app/ package.
Anything else already in DIR (its .git, say) is left alone; what the build writes is replaced.

At run time the entry point calls `create_demo()`: it loads the preset named by SPECLAB_PRESET (default
qwen3-4b; the embedded tiny models with a notice when that cannot run) at import time, as ZeroGPU requires; on
ZeroGPU every model computation then runs inside a `spaces.GPU` call (app/hosting/zerogpu.py), each Compare lane in
one of its own (app/hosting/gpu.py).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
from pathlib import Path

from engine.contract.methods import METHOD_REGISTRY
from engine.contract.presets import DEFAULT_PRESET, PRESETS

from .hosting.gpu import gpu_decorator, lane_runner, warm_up_once, zero_gpu

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "space_app.py"
COPIED = ("app", "engine", "assets")  # never tests/, runs/, docs/, .venv/
SPACE_DEFAULT_PRESET = "qwen3-4b"
SPACE_TORCH = "2.11.0"  # the newest torch ZeroGPU accepts (2.8.0 to 2.11.0)
SPACE_PYTHON = "3.12.12"  # ZeroGPU runs Python 3.10.13 or 3.12.12
NOT_FOR_THE_SPACE = {"torch", "pytest", "pytest-xdist", "playwright"}  # torch is replaced; the rest are for tests
LFS_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.png")

ENTRY_SOURCE = '''"""SpecLab on a Hugging Face Space. Written by `python -m app.space build`: edit app/space.py instead.

SPECLAB_PRESET picks the models: qwen3-4b (the default), qwen3-4b-zlab, or tiny (the embedded models).
"""

try:
    import spaces  # noqa: F401  first, before anything touches CUDA, as ZeroGPU asks
except ImportError:  # anywhere else the same file runs without it
    spaces = None

from app.hosting.addresses import trust_private_proxies
from app.main import launch
from app.space import create_demo

demo = create_demo()  # the models load now, at import time, as ZeroGPU requires

if __name__ == "__main__":
    trust_private_proxies()  # the Space's proxy names each visitor: the per-visitor limit sees visitors
    launch(demo)
'''

README_BODY = """
# SpecLab — see speculative decoding work

SpecLab runs **real** speculative decoding and shows it step by step, side by side: a cheap drafter
proposes tokens, the target model checks them all in one forward pass, and the output is distributed exactly
as the target's own (at temperature 0, the very same text). Up to {count} lanes on one prompt: {lanes}; with every drafted token, every
accept/reject decision, α, τ and a measured timeline of draft, verify and host work.

Models: {description}.

## On this Space

- Runs are queued one at a time. Each lane, and each of the Why tab's measurements, borrows a ZeroGPU GPU for
  one call of at most {cap} s, sized from what the same work cost on a GPU (a lane of the embedded models: about
  {base:.0f} s plus {per_token:g} s per new token; models whose cost has not been measured yet ask for {cap} s
  until this Space has measured it), which counts against your daily ZeroGPU quota; lower "Max new tokens" for a
  shorter request. Stop ends the GPU's work within a step. Timings are measured on the borrowed GPU, so compare
  lanes within one run.
- The Space variable `SPECLAB_PRESET` picks the models: `{presets}` (default `{default}`). A preset that
  cannot run here (no GPU, weights not downloadable) is replaced by the embedded `tiny` models, with a notice.
- Built from the SpecLab repository by `python -m app.space build DIR`; the entry point is `{entry}`.
"""


def requirement_pins(path: Path = ROOT / "requirements.txt") -> dict[str, str]:
    """name -> the whole requirement line, for every `name==version` line of a requirements file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if match := re.match(r"^([A-Za-z0-9_.\-\[\]]+)\s*==\s*(\S+)$", line):
            pins[match.group(1).split("[")[0].lower()] = line
    return pins


def gradio_version(pins: dict[str, str] | None = None) -> str:
    """The Gradio version the repo pins (the Space's sdk_version), else the installed one."""
    pins = requirement_pins() if pins is None else pins
    if "gradio" in pins:
        return pins["gradio"].split("==", 1)[1].strip()
    import gradio

    return gradio.__version__


def hub_repos() -> list[str]:
    """Every hub repository of the real presets: targets, tokenizers and drafters, each once, in order."""
    repos: dict[str, None] = {}
    for preset in PRESETS.values():
        if not preset.local:
            repos.update(dict.fromkeys([preset.target, preset.tokenizer, *preset.drafters.values()]))
    return list(repos)


def front_matter(sdk_version: str) -> dict:
    repos = hub_repos()
    return {
        "title": "SpecLab",
        "emoji": "🔬",
        "colorFrom": "blue",
        "colorTo": "green",
        "sdk": "gradio",
        "sdk_version": sdk_version,
        "python_version": SPACE_PYTHON,
        "app_file": ENTRY,
        "pinned": False,
        "short_description": "Speculative decoding, step by step, side by side",
        "suggested_hardware": "zero-a10g",  # the hub's name for ZeroGPU hardware
        "startup_duration_timeout": "1h",  # the first start downloads the preloaded weights' cache
        "models": list(repos),
        "preload_from_hub": list(repos),  # whole repositories, into the Space's hub cache at build time
    }


def lanes_text() -> str:
    """Every registered method in one sentence, from the registry (engine/contract/methods.py)."""
    return "; ".join(f"**{m.label}** ({m.description})" for m in METHOD_REGISTRY.values())


def readme_text(sdk_version: str) -> str:
    import yaml

    from .hosting.zerogpu import GPU_CAP_S, MARGIN, MEASURED_PER_TOKEN_S, WARM_UP_TOKENS, WORKER_START_S

    per_token = MEASURED_PER_TOKEN_S["tiny"]
    header = yaml.safe_dump(front_matter(sdk_version), sort_keys=False, allow_unicode=True, width=1000)
    body = README_BODY.format(count=len(METHOD_REGISTRY), lanes=lanes_text(),
                              description=PRESETS[SPACE_DEFAULT_PRESET].description, cap=GPU_CAP_S,
                              base=WORKER_START_S + MARGIN * per_token * WARM_UP_TOKENS,
                              per_token=round(MARGIN * per_token, 2), presets="`, `".join(PRESETS),
                              default=SPACE_DEFAULT_PRESET, entry=ENTRY)
    return f"---\n{header}---\n{body}"


def requirements_text(pins: dict[str, str]) -> str:
    lines = ["# Written by `python -m app.space build`: the torch ZeroGPU accepts, `spaces`, SpecLab's other pins.",
             f"torch=={SPACE_TORCH}", "spaces"]
    lines += [line for name, line in pins.items() if name not in NOT_FOR_THE_SPACE | {"spaces"}]
    return "\n".join(lines) + "\n"


def _gitattributes(existing: str) -> str:
    lines = existing.splitlines()
    present = {line.split()[0] for line in lines if line.strip() and not line.startswith("#")}
    lines += [f"{pattern} filter=lfs diff=lfs merge=lfs -text" for pattern in LFS_PATTERNS if pattern not in present]
    return "\n".join(lines) + "\n"


def build(dest: Path) -> Path:
    """Write the Space into `dest` (created if needed); returns it."""
    dest = Path(dest).resolve()
    if ROOT.is_relative_to(dest) or any(dest.is_relative_to(ROOT / name) for name in COPIED):
        raise ValueError(f"{dest} would overwrite this checkout; build the Space somewhere else")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} exists and is not a folder")
    pins = requirement_pins()
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (dest / name).exists():
            shutil.rmtree(dest / name)
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    (dest / "README.md").write_text(readme_text(gradio_version(pins)), encoding="utf-8")
    (dest / "requirements.txt").write_text(requirements_text(pins), encoding="utf-8")
    (dest / ENTRY).write_text(ENTRY_SOURCE, encoding="utf-8")
    attributes = dest / ".gitattributes"
    attributes.write_text(_gitattributes(attributes.read_text(encoding="utf-8") if attributes.exists() else ""),
                          encoding="utf-8")
    return dest


# --- the Space at run time ------------------------------------------------------------------------------

def space_preset() -> str:
    return os.environ.get("SPECLAB_PRESET", "").strip() or SPACE_DEFAULT_PRESET


def load_space_engine(preset: str, device: str = "auto"):
    """(engine, notice): the preset, or the embedded models with a one-line notice saying why not."""
    from engine.loop import Engine
    from engine.contract.types import EngineError

    def load(name: str):
        # On ZeroGPU this process's GPU memory is a stand-in of `spaces`: the weights' fit shows in the GPU call
        engine = Engine.load(name, device, check_memory=not zero_gpu())
        if engine.device.type != "cuda" or not zero_gpu():  # on ZeroGPU each GPU worker warms up itself
            warm_up_once(engine)
        return engine

    try:
        return load(preset), ""
    except Exception as exc:  # a Space that serves the embedded models beats one that does not start
        if preset == DEFAULT_PRESET:
            raise
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        if text and not isinstance(exc, EngineError):
            reason = f"{type(exc).__name__}: {reason}"
    notice = f"{reason}; showing the embedded models ({DEFAULT_PRESET}) instead"
    print(f"warning: {notice}", file=sys.stderr)
    return load(DEFAULT_PRESET), notice


def create_demo():
    """The Space's Blocks: the engine loaded now, its lanes' device work under `spaces.GPU` on a GPU."""
    from .main import build_app
    from .recordings import default_folder

    from .run.runner import run_lanes
    from .hosting.zerogpu import ZeroGPUEngine

    engine, notice = load_space_engine(space_preset())
    if zero_gpu() and engine.device.type == "cuda":  # every model computation in a GPU call; the lanes one call each
        engine = ZeroGPUEngine(engine, gpu_decorator())
        run_lanes = lane_runner(engine)
        print(f"SpecLab Space: {engine.preset} models on ZeroGPU")
    else:  # a CPU, or a GPU of the Space's own: the app's process has the device
        print(f"SpecLab Space: {engine.preset} models on {engine.device_name}")
    from .hosting.presenter import ENVIRONMENT, checked_key

    return build_app(engine, notice=notice, run_lanes=run_lanes, recordings=default_folder(),
                     pin_key=os.environ.get("SPECLAB_PIN_KEY"),
                     presenter_key=checked_key(os.environ.get(ENVIRONMENT)),  # a Space secret, as python -m app has
                     **space_job_budget(os.environ.get(JOB_BUDGET)))


JOB_BUDGET = "SPECLAB_JOB_BUDGET"  # a Space variable: python -m app's --job-budget, in seconds (1 to 3600)


def space_job_budget(value: str | None) -> dict:
    """build_app's job budget from the Space variable (none set: the app's default); a value that is not a number of
    seconds from 1 to 3600 keeps the default, with one line in the Space's log."""
    if value is None or not value.strip():
        return {}
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 1 <= seconds <= 3600:  # NaN too
        print(f"warning: {JOB_BUDGET}={value[:40]!r} is not a number of seconds from 1 to 3600; using the default",
              file=sys.stderr)
        return {}
    return {"job_budget_s": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.space", description="SpecLab as a Hugging Face Space")
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="write a folder that is a ready ZeroGPU Space")
    build_parser.add_argument("dir", type=Path, help="the folder to write (created if needed)")
    args = parser.parse_args(argv)
    try:
        dest = build(args.dir)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(path.stat().st_size for path in dest.rglob("*") if path.is_file() and ".git" not in path.parts)
    print(f"wrote the Space to {dest} ({size / 2**20:.1f} MiB); push it to a Gradio Space on ZeroGPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
