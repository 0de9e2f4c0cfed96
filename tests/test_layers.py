"""The layers the folders name, read from the imports themselves: nothing imports upward, nothing imports in a circle.

engine/contract (torch-free values, registry, presets, the engine's interface) is the bottom; the engine's torch
modules sit on it, engine/cpu and engine/drafters among them; the measurement tools, the engine's own process, the
training and the CLI on top; app/ above the whole engine, importing no torch, in layers of its own (the table).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A module may import modules of its own layer or lower ones, never a higher one. First match wins.
ENGINE_LAYERS = (
    ("engine.contract", 0),
    ("engine.cpu", 1), ("engine.background", 1), ("engine.text", 1), ("engine.sampling", 1), ("engine.timing", 1),
    ("engine.tree", 1), ("engine.rules", 1),
    ("engine.models", 2), ("engine.scheduler", 2), ("engine.ragged", 2),
    ("engine.drafters", 3), ("engine.target", 3), ("engine.speed", 3),
    ("engine.trace", 4), ("engine.online", 4), ("engine.batch", 5), ("engine.loop", 6), ("engine.run", 6),
    ("engine.measure", 7), ("engine.process", 7), ("engine.train", 7),
    ("engine.__main__", 8), ("engine", 8),
    # app/: plain helpers (words, prompts, the formula, the servers' client, a run's events and its runner), then
    # the settings and links, the comparison value, a run's plan and its stores, the drawing beside hosting (one
    # floor: serving the page to many visitors, its queue's fairness, the GPU's transport), the lesson, the tabs,
    # the page, and the entry points (python -m app, the Space's runtime)
    ("app.examples", 10), ("app.glossary", 10), ("app.theory", 10), ("app.words", 10), ("app.texts", 10),
    ("app.servers.client", 10), ("app.draw.theme", 10), ("app.draw.long_values", 10),
    ("app.run.events", 10), ("app.run.runner", 10), ("app.run.page_sessions", 10),
    ("app.settings", 11), ("app.blocks", 11), ("app.links", 12),
    ("app.comparison", 13), ("app.run.plan", 13),
    ("app.recordings", 14), ("app.run.sessions", 14), ("app.run.controller", 14), ("app.run", 14),
    ("app.lesson.choice", 14),  # the rule that picks the lesson's one prompt: read by the drawing too
    ("app.hosting", 15),
    ("app.draw", 15),
    ("app.lesson", 16), ("app.servers", 16),
    ("app.tabs", 17),
    ("app.main", 18),
    ("app.__main__", 19), ("app.space", 19), ("app", 19),
)


def layer(module: str) -> int:
    return next(rank for prefix, rank in ENGINE_LAYERS if module == prefix or module.startswith(prefix + "."))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The project modules (engine.*, app.*) a file imports, relative imports resolved; `top_level_only`: only
    those run on import (not inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _is_module(candidate) else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] in ("engine", "app")}


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def project_files(top: str) -> list[Path]:
    return sorted(p for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts)


@pytest.mark.parametrize("path", project_files("engine") + project_files("app"), ids=lambda p: module_name(p))
def test_nothing_imports_upward(path):
    own = layer(module_name(path))
    upward = sorted(m for m in imports(path) if layer(m) > own)
    assert not upward, f"{module_name(path)} (layer {own}) imports {upward}"


def test_the_contract_imports_neither_torch_nor_the_rest_of_the_engine():
    for path in project_files("engine/contract"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
        assert not names & {"torch", "transformers"}, path
        assert all(m.startswith("engine.contract") for m in imports(path)), path


def test_no_import_circles():
    """No module reaches itself again through its imports, those made inside a function included: an import
    moved into a function to break a circle still leaves the circle."""
    graph = {module_name(p): imports(p) for p in project_files("engine") + project_files("app")}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    done, active = set(), []

    def visit(module: str) -> None:
        if module in active:
            raise AssertionError("import circle: " + " -> ".join(active[active.index(module):] + [module]))
        if module in done:
            return
        active.append(module)
        for dep in sorted(graph[module]):
            if not (module.startswith(dep + ".") or dep.startswith(module + ".")):  # a package and its own modules
                visit(dep)
        active.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_both_engines_have_the_interface_the_app_is_written_against(random_engine):
    from engine.contract.interface import EngineLike
    from engine.process import EngineProcess

    assert isinstance(random_engine, EngineLike)
    missing = [name for name in dir(EngineLike) if not name.startswith("_") and not hasattr(EngineProcess, name)]
    assert set(missing) <= {"preset", "device_name"}  # set on each instance, once the child has said what it loaded


def test_hosting_is_one_floor_that_nothing_below_it_reads():
    """app/hosting (serving the page: addresses, the queue's fairness, sessions' pages, the GPU's transport) sits on
    one floor; the run, its plan and its sessions are below it in app/run, and nothing below the floor imports it."""
    hosting = [p for p in project_files("app/hosting") if p.name != "__init__.py"]
    floor = {layer(module_name(p)) for p in hosting}
    assert len(floor) == 1 and hosting
    rank = floor.pop()
    below = [module_name(p) for p in project_files("app") if layer(module_name(p)) < rank
             and any(m.startswith("app.hosting") for m in imports(p))]
    assert below == []
