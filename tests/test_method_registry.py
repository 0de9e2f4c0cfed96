"""Methods are named in one place: the registry (engine/contract/methods.py). Every table that lists lanes derives
from it, method ids are not typed elsewhere, and a new drafter with parity is one module and one registry entry."""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

from engine.contract.methods import LEGACY_METHOD_IDS, METHOD_REGISTRY, methods_where

ROOT = Path(__file__).resolve().parents[1]
# where method ids may be typed: the registry itself, and training's configurations (a recipe per drafter kind)
REGISTRY = ROOT / "engine" / "contract" / "methods.py"
TRAINING = ROOT / "engine" / "train"
# under 20: what is left are drafter kind names that equal a method id (eagle3, dflash) and a few charts' and
# recorders' own references
MAX_LITERALS = 19


def method_id_literals() -> Counter:
    """Per file under engine/, app/ and scripts/ (not the registry, not training's configurations): how many
    string constants equal a method id."""
    ids = set(METHOD_REGISTRY) | set(LEGACY_METHOD_IDS)
    found = Counter()
    for folder in ("engine", "app", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == REGISTRY or TRAINING in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in ids:
                    found[str(path.relative_to(ROOT))] += 1
    return found


def test_method_ids_are_typed_in_the_registry_only():
    found = method_id_literals()
    assert sum(found.values()) <= MAX_LITERALS, (
        f"{sum(found.values())} method-id literals outside the registry (at most {MAX_LITERALS}): "
        f"{dict(found.most_common())}; import the id's name (EAGLE3, DFLASH, ...) or derive the list "
        "(method_names, methods_where)")


def test_the_count_sees_a_literal():
    """The scan above can fail: a method id typed in a file is counted."""
    tree = ast.parse('LANES = ("baseline", "dflash")\nLABEL = "DFlash"')
    ids = set(METHOD_REGISTRY)
    assert sum(isinstance(n, ast.Constant) and n.value in ids for n in ast.walk(tree)) == 2


def test_the_lane_tables_derive_from_the_registry():
    from app.draw.theme import lane_style
    from engine.measure.concurrency import BATCHED_LANES
    from engine.measure.positions import FEATURE_METHODS

    assert {lane_style(m) for m in METHOD_REGISTRY} == {m.style for m in METHOD_REGISTRY.values()}
    assert len({m.style for m in METHOD_REGISTRY.values()}) == len(METHOD_REGISTRY)  # one identity each
    assert set(methods_where(batched=True)) < set(BATCHED_LANES)
    assert not set(methods_where(tree=True)) & set(BATCHED_LANES)
    assert set(FEATURE_METHODS) <= set(methods_where(tree=False, drafts=True))
    assert methods_where(ablation=True) == tuple(m for m, e in METHOD_REGISTRY.items() if e.ablations)


# The one module of the new drafter: it proposes the newest committed token again, each as a point mass.
ECHO_MODULE = '''
import torch

from .base import BaseDrafter, DraftBlock


class Echo(torch.nn.Module):
    """Nothing to load."""


def recognises(config):
    return False


def load(path, device, dtype):
    return Echo()


def owns(model):
    return isinstance(model, Echo)


def build(model, engine):
    return EchoDrafter(engine.target.config.vocab_size)


class EchoDrafter(BaseDrafter):
    label = "echo the last token"

    def __init__(self, vocab_size):
        self.vocab_size = vocab_size

    def start(self, prompt_ids, features, clock):
        pass

    def propose(self, committed_ids, k, temperature, generator, clock):
        with clock.span("draft", "echo"):
            ids = committed_ids[0, -1:].repeat(k)
            return DraftBlock(ids, torch.nn.functional.one_hot(ids, self.vocab_size).float())

    def accept(self, num_valid, features):
        pass
'''

# The one registry entry: its kind (a module without weights) and its method.
KIND_ENTRY = '    DrafterKind("echo", "echo", "engine.drafters.echo", weights=False),\n'
METHOD_ENTRY = ('    Method("echo", "Echo", "proposes its last token again", 3, False, ("echo",), '
                'about="a drafter with no weights.", style=("#AA4499", "x")),\n')

# In the copy: the engine runs the new lane at temperature 0, alone and batched, and every derived table lists it.
CHECK = '''
import json, sys
import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from app.draw.theme import lane_style
from app.tabs.about import methods_text
from engine.batch import generate_batch
from engine.contract.methods import METHOD_REGISTRY, method_names
from engine.contract.types import EngineError, GenerationConfig
from engine.loop import Engine
from engine.measure.bench import run_bench
from engine.measure.concurrency import BATCHED_LANES
from scripts.gpu_check import CHAINS

tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
torch.manual_seed(0)
config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                     tie_word_embeddings=True, initializer_range=0.3, bos_token_id=0, eos_token_id=0, pad_token_id=0)
engine = Engine(Qwen3ForCausalLM(config).eval().requires_grad_(False), tokenizer, {}, torch.device("cpu"))
prompts = ["def parse(self, text):\\n", "import os\\n"]
base = [engine.generate(p, GenerationConfig(method="baseline", max_new_tokens=12)).output_ids for p in prompts]
echo = [engine.generate(p, GenerationConfig(method="echo", max_new_tokens=12)).output_ids for p in prompts]
try:  # no batch form, and its entry does not say batched: one line
    generate_batch(engine, prompts, GenerationConfig(method="echo", max_new_tokens=12), requests_at_once=2)
    refused = ""
except EngineError as exc:
    refused = str(exc)
bench = run_bench(engine, prompts[:1], max_new_tokens=8, with_hf=False)
print(json.dumps({"methods": list(method_names()), "engine": engine.methods(), "same": echo == base,
                  "refused": refused,
                  "style": list(lane_style("echo")), "batched_lanes": list(BATCHED_LANES), "chains": list(CHAINS),
                  "bench_lanes": list(bench["lanes"]), "bench_same": bench["identical_outputs"],
                  "drafts": bench["drafts_per_step"].get("echo"), "about": methods_text()}))
'''


OURS = ("engine", "app", "scripts")


def _run_forked(root: Path, source: str, argv: list[str], out: int, err: int) -> None:
    """In the forked child: forget this checkout's engine, app and scripts, import them from `root`, run `source`
    as a script with `argv`, its stdout and stderr written to `out` and `err`; never returns."""
    code = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
        for name in [n for n in sys.modules if n.split(".")[0] in OURS]:
            del sys.modules[name]
        sys.path.insert(0, str(root))
        os.chdir(root)
        sys.argv = ["-c", *argv]
        exec(compile(source, "<check>", "exec"), {"__name__": "__main__"})
        code = 0
    except BaseException:  # noqa: BLE001 - said on stderr, as a failing interpreter would
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def in_a_fork_from(root: Path, source: str, argv: list[str], timeout_s: float = 300) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `source` run as a script over the engine, app and scripts under `root`, in a
    fork of this process: every module of those three is imported afresh from `root` (none of this checkout's is
    kept), while torch, transformers and gradio, which the copy does not change, come already imported (a fresh
    interpreter spent about 6 s of CPU importing them, the check itself 0.2 s). This process's registry is untouched."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _run_forked(root, source, argv, out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout_s
        while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError(f"the check ran past {timeout_s} s")
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(ended[1]), out.read().decode(), err.read().decode()


def test_a_new_drafter_with_parity_is_one_module_and_one_registry_entry(tmp_path):
    copy = tmp_path / "speclab"
    for folder in ("engine", "app", "scripts"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "engine" / "drafters" / "echo.py").write_text(ECHO_MODULE)  # the one module
    registry = copy / "engine" / "contract" / "methods.py"
    text = registry.read_text(encoding="utf-8")
    kinds_end = text.index(")}", text.index("DRAFTER_KINDS: dict"))
    methods_end = text.index(")}", text.index("METHOD_REGISTRY: dict"))
    text = text[:methods_end] + METHOD_ENTRY + text[methods_end:]  # the later one first: the earlier index holds
    registry.write_text(text[:kinds_end] + KIND_ENTRY + text[kinds_end:], encoding="utf-8")  # the one entry

    returncode, out, err = in_a_fork_from(copy, textwrap.dedent(CHECK), [str(ROOT / "assets" / "tokenizer")])
    assert returncode == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert "echo" in seen["methods"] and "echo" in seen["engine"]  # the registry and an engine without a preset
    assert seen["same"]  # parity: at temperature 0 it writes the baseline's text
    assert seen["refused"] == "echo does not run in a batch: run it with requests at once 1"  # not batched=True
    assert seen["style"] == ["#AA4499", "x"]  # its lane header and charts
    assert "echo" in seen["chains"] and "echo" not in seen["batched_lanes"]  # the device check; no load sweep
    assert "echo" in seen["bench_lanes"] and seen["bench_same"] and seen["drafts"] == 3  # the bench, at its default
    assert "**Echo**: a drafter with no weights." in seen["about"]  # the About tab
    assert "echo" not in METHOD_REGISTRY  # the copy only
