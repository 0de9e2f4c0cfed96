"""Recorded runs on disk: a link opened after a restart replays the same run; the folder stays bounded; a full
disk, a broken file or a second writer never costs a visitor their run."""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import replace

import pytest

from app.comparison import Comparison, LaneResult, settings_dict
from app.recordings import SUFFIX, RecordedRuns, file_name
from engine.contract.types import GenerationConfig

PROMPT = "def add(a, b):"


@pytest.fixture(scope="module")
def comparison(random_engine):
    from app.settings import default_settings

    methods = ("baseline", "eagle3")
    settings = settings_dict(replace(default_settings(), prompt=PROMPT, max_new_tokens=10, methods=methods))
    lanes = {m: LaneResult.ended(m, random_engine.stream(PROMPT, GenerationConfig(method=m, max_new_tokens=10)),
                                 timing_runs=3) for m in methods}
    return Comparison(settings, lanes, "cpu (1 thread)", "random")


def same_numbers(a: Comparison, b: Comparison) -> bool:
    return a.to_json() == b.to_json() and all(a.speedup(m) == b.speedup(m) for m in a.lanes)


def test_a_record_survives_a_restart(comparison, tmp_path):
    RecordedRuns(tmp_path).remember("key-1", comparison)
    restarted = RecordedRuns(tmp_path)  # a new process: nothing in memory
    again = restarted.last("key-1")
    assert again is not None and same_numbers(again, comparison)
    assert restarted.last("key-2") is None
    assert [p.name for p in tmp_path.iterdir()] == [file_name("key-1")]  # no temporary file left behind


def test_the_folder_is_bounded_in_files_and_bytes(comparison, tmp_path):
    runs = RecordedRuns(tmp_path, max_files=3)
    for i in range(5):
        runs.remember(f"key-{i}", comparison)
        os.utime(tmp_path / file_name(f"key-{i}"), (1_000 + i, 1_000 + i))  # distinct ages, oldest first
    runs.remember("key-5", comparison)
    assert sorted(p.name for p in tmp_path.glob("*" + SUFFIX)) == sorted(file_name(f"key-{i}") for i in (3, 4, 5))
    one = (tmp_path / file_name("key-5")).stat().st_size
    small = RecordedRuns(tmp_path / "small", max_bytes=int(2.5 * one))
    for i in range(4):
        small.remember(f"key-{i}", comparison)
    assert sum(p.stat().st_size for p in (tmp_path / "small").glob("*" + SUFFIX)) <= 2.5 * one


def test_a_run_that_cannot_be_stored_is_still_kept_in_memory(comparison, tmp_path, caplog):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the folder should be")
    runs = RecordedRuns(blocked)
    runs.remember("key", comparison)  # no exception reaches the visitor
    runs.remember("key", comparison)
    assert runs.last("key") is comparison
    assert len([r for r in caplog.records if "memory only" in r.message]) == 1  # said once


def test_a_broken_or_foreign_file_is_ignored(comparison, tmp_path):
    RecordedRuns(tmp_path).remember("key", comparison)
    path = tmp_path / file_name("key")
    doc = json.loads(path.read_text())
    doc["key"] = "another configuration"
    path.write_text(json.dumps(doc))
    assert RecordedRuns(tmp_path).last("key") is None
    path.write_text(path.read_text()[:500])  # cut short
    assert RecordedRuns(tmp_path).last("key") is None
    doc["key"] = "key"
    doc["lanes"]["eagle3"][1]["num_accepted"] = 99  # tampered: refused like any saved file
    path.write_text(json.dumps(doc))
    assert RecordedRuns(tmp_path).last("key") is None


def test_concurrent_writers_never_leave_half_a_file(comparison, tmp_path):
    writers = [RecordedRuns(tmp_path, max_files=4) for _ in range(4)]
    errors = []

    def write(runs: RecordedRuns, n: int):
        try:
            for i in range(6):
                runs.remember(f"key-{(n + i) % 5}", comparison)
        except Exception as exc:  # noqa: BLE001  any failure fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, n)) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    files = list(tmp_path.glob("*" + SUFFIX))
    assert 1 <= len(files) <= 4 and not list(tmp_path.glob(".writing-*"))
    reader = RecordedRuns(tmp_path)
    for path in files:
        key = json.loads(path.read_text())["key"]
        assert same_numbers(reader.last(key), comparison)


def test_a_share_link_replays_its_recorded_run_after_a_restart(random_engine, tmp_path):
    """The page's own events, as a browser calls them: a link runs once, the server restarts (a new app on the
    same folder), the same link shows the recorded numbers without running anything."""
    from types import SimpleNamespace

    from app.settings import PARSERS
    from app.main import build_app

    query = {"prompt": "def g(y):", "methods": "baseline,ar", "max_new_tokens": "8"}

    def figures(outputs) -> list[str]:
        """Every number a lane's chips show (τ, α, tokens/s, speedups, ...), lane by lane."""
        values = [o.get("value") if isinstance(o, dict) else o for o in outputs]
        found = [re.findall(r"<b>([^<]*)</b>", v) for v in values if isinstance(v, str) and "data-method" in v]
        return [numbers for numbers in found if numbers]  # lanes not in the comparison show none

    def visit(demo) -> tuple[str, list]:
        fns = {dep.name: dep.fn for dep in demo.fns.values()}
        page = SimpleNamespace(session_hash="lecturer", query_params=query)
        outputs = fns["restore"](page)
        link_query, status = outputs[len(PARSERS) + 1], outputs[len(PARSERS) + 2]
        if isinstance(link_query, str) and link_query:
            outputs = list(fns["run_link"](link_query, True, page))[-1]
            return outputs[0], figures(outputs[1:])
        return status, figures(outputs[len(PARSERS) + 3:])

    first_status, first_lanes = visit(build_app(random_engine, recordings=tmp_path))
    assert "done" in first_status
    calls = []
    real = random_engine.stream
    random_engine.stream = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        status, lanes = visit(build_app(random_engine, recordings=tmp_path))  # after the restart
    finally:
        del random_engine.stream
    assert "ran before on this server" in status and not calls
    assert len(lanes) == 2 and lanes == first_lanes and all(lanes)


@pytest.fixture(scope="module")
def tiny(random_engine) -> Comparison:
    """The cheapest comparison a visitor can ask for: the baseline, one new token."""
    from app.settings import default_settings

    settings = settings_dict(replace(default_settings(), prompt=PROMPT, max_new_tokens=1, methods=("baseline",)))
    lane = LaneResult.ended("baseline", random_engine.stream(PROMPT, GenerationConfig(method="baseline",
                                                                                      max_new_tokens=1)))
    return Comparison(settings, {"baseline": lane}, "cpu (1 thread)", "random")


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_flood_of_tiny_links_pushes_out_neither_a_pinned_run_nor_a_costly_one(comparison, tiny, tmp_path, on_disk):
    from app.recordings import run_cost_s

    assert run_cost_s(comparison) > 3 * run_cost_s(tiny)  # ten tokens of two lanes, timed three times
    runs = RecordedRuns(tmp_path if on_disk else None, limit=4, max_files=8)
    runs.remember("lecturer", comparison, pinned=True)
    runs.remember("costly", comparison)
    for i in range(300):  # one visitor, 300 distinct one-token links
        runs.remember(f"flood-{i}", tiny)
    runs.remember("lecturer", tiny)  # a visitor's own run of the pinned configuration: shown to them, not kept
    assert runs.last("flood-299") is tiny  # the newest is kept, like any record
    for reader in [runs, RecordedRuns(tmp_path)] if on_disk else [runs]:  # ... and after a restart
        assert same_numbers(reader.last("lecturer"), comparison) and same_numbers(reader.last("costly"), comparison)
    if on_disk:
        assert len(list(tmp_path.glob("*" + SUFFIX))) <= 8 and (tmp_path / "pinned" / file_name("lecturer")).exists()


def _visit(demo, query: dict, session: str):
    """A page opened on a share link, as the browser calls its events: the load, then the link's run."""
    from types import SimpleNamespace

    from app.settings import PARSERS

    fns = {dep.name: dep.fn for dep in demo.fns.values()}
    page = SimpleNamespace(session_hash=session, query_params=query)
    outputs = fns["restore"](page)
    link_query = outputs[len(PARSERS) + 1]
    if isinstance(link_query, str) and link_query:  # not recorded yet: it runs
        return fns["restore"].__self__, list(fns["run_link"](link_query, True, page))[-1][0]
    return fns["restore"].__self__, outputs[len(PARSERS) + 2]  # replayed at once


LINK = {"prompt": "def h(z):", "methods": "baseline,ar", "max_new_tokens": "6"}


def test_a_run_stopped_during_its_timing_runs_is_never_recorded(random_engine):
    from app.run import runner
    from app.links import parse_query
    from app.main import build_app

    def stopped_while_timed(engine, prompt, lanes, stop, **kwargs):
        for _ in runner.run_lanes(engine, prompt, lanes, stop, **kwargs):
            if any(lane.repeating for lane in lanes):
                stop.set()  # Stop pressed once every lane is done, while the timing runs go on
            yield

    for run_lanes, recorded in ((stopped_while_timed, False), (runner.run_lanes, True)):
        handlers, status = _visit(build_app(random_engine, run_lanes=run_lanes), LINK, "visitor")
        key = handlers.replays.result_key(parse_query(list(LINK.items()), handlers.views.defaults, handlers.views.methods)[0])
        assert ("stopped" in status) != recorded and (handlers.replays.sessions.recorded.last(key) is not None) == recorded


def test_a_link_opened_with_the_operators_pin_key_pins_its_recorded_run(random_engine, tmp_path):
    from app.links import parse_query
    from app.main import build_app

    demo = build_app(random_engine, recordings=tmp_path, pin_key="s3cret")
    handlers, status = _visit(demo, {**LINK, "pin": "wrong"}, "visitor")
    key = handlers.replays.result_key(parse_query(list(LINK.items()), handlers.views.defaults, handlers.views.methods)[0])
    assert "done" in status and not handlers.replays.sessions.recorded.is_pinned(key)  # recorded, not pinned
    _, status = _visit(demo, {**LINK, "pin": "s3cret"}, "lecturer")  # the operator opens it: the replay is pinned
    assert "ran before on this server" in status and handlers.replays.sessions.recorded.is_pinned(key)
    assert (tmp_path / "pinned" / file_name(key)).exists() and not (tmp_path / file_name(key)).exists()
    unpinned = build_app(random_engine, recordings=tmp_path / "other")  # no key: `pin=` pins nothing
    handlers, _ = _visit(unpinned, {**LINK, "pin": ""}, "visitor")
    assert not handlers.replays.sessions.recorded.is_pinned(key)
