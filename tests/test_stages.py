"""scripts/stages.sh, the stage loop of the background training scripts: two loops started side by side share the
stages out, each stage runs once, and a stage waits for the rows it reads while the other loop is still writing them;
where those rows never come, it is skipped and said."""

from __future__ import annotations

import subprocess
import time

from conftest import ROOT

# A stage stands in for `python -m engine.train STAGE --threads N` (or another module: runs/modules; its threads:
# runs/threads): it logs its start and end and leaves its output, the data stage slowly; FAIL names a stage that ends
# without its output.
FAKE_PYTHON = """#!/usr/bin/env bash
stage=$3
echo "start $stage" >> runs/events
echo "$2 $stage" >> runs/modules
echo "$4 $5" >> runs/threads
[ "$stage" = data ] && sleep 1
[ "$stage" = "${FAIL:-}" ] && exit 1
touch "runs/$stage.done"
echo "end $stage" >> runs/events
"""

LOOP = f"""set -euo pipefail
source {ROOT / "scripts" / "stages.sh"}
stage_done() {{ [ -f "runs/$1.done" ]; }}
stage_needs() {{ case "$1" in train) echo data ;; esac; }}
command_of() {{ echo "$1"; }}
run_stages data train
"""


def _loop(tmp_path, loop: str = LOOP) -> dict[str, str]:
    """The loop script and the stand-in python in tmp_path; the environment a loop runs in there."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    (tmp_path / "loop.sh").write_text(loop)
    return {"PATH": "/usr/bin:/bin", "PYTHON": str(python)}


def _two_loops(tmp_path, fail: str = "") -> tuple[list[str], str]:
    env = {**_loop(tmp_path), "FAIL": fail}
    first = subprocess.Popen(["bash", "loop.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)  # the first loop holds the data stage by now
    second = subprocess.run(["bash", "loop.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    first.communicate(timeout=30)
    return (tmp_path / "runs" / "events").read_text().splitlines(), second.stdout


def test_a_stage_waits_for_the_rows_another_loop_is_writing_and_each_stage_runs_once(tmp_path):
    events, said = _two_loops(tmp_path)
    assert events == ["start data", "end data", "start train", "end train"]
    assert "data: running in another loop, skipped" in said and "train: waiting for data" in said


def test_a_stage_whose_rows_never_come_is_skipped_and_said(tmp_path):
    events, said = _two_loops(tmp_path, fail="data")
    assert events == ["start data"]
    assert "train: data did not finish (runs/data.log); skipped" in said


def test_a_stage_runs_the_module_its_script_names_and_the_others_engine_train(tmp_path):
    env = _loop(tmp_path, LOOP.replace("run_stages data train", """module_of() { case "$1" in
  measure) echo scripts.weights_beside ;; *) echo engine.train ;; esac; }
run_stages data train measure"""))
    subprocess.run(["bash", "loop.sh"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=30)
    assert (tmp_path / "runs" / "modules").read_text().splitlines() == [
        "engine.train data", "engine.train train", "scripts.weights_beside measure"]


def test_a_loop_trains_on_one_thread_unless_told_more(tmp_path):
    env = _loop(tmp_path)
    subprocess.run(["bash", "loop.sh"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=30)
    assert (tmp_path / "runs" / "threads").read_text().splitlines() == ["--threads 1"] * 2
    for done in (tmp_path / "runs").glob("*.done"):
        done.unlink()
    subprocess.run(["bash", "loop.sh"], cwd=tmp_path, env={**env, "THREADS": "2"}, check=True, capture_output=True,
                   timeout=30)
    assert (tmp_path / "runs" / "threads").read_text().splitlines() == ["--threads 1"] * 2 + ["--threads 2"] * 2


def test_a_stage_reading_what_another_loop_still_makes_goes_after_the_loops_own(tmp_path):
    """Two loops, each training one drafter and then measuring both: the loop that finishes its drafter first measures
    it at once, and measures the other's only once that is done, rather than waiting on it with its own unmeasured."""
    env = _loop(tmp_path, LOOP.replace('stage_needs() { case "$1" in train) echo data ;; esac; }',
                                       'stage_needs() { case "$1" in measure-*) echo "${1#measure-}" ;; esac; }')
                .replace("run_stages data train", "run_stages data train measure-data measure-train"))
    first = subprocess.Popen(["bash", "loop.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)  # the first loop holds the (slow) data stage by now
    second = subprocess.run(["bash", "loop.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    first.communicate(timeout=30)
    events = (tmp_path / "runs" / "events").read_text().splitlines()
    assert sorted(events) == sorted(f"{e} {s}" for e in ("start", "end")
                                    for s in ("data", "train", "measure-data", "measure-train"))
    # the second loop trained and measured its own before the first loop's data ended, then measured the data
    assert events.index("end measure-train") < events.index("end data") < events.index("start measure-data")
    assert "measure-data: waiting for data" in second.stdout
