"""docs/formats.md against real files: a comparison download (with a server lane), a bench report (split by a label,
with transformers' runs) and a serving report (split by a label, beside that bench). Every field a table of the
document names is in the real file (unless its row says it appears only under some condition), and every field the
real file holds is in its table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from serving_stub import Stub, closed_port

DOC = Path(__file__).resolve().parents[1] / "docs" / "formats.md"
LABELS = {"kind"}  # the prompt file's own label column: the rows carry it, the document cannot name it


def documented() -> dict[str, tuple[set[str], set[str]]]:
    """object id -> (every field its table names, those whose row says they appear only under a condition)."""
    tables, current = {}, None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        marker = re.match(r"<!-- fields: ([\w.]+) -->", line.strip())
        if marker:
            current = tables.setdefault(marker.group(1), (set(), set()))
            continue
        row = re.match(r"\|\s*`([^`]+)`\s*\|(.*)", line)
        if current is not None and row:
            current[0].add(row.group(1))
            if re.search(r"\bonly\b", row.group(2), re.IGNORECASE):
                current[1].add(row.group(1))
        elif current is not None and line.strip() and not line.startswith("|"):
            current = None
    return tables


def _dicts(value, path: str) -> list[dict]:
    """The dicts at `path` in `value`: keys separated by dots, `[]` every item of a list, `*` every value of a dict."""
    found = [value]
    for part in path.split(".") if path else []:
        step = []
        for item in found:
            if part == "[]" and isinstance(item, list):
                step += item
            elif part == "*" and isinstance(item, dict):
                step += list(item.values())
            elif isinstance(item, dict) and part in item:
                step.append(item[part])
        found = step
    return [d for d in found if isinstance(d, dict)]


@pytest.fixture(scope="module")
def real_files(random_engine, tmp_path_factory, monkeypatch_module):
    from app.comparison import read_comparison
    from app.servers.lanes import ServerLaneHandlers
    from app.servers.client import Timeouts, parse_server
    from app.servers.measure import main as measure
    from compare_support import comparison_of
    from engine.measure import bench
    from dataclasses import replace
    from types import SimpleNamespace

    folder = tmp_path_factory.mktemp("formats")
    with Stub("vllm") as stub:
        handlers = ServerLaneHandlers([parse_server(f"v={stub.url}"), parse_server(f"down={closed_port()}")],
                                      Timeouts(5.0, 5.0, 30.0))
        list(handlers.run("def add(a, b):", 0, 12, 0, SimpleNamespace(session_hash="s")))
    comparison = comparison_of(random_engine, ["baseline", "dspark", "eagle3"], temperature=1.0, max_new_tokens=6)
    comparison = json.loads(replace(comparison, servers=handlers.figures("s")).to_json())
    read_comparison(json.dumps(comparison))  # a file the app opens
    prompts = folder / "prompts.csv"
    prompts.write_text('prompt,kind\n"def parse(self, text):\n",code\n"import os\n",imports\n"class Queue:\n",code\n')
    monkeypatch_module.setattr(bench.Engine, "load", classmethod(lambda cls, *a, **k: random_engine))
    assert bench.main(["--prompts", str(prompts), "--by", "kind", "--methods", "eagle3", "--max-new-tokens", "6",
                       "--drafts-per-step", "2", "--temperature", "0", "--json", str(folder / "bench.json")]) == 0
    with Stub("sglang") as stub:
        assert measure(["--server", f"s={stub.url}", "--prompts", str(prompts), "--concurrency", "2", "--by", "kind",
                        "--beside", str(folder / "bench.json"), "--json", str(folder / "serving.json")]) == 0
    return {"comparison": comparison, "bench": json.loads((folder / "bench.json").read_text()),
            "serving": json.loads((folder / "serving.json").read_text())}


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


# object id in the document -> (which real file, where its instances are in it)
WHERE = {
    "comparison": ("comparison", ""),
    "comparison.settings": ("comparison", "settings"),
    "step": ("comparison", "lanes.*.[]"),
    "drafted_token": ("comparison", "lanes.*.[].drafted.[]"),
    "committed_token": ("comparison", "lanes.*.[].committed.[]"),
    "top_entry": ("comparison", "lanes.*.[].drafted.[].draft_top.[]"),
    "span": ("comparison", "lanes.*.[].spans.[]"),
    "server_lane": ("comparison", "servers.*"),
    "bench": ("bench", ""),
    "bench.lane": ("bench", "lanes.*"),
    "per_position": ("bench", "lanes.*.per_position.[]"),
    "pair": ("bench", "pairwise.[]"),
    "prompts": ("bench", "prompts"),
    "bench.prompt_row": ("bench", "prompt_rows.[]"),
    "bench.by": ("bench", "by"),
    "bench.group": ("bench", "by.groups.*"),
    "serving": ("serving", ""),
    "serving.throughput": ("serving", "throughput"),
    "serving.server_figures": ("serving", "server_figures"),
    "serving.server_counters": ("serving", "server_counters"),
    "serving.prompt_row": ("serving", "prompt_rows.[]"),
    "serving.beside": ("serving", "beside"),
    "serving.group": ("serving", "by.groups.*"),
}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_the_format_document_matches_a_real_file(real_files, name):
    tables = documented()
    assert name in tables, f"docs/formats.md has no table of {name}"
    named, conditional = tables[name]
    file, path = WHERE[name]
    instances = _dicts(real_files[file], path)
    if name == "serving.prompt_row":  # the server's rows only; the bench's joined rows are the bench's
        instances = [r for r in instances if r["origin"] == "server"]
    assert instances, f"no {name} in the real {file} file"
    present = set().union(*instances) - (LABELS if name.endswith("prompt_row") else set())
    assert present - named == set(), f"{name}: {sorted(present - named)} in a real file, not in docs/formats.md"
    assert named - present - conditional == set(), \
        f"{name}: {sorted(named - present - conditional)} in docs/formats.md, not in a real file"


def test_every_table_of_the_document_is_checked():
    assert set(documented()) == set(WHERE)
