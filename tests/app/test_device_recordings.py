"""Device recordings: scripts/device_recordings.py writes a device's default comparison, trees and load points in the
formats the app reads, marked with the device, the date and the versions, without gradio or plotly; the panels
(app/tabs/device_recordings.py) show a GPU's recording before a CPU's, labelled as a recording."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.tabs import device_recordings as shown
from engine.measure.provenance import build_digest
from scripts import device_recordings as recorder

from conftest import ROOT

BLOCKED = ("import sys\n"
           "class Blocked:\n"
           "    def find_spec(self, name, path=None, target=None):\n"
           "        if name.split('.')[0] in ('gradio', 'plotly'):\n"
           "            raise ImportError('no ' + name + ' on this machine')\n"
           "sys.meta_path.insert(0, Blocked())\n")


def test_the_recorder_needs_no_gradio_nor_plotly():
    """The device machine has torch and transformers only: the recorder and what it calls import without the rest."""
    code = BLOCKED + ("import scripts.device_recordings as r, app.comparison, app.run.runner, app.settings, app.lesson; "
                      "print('imported', r.write_recordings.__name__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported write_recordings" in done.stdout


@pytest.fixture(scope="module")
def written(random_engine, tmp_path_factory):
    """The recordings of the random models at the live sizes, as the device check writes them (seconds), on short
    prompts: the random models' context is shorter than the held-out prompts."""
    from app import lesson, settings

    default = settings.default_settings
    out = tmp_path_factory.mktemp("device")
    with pytest.MonkeyPatch.context() as patch:  # smaller still: the suite's time
        patch.setattr(lesson, "load_prompts", lambda: [f"def f{i}(x):\n" for i in range(4)])
        patch.setattr(lesson, "LIVE_LOAD_REQUESTS", 2)
        patch.setattr(lesson, "LIVE_LOAD_SIZES", (1, 2))
        patch.setattr(lesson, "LIVE_LOAD_TOKENS", 6)
        patch.setattr(lesson, "LIVE_TREE_TOKENS", 8)
        patch.setattr(lesson, "LIVE_TREE_PROMPTS", 1)
        patch.setattr(settings, "default_settings", lambda available: replace(default(available), max_new_tokens=12))
        return out, recorder.write_recordings(out, "cpu", quick=True, engine=random_engine)


def test_the_recordings_are_written_marked_and_read_back(written, random_engine):
    out, paths = written
    assert [p.name for p in paths] == ["comparison.json", "trees.json", "load.json"]
    assert {p.parent for p in paths} == {out / "cpu"}  # named after the device
    for path in paths:
        doc = json.loads(path.read_text())
        assert doc["device"] == random_engine.device_name and doc["recorded_at"][:2] == "20"
        assert set(doc["versions"]) == {"torch", "transformers"} and doc["size"] == "quick"
        made = doc["provenance"]  # what made it: engine/measure/provenance.py
        one_process = " --processes 1" if path.stem == "comparison" else ""  # in this process, not in fresh ones
        assert made["build"] == build_digest() and made["command"].endswith(f"--only {path.stem}{one_process}")
        assert made["baseline_tokens_per_s"] > 0 and made["threads"] >= 1
    found = shown.device_recordings(out)
    assert f"engine build {build_digest()[:10]}" in shown.label(found["trees"])
    assert set(found) == {"comparison", "trees", "load"}
    comparison = found["comparison"].item
    assert set(comparison.lanes) == set(comparison.settings["methods"]) and comparison.baseline is not None
    assert all(lane.summary is not None and lane.timing_runs == 3 for lane in comparison.lanes.values())
    assert found["trees"].item["data"]["budgets"] and found["load"].item["data"]["rows"]


def test_a_gpu_recording_is_shown_before_a_cpus_and_never_as_live(written, tmp_path):
    out, paths = written
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    for path in paths:
        doc = json.loads(path.read_text())
        if "device" in doc:
            doc["device"] = "cuda (NVIDIA H200)"
        (gpu / path.name).write_text(json.dumps(doc))
    (tmp_path / "cpu").mkdir()
    for path in paths:
        (tmp_path / "cpu" / path.name).write_text(path.read_text())
    (tmp_path / "cpu" / "trees.json").write_text('{"format": "speclab-lesson/1", "data": {}}')  # unreadable: ignored
    found = shown.device_recordings(tmp_path)
    assert found["trees"].device == found["load"].device == "cuda (NVIDIA H200)"
    for kind in ("trees", "load"):
        text = shown.panel_markdown(found[kind])
        assert text.startswith(f"**Recorded on NVIDIA H200 on {found[kind].recorded_at[:10]} (torch ")
        assert "not a live run" in text and "made on a CPU" not in text and "live 20" not in text
        assert "| lane: speedup (τ) |" in text
    comparison = shown.comparison_markdown(found["comparison"])
    assert comparison.startswith("**Recorded on NVIDIA H200 on ") and "not a live run" in comparison
    lanes = found["comparison"].item.lanes
    assert all(f"| {shown.method_label(m)} | " in comparison for m in lanes)
    cpu_only = shown.device_recordings(out)
    assert "made on a CPU until a GPU's recording" in shown.panel_markdown(cpu_only["load"])


def test_the_repository_holds_a_recording_for_each_panel():
    found = shown.device_recordings()
    assert {"comparison", "trees", "load"} <= set(found)
    assert sum(path.stat().st_size for path in shown.DEVICE_DIR.rglob("*.json")) < 2 * 2**20


def test_the_comparison_is_measured_in_fresh_processes_its_range_spanning_them(written, tmp_path):
    """`--processes 3` (the default): three processes one after another, each this script with `--processes 1`; the
    saved comparison holds every process's rounds, so its spread covers each process's own, and it says so."""
    from app.comparison import read_comparison
    from app.lesson.stamps import stamp_words

    shipped = json.loads((written[0] / "cpu" / "comparison.json").read_text())
    commands = []

    def run(args, cwd):  # a fresh process: the same comparison, the baseline's rates scaled by process
        commands.append(args)
        doc = json.loads(json.dumps(shipped))
        doc["run_rates"]["baseline"] = [[r * (1 + 0.1 * len(commands)) for r in rates]
                                        for rates in doc["run_rates"]["baseline"]]
        doc["provenance"]["baseline_tokens_per_s"] = 10.0 * len(commands)
        out = Path(args[args.index("--out") + 1]) / "cpu"
        out.mkdir(parents=True)
        (out / "comparison.json").write_text(json.dumps(doc))
        return subprocess.CompletedProcess(args, 0)

    path = recorder.write_comparison_in_processes(tmp_path, "cpu", True, 3, run)
    assert len(commands) == 3 and all(a[a.index("--processes") + 1] == "1" and "--quick" in a for a in commands)
    doc = json.loads(path.read_text())
    made = doc["provenance"]
    assert made["processes"] == 3 and made["process_baselines"] == [10.0, 20.0, 30.0]
    assert made["baseline_tokens_per_s"] == 20.0 and made["command"].endswith("--only comparison")
    merged, each = read_comparison(json.dumps(doc)), [read_comparison(json.dumps(shipped))]
    for method in merged.lanes:
        if method == "baseline":
            continue
        low, high = merged.speedup_spread(method)
        alone = each[0].round_speedups(method)
        rounds = merged.round_speedups(method)
        assert len(rounds) == 3 * len(alone) and merged.lanes[method].timing_runs == len(rounds)
        assert low == min(rounds) < min(alone) / 1.25 and high == max(rounds) <= max(alone) / 1.1 + 1e-9
    recording = shown.DeviceRecording("comparison", merged, merged.device, merged.recorded_at, {}, made)
    text = shown.comparison_markdown(recording)
    assert "in each of 3 separate processes" in text and "spread over the timing runs of 3 separate processes" in text
    assert stamp_words(made).endswith(", 3 separate processes")

    other = json.loads(json.dumps(shipped))
    other["lanes"]["dflash"][-1]["committed"][-1]["id"] += 1  # a process that wrote another token
    with pytest.raises(ValueError, match="process 2's dflash lane wrote other tokens"):
        recorder.merged_comparison([shipped, other])
