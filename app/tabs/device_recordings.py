"""Recordings made on another device, shown beside this server's own figures.

Some points only make their case on a GPU: a tree's verify of 64 nodes costs there what 8 cost, and many requests
at once share each forward. The device check writes what the embedded models measure on a device
(scripts/device_recordings.py: the Compare tab's default comparison, the lesson's trees and its load points) into
assets/device/<device>/, each file carrying the device, the date and the versions. The Why tab shows, under its trees
and load panels (the lesson's points 8 and 10 open them), the recording of a GPU where the repository holds one,
else the one made on a CPU, labelled as a recording from that device on that date, never as live: the point's
takeaway in the same words and intervals as the panel's own, and its figures in a table.
"""

from __future__ import annotations

import functools
import html
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from engine.contract.methods import BASELINE, method_label
from engine.contract.presets import ASSETS_DIR
from engine.measure.provenance import short

from .. import lesson
from ..comparison import Comparison, RecordError, read_comparison

DEVICE_DIR = ASSETS_DIR / "device"
FILES = {"comparison": "comparison.json", "trees": "trees.json", "load": "load.json"}
log = logging.getLogger("speclab.device")


@dataclass(frozen=True)
class DeviceRecording:
    kind: str  # "comparison", "trees" or "load"
    item: Comparison | dict  # a saved comparison, or a lesson measurement
    device: str  # as the engine names it: "cuda (NVIDIA H200)", "cpu (1 thread)"
    recorded_at: str
    versions: dict
    provenance: dict | None = None  # what made it (engine/measure/provenance.py): "build", "threads", ...

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def device_words(self) -> str:
        """"NVIDIA H200", or "a CPU (1 thread)"."""
        inner = self.device[self.device.find("(") + 1:-1] if self.device.endswith(")") else ""
        if self.on_gpu:
            return inner or "a GPU"
        return f"a CPU ({inner})" if inner else "a CPU"


def read_recording(path: Path, kind: str) -> DeviceRecording | None:
    """The recording in `path`, or None (said in the log) when it does not read as one."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text)
        item = read_comparison(text) if kind == "comparison" else lesson.read_measurement(text)
        if kind != "comparison" and lesson.measurement_kind(item) != kind:
            raise RecordError(f"not a {kind} measurement")
        device, when = (item.device, item.recorded_at) if isinstance(item, Comparison) else (
            item.get("device", ""), item.get("recorded_at", ""))
        versions = doc.get("versions") if isinstance(doc.get("versions"), dict) else {}
        block = doc.get("provenance")
        block = block if isinstance(block, dict) and isinstance(block.get("build"), str) else None
        return DeviceRecording(kind, item, str(device), str(when), {str(k): str(v) for k, v in versions.items()},
                               block)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecordError) as exc:
        log.warning("ignored device recording %s: %s", path, str(exc)[:200])
        return None


@functools.cache
def device_recordings(folder: Path = DEVICE_DIR) -> dict[str, DeviceRecording]:
    """For each kind, the recording to show: the newest made on a GPU, else the newest made on a CPU."""
    found: dict[str, DeviceRecording] = {}
    for device_folder in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else ():
        for kind, name in FILES.items():
            recording = read_recording(device_folder / name, kind)
            if recording is None:
                continue
            kept = found.get(kind)
            if kept is None or (recording.on_gpu, recording.recorded_at) > (kept.on_gpu, kept.recorded_at):
                found[kind] = recording
    return found


def label(recording: DeviceRecording) -> str:
    """What the recording is, where and when: never a live run."""
    versions = ", ".join(f"{name} {value}" for name, value in recording.versions.items())
    build = f", engine build {short(recording.provenance['build'])}" if recording.provenance else ""
    words = (f"Recorded on {recording.device_words} on {recording.recorded_at[:10]}"
             + (f" ({versions}{build})" if versions else build) + ", by the device check: a recording, not a live run")
    if not recording.on_gpu:
        words += "; made on a CPU until a GPU's recording is in the repository"
    return words


def _trees_table(data: dict) -> str:
    budgets = sorted({int(b) for lane in data["lanes"].values() for b in lane["rows"]})
    lines = ["| lane: speedup (τ) | chain | " + " | ".join(f"{b} nodes" for b in budgets) + " |",
             "|---" * (len(budgets) + 2) + "|"]
    for tree, lane in data["lanes"].items():
        chain = lane["chain_row"]
        cells = [f"{lane['rows'][str(b)]['speedup']:.2f}× ({lane['rows'][str(b)]['tau']:.2f})"
                 if str(b) in lane["rows"] else "–" for b in budgets]
        lines.append(f"| {method_label(tree)} | {chain['speedup']:.2f}× ({chain['tau']:.2f}) | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def _load_table(data: dict) -> str:
    sizes = sorted(data["rows"], key=int)
    lanes = [lane for lane in data["rows"][sizes[0]]["lanes"] if lane != BASELINE]
    lines = ["| lane: speedup (τ) | " + " | ".join(f"B = {size}" for size in sizes) + " |",
             "|---" * (len(sizes) + 1) + "|"]
    for lane in lanes:
        name = method_label("dspark") + ", verifying everything" if lane == "dspark_verify_all" else method_label(lane)
        lines.append(f"| {name} | " + " | ".join(
            f"{data['rows'][s]['lanes'][lane]['speedup']:.2f}× ({data['rows'][s]['lanes'][lane]['tau']:.2f})"
            if lane in data["rows"][s]["lanes"] else "–" for s in sizes) + " |")
    return "\n".join(lines)


def panel_markdown(recording: DeviceRecording) -> str:
    """The recording's heading, the lesson point's takeaway from it, and its figures."""
    point = next(p for p in lesson.POINTS if p.recording == recording.kind)
    takeaway = lesson.takeaway(point, {recording.kind: recording.item})
    table = _trees_table(recording.item["data"]) if recording.kind == "trees" else _load_table(recording.item["data"])
    size = lesson.size_words(recording.item)
    heading, size, takeaway = (html.escape(text, quote=False) for text in (label(recording), size, takeaway))
    return f"**{heading}.** {size}.\n\n{takeaway}\n\n{table}"


def comparison_markdown(recording: DeviceRecording) -> str:
    """The device's default comparison, lane by lane, as the Compare tab's chips give it: tokens/s, the speedup over
    the same comparison's baseline with its spread over the timing runs, τ."""
    comparison: Comparison = recording.item
    processes = (recording.provenance or {}).get("processes")
    processes = processes if isinstance(processes, int) and processes > 1 else 1
    over = f"the timing runs of {processes} separate processes" if processes > 1 else "the timing runs"
    lines = [f"| lane | drafter | tokens/s | speedup (spread over {over}) | τ |", "|---|---|---|---|---|"]
    for method, lane in comparison.lanes.items():
        if lane.summary is None:
            continue
        speedup, spread = comparison.speedup(method), comparison.speedup_spread(method)
        shown = ("–" if not speedup else
                 f"{speedup:.2f}×" + (f" ({spread[0]:.2f}–{spread[1]:.2f})" if spread else ""))
        lines.append(f"| {method_label(method)} | {html.escape(lane.drafter, quote=False)} | "
                     f"{lane.summary.tokens_per_s:.0f} | {shown} | {lane.summary.tau:.2f} |")
    settings, runs = comparison.settings, max(lane.timing_runs for lane in comparison.lanes.values())
    timed = (f"timed {runs // processes} times in each of {processes} separate processes, one after another (the "
             f"speedup is the median of those {runs} runs)" if processes > 1 else f"timed {runs} times")
    return (f"**{html.escape(label(recording), quote=False)}.** The default comparison: "
            f"{settings.get('max_new_tokens')} new tokens at temperature {settings.get('temperature'):g}, each lane "
            f"{timed}.\n\n" + "\n".join(lines))


def compare_layout(folder: Path = DEVICE_DIR) -> gr.Markdown | None:
    """Under the Compare tab's charts (inside a gr.Blocks): the device's default comparison, or nothing."""
    recording = device_recordings(folder).get("comparison")
    if recording is None:
        return None
    return gr.Markdown(comparison_markdown(recording), elem_id="device-comparison",
                       elem_classes=["note", "device-recording"])


def layout(kind: str, folder: Path = DEVICE_DIR) -> gr.Markdown | None:
    """Under a Why panel (inside a gr.Blocks): the device recording of `kind`, or nothing when there is none."""
    recording = device_recordings(folder).get(kind)
    if recording is None:
        return None
    return gr.Markdown(panel_markdown(recording), elem_id=f"device-{kind}", elem_classes=["note", "device-recording"])
