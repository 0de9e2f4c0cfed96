"""Every shipped recording says what made it, and one made by another engine fails the suite.

The staleness check is test_every_shipped_recording_was_made_by_todays_engine: a recording whose build digest
(engine/measure/provenance.py) differs from the engine now in the tree shows numbers today's engine may not measure.
It fails after any change to the engine's code or shipped models until everything is recorded again
(`python -m scripts.record`, docs/benchmarks.md "Recording everything").
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from engine.measure import provenance
from engine.measure.provenance import build_digest, build_inputs, recording_files, stale_recordings


def test_every_shipped_recording_was_made_by_todays_engine():
    files = recording_files()
    assert any(p.parent.name == "lessons" for p in files), "the check found no lesson recording"
    stale = stale_recordings()
    assert not stale, ("recordings made by another engine than today's (record them again: python -m scripts.record; "
                       "docs/benchmarks.md, Recording everything):\n" + "\n".join(stale))


def test_every_recording_job_writes_a_file_the_check_reads():
    from scripts import record

    checked = {p.relative_to(ROOT) for p in recording_files()}
    for job in record.jobs():
        for output in job.stamps:
            assert any(output.relative_to(ROOT).match(pattern) for pattern in provenance.RECORDING_GLOBS), \
                f"{job.key} writes {output}, which the staleness check does not read"
    written = {o.relative_to(ROOT) for job in record.jobs() for o in job.stamps}
    assert checked <= written, f"shipped recordings no job makes again: {sorted(map(str, checked - written))}"


def _copy_inputs(source: Path, dest: Path, link: bool = False) -> None:
    """The digest's inputs of `source` under `dest` (the weights hard-linked where `link`, never changed here)."""
    for path in build_inputs(source):
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if link and path.suffix == ".safetensors":
            try:
                os.link(path, target)
                continue
            except OSError:
                pass
        shutil.copyfile(path, target)
    shutil.copyfile(ROOT / provenance.THIS_FILE, dest / provenance.THIS_FILE)


def _stamp(root: Path, name: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "x", "data": {}, "provenance": {"build": build_digest(root)}}))
    return path


def _changed_line(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(("#", '"')))
    lines[index] = lines[index].rstrip("\n") + "  # one line changed\n"
    path.write_text("".join(lines), encoding="utf-8")


def test_a_one_line_engine_change_makes_the_check_fire(tmp_path):
    same, changed = tmp_path / "same", tmp_path / "changed"
    _copy_inputs(ROOT, same, link=True)
    assert build_digest(same) == build_digest(ROOT), "a copy of the same files is the same build"
    _stamp(same, "assets/lessons/greedy.json")
    _stamp(same, "assets/model_card.json")
    assert stale_recordings(same) == []

    _copy_inputs(same, changed, link=True)
    for name in ("assets/lessons/greedy.json", "assets/model_card.json"):
        (changed / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(same / name, changed / name)
    _changed_line(changed / "engine" / "loop.py")
    stale = stale_recordings(changed)
    assert len(stale) == 2 and all("today" in line for line in stale), stale
    assert stale_recordings(same) == [], "the unchanged copy stays today's"


def test_what_decides_no_token_leaves_the_build_alone(tmp_path):
    _copy_inputs(ROOT, tmp_path, link=True)
    before = build_digest(tmp_path)
    _stamp(tmp_path, "assets/lessons/greedy.json")  # a recording, a document and training code are not inputs
    (tmp_path / "assets" / "MODEL_CARD.md").write_text("anything")
    train = tmp_path / "engine" / "train" / "card.py"
    train.parent.mkdir(parents=True, exist_ok=True)
    train.write_text("x = 1\n")
    assert build_digest(tmp_path, cached=False) == before
    weights = next(p for p in build_inputs(tmp_path) if p.name == "config.json")
    weights.write_text(weights.read_text() + " ")  # a shipped config is one
    assert build_digest(tmp_path, cached=False) != before


def test_a_recording_without_provenance_is_stale(tmp_path):
    _copy_inputs(ROOT, tmp_path, link=True)
    (tmp_path / "assets" / "lessons").mkdir(parents=True, exist_ok=True)
    (tmp_path / "assets" / "lessons" / "old.json").write_text(json.dumps({"format": "x", "data": {}}))
    assert stale_recordings(tmp_path) == ["assets/lessons/old.json: no provenance (recorded before recordings were "
                                          "stamped)"]


@pytest.mark.parametrize("text", ["not json", "[]", '{"provenance": {"build": 3}}'])
def test_a_malformed_provenance_reads_as_none(tmp_path, text):
    path = tmp_path / "x.json"
    path.write_text(text)
    assert provenance.read_provenance(path) is None


STAMPING = ("import json, sys; from engine.measure.provenance import provenance; "
            "json.dump({'provenance': provenance('cpu (1 thread)', 1, 'a test', 0.5, None)}, open(sys.argv[1], 'w'))")


def test_the_recorder_runs_what_is_not_todays_and_skips_what_is(tmp_path):
    from scripts import record

    output = tmp_path / "x.json"
    job = record.Job("test:x", ("-c", STAMPING, str(output)), (output,), 1.0)
    log = record.Log(tmp_path / "record.log")
    assert not job.is_today(build_digest()) and job.previous_s() is None
    assert record.record([job], force=False, log=log, docs=False) == 0
    assert job.is_today(build_digest()) and job.previous_s() == 0.5
    assert job.estimate_s() == 0.5 + record.START_S  # the stamped duration, once there is one
    mtime = output.stat().st_mtime_ns
    assert record.record([job], force=False, log=log, docs=False) == 0
    assert output.stat().st_mtime_ns == mtime, "a recording of today's build was made again"
    text = (tmp_path / "record.log").read_text()
    assert "[1/1] test:x: done" in text and "skipped, already today's build" in text

    failing = record.Job("test:y", ("-c", "raise SystemExit(3)"), (tmp_path / "y.json",), 1.0)
    assert record.record([failing], force=False, log=log, docs=False) == 1
    assert "test:y: FAILED (status 3)" in (tmp_path / "record.log").read_text()


def test_the_recorders_jobs_come_from_the_lesson_registry(monkeypatch):
    from scripts import record, record_lessons

    monkeypatch.setitem(record_lessons.JOBS, "a_new_recording", lambda engine: {})
    keys = [job.key for job in record.jobs()]
    assert "lesson:a_new_recording" in keys and {"card", "screenshot", "device:comparison"} <= set(keys)
    job = next(job for job in record.jobs() if job.key == "lesson:a_new_recording")
    assert job.command == "python -m scripts.record_lessons a_new_recording" and job.estimate_s() > 0


def test_the_card_is_stamped_with_its_quiet_runs_baseline_and_its_markdown_says_so(tmp_path, monkeypatch):
    from engine.train.card import render_markdown
    from scripts import record_card

    card_json, card_md = tmp_path / "model_card.json", tmp_path / "MODEL_CARD.md"
    shutil.copyfile(ROOT / "assets" / "model_card.json", card_json)
    monkeypatch.setattr(record_card, "CARD_JSON", card_json)
    monkeypatch.setattr(record_card, "CARD_MD", card_md)
    card = record_card.stamp(1500.0, record_card.COMMAND)
    block = provenance.read_provenance(card_json)
    assert block["build"] == build_digest() and block["command"] == "python -m scripts.record_card"
    assert block["baseline_tokens_per_s"] == round(card["bench"]["quiet"]["baseline_tokens_per_s"], 1)
    assert card_md.read_text() == render_markdown(card)
    assert f"engine build {provenance.short(build_digest())}, by `python -m scripts.record_card` (25 min)" in \
        card_md.read_text()


def test_the_recheck_reads_each_recordings_speedups_with_their_stated_ranges(tmp_path):
    from scripts import record_recheck

    kv = {"format": "x", "data": {"lanes": {"dflash": {"speedup": 1.5, "speedup_interval": {"low": 1.4, "high": 1.7}},
                                            "dflash_no_features": {"speedup": 0.9}}}}
    path = tmp_path / "kv.json"
    path.write_text(json.dumps(kv))
    found = record_recheck.figures(path)
    assert found == {"dflash speedup": (1.5, (1.4, 1.7)), "dflash_no_features speedup": (0.9, None)}
    assert record_recheck.row("kv.json", "dflash speedup", found["dflash speedup"], 1.45).endswith("| 1.45× | inside |")
    assert record_recheck.row("kv.json", "dflash speedup", found["dflash speedup"], 1.8).endswith("| 1.80× | outside |")
    assert record_recheck.row("kv.json", "x", (1.0, None), 1.1).endswith("| +10 % |")


def test_a_job_measured_in_several_processes_is_estimated_for_as_many(tmp_path):
    """The default comparison is measured in several fresh processes: a stamp made in one (its own measuring only)
    is scaled to as many, each with its load; a stamp made in as many already counts them; a re-check measures it
    in one process more, and its table says what the range spans."""
    from scripts import record, record_recheck

    path = tmp_path / "comparison.json"
    job = record.Job("device:comparison", ("-m", "x"), (path,), 99.0, processes=3, recheck_args=("--processes", "1"))
    path.write_text(json.dumps({"provenance": provenance.provenance("cpu (1 thread)", 1, "x", 6.0, None)}))
    assert job.previous_processes() == 1 and job.estimate_s() == 3 * (6.0 + record.START_S)
    path.write_text(json.dumps({"provenance": provenance.provenance("cpu (1 thread)", 1, "x", 90.0, None,
                                                                    processes=3)}))
    assert job.previous_processes() == 3 and job.estimate_s() == 90.0
    shipped = next(j for j in record.jobs() if j.key == "device:comparison")
    assert shipped.processes == 3 and shipped.recheck_args == ("--processes", "1") and "--processes" not in shipped.args
    assert record.jobs()[0].processes == 1 and record.jobs()[0].recheck_args == ()
    line = record_recheck.row("c.json", "dflash speedup", (2.4, (2.2, 2.5)), 2.1, "3 processes")
    assert line.endswith("| 2.40× (2.20–2.50 over 3 processes) | 2.10× | outside |")
