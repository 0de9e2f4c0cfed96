"""Record everything the app and the docs show from a measurement: `python -m scripts.record`.

One job a recording, each run by its own command in a process of its own: every lesson recording
(scripts/record_lessons.py JOBS, so a recording registered there is recorded here too), the CPU's device recordings
(the Compare tab's default comparison, measured in 3 fresh processes one after another; trees; load:
scripts/device_recordings.py), the model card's speed tables at temperature 0 (quiet and beside a busy core) and 1
(scripts/record_card.py), and the README's screenshot
(scripts/record_screenshot.py); then the docs' generated blocks are written again from the recordings
(scripts/record_docs.py). Each recording carries a "provenance" block (engine/measure/provenance.py).

Resumable: a job whose recordings already carry today's engine build is skipped (--force records it again), so
after a cut-off run the same command goes on where it stopped. Background-friendly: progress lines with an estimate
of what is left go to stdout and to the log (runs/record.log), each job's own output to the log only:

    nohup .venv/bin/python -m scripts.record > /dev/null 2>&1 &   tail -f runs/record.log
    python -m scripts.record --list                # every job, its command and its estimated time
    python -m scripts.record --only lesson:greedy device:trees
    python -m scripts.record --recheck 5           # re-measure 5 cheap recordings beside them: a markdown table

Run it on a quiet machine: the timings are what a class will see.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from engine.measure.provenance import build_digest, read_provenance, short

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "runs" / "record.log"
PYTHON = sys.executable
# Estimates before a recording stamps its own duration: lane-tokens (tokens each lane writes, summed) at this rate,
# the rate that gives the temperature sweep's 21 minutes on 2 quiet cores, plus the engine's load and warm-up.
LANE_TOKENS_PER_S = 60
START_S = 30


@dataclass(frozen=True)
class Job:
    key: str  # "lesson:greedy", "device:trees", "card", "screenshot"
    args: tuple[str, ...]  # after `python`, run in the repository root
    stamps: tuple[Path, ...]  # the files that carry its provenance (JSON with a "provenance" block)
    sized_s: float  # the estimate from its sizes
    cheap: bool = False  # small enough to re-measure beside its recording (--recheck)
    others: tuple[Path, ...] = field(default=())  # what else it writes (the screenshot, the card's markdown)
    # fresh processes it measures in, one after another, each loading the engine (its stamp says how many)
    processes: int = 1
    recheck_args: tuple[str, ...] = field(default=())  # added to args when --recheck measures it again

    @property
    def command(self) -> str:
        return "python " + " ".join(self.args)

    def previous_s(self) -> float | None:
        """How long its last recording took, as stamped."""
        took = [block.get("duration_s") for block in map(read_provenance, self.stamps) if block]
        took = [t for t in took if isinstance(t, (int, float))]
        return sum(took) if took and len(took) == len(self.stamps) else None

    def previous_processes(self) -> int:
        """In how many processes its last recording was measured, as stamped (1 where the stamp does not say)."""
        said = [block.get("processes") for block in map(read_provenance, self.stamps) if block]
        return max([n for n in said if isinstance(n, int) and n > 0], default=1)

    def estimate_s(self) -> float:
        """Its last recording's duration and the engine's load and warm-up (START_S), once per process: a duration
        stamped by a single process counts only its own measuring, one stamped over several processes their loads
        too; a recording made in another number of processes than this job's is scaled to this job's."""
        previous = self.previous_s()
        if previous is None:
            return self.sized_s
        before = self.previous_processes()
        if before == self.processes:
            return previous + (START_S if before == 1 else 0)
        each = previous / before if before > 1 else previous + START_S  # one process's, its load included
        return each * self.processes

    def is_today(self, build: str) -> bool:
        blocks = [read_provenance(path) for path in self.stamps]
        return all(block is not None and block["build"] == build for block in blocks)


def _lesson_sizes() -> dict[str, float]:
    """Each lesson recording's lane-tokens, from app/lesson's sizes."""
    from app import lesson
    from app.lesson import kv
    from engine.contract.methods import METHOD_REGISTRY

    lanes = len(METHOD_REGISTRY)
    chains = sum(1 for m in METHOD_REGISTRY.values() if m.drafts and not m.tree)
    serial = sum(1 for m in METHOD_REGISTRY.values() if m.drafts and not m.tree and not m.one_pass)
    trees = lanes - 1 - chains
    load_lanes = len(lesson.LIVE_LOAD_LANES) + 1  # the batched lanes and transformers' generate beside them
    return {
        "greedy": lanes * lesson.NEW_TOKENS,
        "sampled": lanes * lesson.NEW_TOKENS,
        "sweeps": (serial * len(lesson.SWEEP_KS) + chains - serial + 1) * lesson.SWEEP_PROMPTS * 2 * lesson.SWEEP_TOKENS,
        # each one-pass lane at most of the ladder (and its own block), beside a baseline, at each temperature
        "blocks": (chains - serial) * (len(lesson.BLOCK_LADDER) + 1) * len(lesson.BLOCK_TEMPERATURES)
        * lesson.BLOCK_PROMPTS * lesson.BLOCK_ROUNDS * lesson.BLOCK_TOKENS,
        "lossless": lesson.LOSSLESS_SAMPLES * chains * 8,
        "parts": 6 * lesson.PARTS_PROMPTS * 2 * lesson.NEW_TOKENS,
        "temperatures": ((chains + 1) * len(lesson.TEMPERATURES) + len(lesson.ARGMAX_AT) * 3)
        * lesson.TEMPERATURE_PROMPTS * lesson.TEMPERATURE_TOKENS,
        "trees": (trees * len(lesson.TREE_BUDGETS) + trees + 1) * lesson.TREE_PROMPTS * lesson.TREE_ROUNDS
        * lesson.TREE_TOKENS,
        # a batch of B shares each forward: about B^0.65 times the tokens a second of one request
        "load": sum(load_lanes * lesson.LOAD_REQUESTS * lesson.LOAD_TOKENS * lesson.LOAD_ROUNDS / size ** 0.65
                    for size in lesson.LOAD_SIZES),
        "kv": 3 * kv.KV_PROMPTS * kv.KV_ROUNDS * kv.KV_TOKENS,
    }


def _seconds(lane_tokens: float) -> float:
    return START_S + lane_tokens / LANE_TOKENS_PER_S


def jobs() -> list[Job]:
    """Every recording job, in the order they run: the lessons, the device's, the card, the screenshot last (it
    shows the recordings)."""
    from app import lesson
    from scripts import device_recordings, record_card, record_lessons, record_screenshot

    sizes = _lesson_sizes()
    found = [Job(f"lesson:{key}", ("-m", "scripts.record_lessons", key), (record_lessons.output_path(key),),
                 _seconds(sizes.get(key, 20_000)), cheap=key in ("greedy", "sampled", "parts", "kv", "sweeps"))
             for key in record_lessons.JOBS]
    live_lanes = len(lesson.LIVE_LOAD_LANES)
    device_sizes = {"comparison": 5 * 3 * 64, "trees": 7 * lesson.LIVE_TREE_PROMPTS * lesson.LIVE_TREE_TOKENS,
                    "load": live_lanes * 2 * lesson.LIVE_LOAD_REQUESTS * lesson.LIVE_LOAD_TOKENS}
    folder = device_recordings.DEFAULT_OUT / "cpu"
    # the default comparison is measured in PROCESSES fresh processes (its range spans them); a re-check measures
    # it again in one more, as a visitor's server would, to see whether that falls inside the range
    processes = {name: device_recordings.PROCESSES if name == "comparison" else 1 for name in device_recordings.NAMES}
    found += [Job(f"device:{name}", ("-m", "scripts.device_recordings", "--device", "cpu", "--quick", "--only", name),
                  (folder / file,), _seconds(device_sizes[name]) * processes[name], cheap=True,
                  processes=processes[name], recheck_args=("--processes", "1") if processes[name] > 1 else ())
              for name, file in device_recordings.NAMES.items()]
    card_s = record_card.ENGINE_STARTS * START_S + record_card.lane_tokens() / LANE_TOKENS_PER_S
    found.append(Job("card", ("-m", "scripts.record_card"), (record_card.CARD_JSON,), card_s,
                     others=(record_card.CARD_MD,)))
    found.append(Job("screenshot", ("-m", "scripts.record_screenshot"), (record_screenshot.STAMP,),
                     record_screenshot.ESTIMATE_S, others=(record_screenshot.SHOT,)))
    return found


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class Log:
    """Progress lines to stdout and the log; a job's own output to the log only."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.handle = open(path, "a", encoding="utf-8")

    def say(self, line: str) -> None:
        stamped = f"{datetime.now(timezone.utc):%H:%M:%S} {line}"
        print(stamped, flush=True)
        self.handle.write(stamped + "\n")
        self.handle.flush()


def run_job(job: Job, log: Log) -> int:
    log.handle.write(f"--- {job.command}\n")
    log.handle.flush()
    done = subprocess.run([PYTHON, *job.args], cwd=ROOT, stdout=log.handle, stderr=subprocess.STDOUT)
    return done.returncode


def list_jobs(selected: list[Job], build: str) -> None:
    total = 0.0
    print(f"engine build {short(build)}; {len(selected)} jobs:")
    for job in selected:
        state = "today's" if job.is_today(build) else "to record"
        source = "last run" if job.previous_s() is not None else "sizes"
        total += 0 if job.is_today(build) else job.estimate_s()
        print(f"  {job.key:<20} {minutes(job.estimate_s()):>7} ({source})  {state:<9}  {job.command}")
    print(f"left to record: about {minutes(total)}")


def record(selected: list[Job], force: bool, log: Log, docs: bool = True) -> int:
    """Run each job of `selected` not yet of today's build (all with `force`), then (docs) write the docs' generated
    blocks again. 0 when every job ended with its recordings of today's build."""
    build = build_digest()
    todo = [job for job in selected if force or not job.is_today(build)]
    for job in selected:
        if job not in todo:
            log.say(f"{job.key}: skipped, already today's build {short(build)} (--force records it again)")
    log.say(f"recording {len(todo)} of {len(selected)} jobs on build {short(build)}, about "
            f"{minutes(sum(j.estimate_s() for j in todo))}; log: {log.path}")
    failed = []
    spent = estimated = 0.0  # so far: the estimates of what is left are scaled by how the jobs so far went
    for index, job in enumerate(todo, 1):
        estimate = job.estimate_s()
        log.say(f"[{index}/{len(todo)}] {job.key}: {job.command} (about {minutes(estimate)})")
        started = time.monotonic()
        code = run_job(job, log)
        took = time.monotonic() - started
        spent, estimated = spent + took, estimated + estimate
        left = sum(j.estimate_s() for j in todo[index:]) * spent / estimated
        if code or not job.is_today(build):
            failed.append(job.key)
            log.say(f"[{index}/{len(todo)}] {job.key}: FAILED (status {code}) after {minutes(took)}; its output is in "
                    f"{log.path}")
        else:
            log.say(f"[{index}/{len(todo)}] {job.key}: done in {minutes(took)} (estimated {minutes(estimate)}); "
                    f"left: about {minutes(left)}, {len(todo) - index} jobs")
    if build_digest(cached=False) != build:
        log.say("the engine changed while recording: record again (the changed files make another build)")
        return 1
    if docs:  # in a process of its own, as every job: the docs read the recordings as they are now
        written = subprocess.run([PYTHON, "-m", "scripts.record_docs"], cwd=ROOT, capture_output=True, text=True)
        log.handle.write(written.stdout + written.stderr)
        if written.returncode:
            failed.append("docs")
        log.say(f"docs: {(written.stdout.strip().splitlines() or ['no output'])[-1]}")
    if failed:
        log.say(f"failed: {', '.join(failed)}; run the same command again to record only what is left")
        return 1
    log.say("every recording is today's")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.record", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the jobs with their estimated time, record nothing")
    parser.add_argument("--only", nargs="+", metavar="KEY", help="only these jobs (KEY as --list names them; "
                        "'lesson' or 'device' for all of a kind)")
    parser.add_argument("--force", action="store_true", help="record again what already carries today's build")
    parser.add_argument("--log", type=Path, default=LOG)
    parser.add_argument("--recheck", type=int, metavar="N", default=0,
                        help="re-measure N cheap recordings with their own commands into a temporary folder and print "
                             "a markdown table of each recorded figure beside the re-measured one")
    parser.add_argument("--write", action="store_true", help="with --recheck: also write the table into "
                        "docs/benchmarks.md")
    args = parser.parse_args(argv)
    every = jobs()
    selected = every
    if args.only:
        keys = {job.key for job in every}
        unknown = [key for key in args.only if key not in keys and key not in {k.split(":")[0] for k in keys}]
        if unknown:
            parser.error(f"unknown job {unknown[0]!r}: choose from {', '.join(sorted(keys))}")
        selected = [job for job in every if job.key in args.only or job.key.split(":")[0] in args.only]
    if args.recheck:
        from scripts import record_recheck

        table = record_recheck.recheck(selected, args.recheck)
        print(table)
        if args.write:
            record_recheck.write_table(table, args.recheck)
        return 0
    if args.list:
        list_jobs(selected, build_digest())
        return 0
    return record(selected, args.force, Log(args.log))


if __name__ == "__main__":
    sys.exit(main())
