"""The run's room (app/run/): one plan, one stream of events, one runner that changes a lane; the page, the ZeroGPU
path and the server lanes consume the same events."""

from __future__ import annotations

import ast
import html
import re
import threading
from dataclasses import fields, replace
from pathlib import Path

import pytest

pytest.importorskip("gradio")

from app.hosting import gpu  # noqa: E402
from app.run.sessions import SessionStore  # noqa: E402
from app.run import runner  # noqa: E402
from app.run.events import Ended, LaneEvent, LaneRan, ServerLaneEvent  # noqa: E402
from app.run.plan import RunPlan  # noqa: E402
from app.run.runner import LaneRun, apply_all, apply_server  # noqa: E402
from app.servers import client  # noqa: E402
from app.settings import default_settings  # noqa: E402
from app.tabs.compare import CompareHandlers  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402
from serving_stub import Stub  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "def add(a, b):\n"


def settings_for(engine, methods=("baseline", "dflash"), **changes):
    return replace(default_settings(list(engine.methods())), prompt=PROMPT, methods=methods, max_new_tokens=4,
                   **changes)


def test_one_compare_run_encodes_the_prompt_once_and_checks_each_lanes_config_once(random_engine, monkeypatch):
    """Every encode and every validation counted, wherever it happens (the app's, the engine's, inside a lane's run
    or its timing repeats): the plan's requests are the only checks, and the runs take them as they are."""
    checks, validate, encode = [], GenerationConfig.validate, random_engine.encode_prompt

    def counted(config):
        checks.append(config.method)
        return validate(config)

    def encoded(prompt):
        checks.append("encode")
        return encode(prompt)

    monkeypatch.setattr(GenerationConfig, "validate", counted)
    monkeypatch.setattr(random_engine, "encode_prompt", encoded)
    runs, stream = [], random_engine.stream
    monkeypatch.setattr(random_engine, "stream",
                        lambda request: (runs.append(request.config.method), stream(request))[1])
    handlers = CompareHandlers.over(random_engine, SessionStore())
    methods = ("baseline", "dflash", "eagle3")
    outputs = list(handlers.run.run_comparison(settings_for(random_engine, methods), True, "counted", timing_runs=2))
    assert "done" in outputs[-1][0]
    assert runs == list(methods) * 2  # the live pass and a timing repeat of each lane: none checked again
    assert checks.count("encode") == 1
    assert sorted(c for c in checks if c != "encode") == sorted(methods)


def test_the_runs_end_says_what_each_lanes_request_ran(random_engine):
    """The plan's lanes carry the engine's requests, capped at the drafter's trained block; the runner's Ended
    reports that, not what was asked."""
    block = random_engine.max_drafts("dflash")
    plan = RunPlan.of(settings_for(random_engine, drafts_per_step_one_pass=block + 2), random_engine)
    assert [lane.request.drafts_per_step for lane in plan.lanes] == [None, block]
    assert plan.asked() == {"dflash": block + 2} and plan.prompt_ids == tuple(random_engine.encode_prompt(PROMPT))
    lanes = plan.lane_runs()
    end = list(runner.run_lanes(random_engine, PROMPT, lanes, threading.Event(), timing_runs=1))[-1]
    assert end.lanes == (LaneRan("baseline", "done", None), LaneRan("dflash", "done", block))
    assert end.capped(plan.asked()) == [("dflash", block, block + 2)]


def written(target: ast.AST) -> ast.Attribute | None:
    """The attribute an assignment target writes: `x.a = …`, `x.a[…] = …` (None for any other target)."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target if isinstance(target, ast.Attribute) else None


def lane_writes(path: Path, names: set[str]) -> list[str]:
    """Where a file writes an attribute named in `names`: assigned (also by subscript, augmented or annotated),
    changed in place by a list method, or set by setattr with that name (in app/servers, with any name made as it
    runs, as the server lanes once were)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in ast.walk(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            targets = []
        hit = any((attr := written(t)) is not None and attr.attr in names for t in targets)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            held = node.func.value
            hit |= node.func.attr in ("append", "extend", "clear", "pop", "insert", "remove") \
                and isinstance(held, ast.Attribute) and held.attr in names
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            name = node.args[1] if len(node.args) > 1 else None
            known = isinstance(name, ast.Constant)  # a name made as it runs counts where lanes live (app/servers)
            hit |= name.value in names if known else "servers" in path.parts
        if hit:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_lane_is_changed_outside_the_runner():
    """A page's lane (LaneRun) and a server lane (ServerLaneResult) change only in app/run/runner.py: every other
    file in app/ reads them (the server lanes' fields are checked in app/servers/, where they live)."""
    lane_fields = {f.name for f in fields(LaneRun)} - {"method", "config"}
    server_fields = {f.name for f in fields(client.ServerLaneResult)} - {"name"}
    writes = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path == ROOT / "app" / "run" / "runner.py":
            continue
        writes += lane_writes(path, lane_fields)
        if "servers" in path.parts:
            writes += lane_writes(path, server_fields)
    assert writes == []
    # the rule sees a write where there is one
    assert lane_writes(ROOT / "app" / "run" / "runner.py", lane_fields)


class GPUStandIn:
    """The ZeroGPU engine's one call per lane, here in this process: each step as the engine makes it."""

    def __init__(self, engine):
        self.engine = engine

    def stream_until(self, request, stop):
        for step in self.engine.stream(request):
            yield step
            if stop.is_set():
                return


def committed(lane: LaneRun) -> list[int]:
    return [t.id for s in lane.steps for t in s.committed]


def test_zerogpu_says_the_live_pass_as_the_runners_own_events(random_engine):
    """The ZeroGPU transport yields the same kind of events as the page's runner, applied by the same
    LaneRun.apply, and the same lanes come out; its runner ends with what each lane ran."""
    configs = [GenerationConfig(method=m, max_new_tokens=6, drafts_per_step=12) for m in ("baseline", "dflash")]
    requests = random_engine.requests(PROMPT, configs)
    here = [LaneRun(c.method, c) for c in configs]
    for event in runner.lane_events(random_engine, requests, threading.Event()):
        apply_all(here, event)
    stand_in = GPUStandIn(random_engine)
    there, events = [LaneRun(r.config.method, r.config, request=r) for r in requests], []
    for event in gpu.lane_runner(stand_in)(stand_in, PROMPT, there, threading.Event()):
        events.append(event)
    assert all(isinstance(e, LaneEvent) for e in events[:-1]) and isinstance(events[-1], Ended)
    assert [(e.index, e.state) for e in events[:-1] if e.state] == [(0, "running"), (0, "done"), (1, "running"),
                                                               (1, "done")]
    assert [committed(lane) for lane in there] == [committed(lane) for lane in here] and committed(here[0])
    assert [lane.state for lane in there] == ["done", "done"] and all(lane.timing_runs == 1 for lane in there)
    cap = random_engine.max_drafts("dflash")
    assert events[-1].lanes == (LaneRan("baseline", "done", None), LaneRan("dflash", "done", cap))


def test_server_lanes_are_events_the_runner_applies():
    """A server lane's answer arrives as ServerLaneEvents; the lanes stream_lane hands out are those events
    applied by the runner's apply_server, one new value each."""
    spec = client.ServerSpec("s", "", "vllm")
    with Stub("vllm") as stub:
        spec = replace(spec, url=stub.url)
        settings = {"temperature": 0.0, "max_new_tokens": 8, "seed": 0}
        events = list(client.lane_events(spec, PROMPT, settings))
        lanes = list(client.stream_lane(spec, PROMPT, settings))
    assert all(isinstance(e, ServerLaneEvent) for e in events) and len(events) == len(lanes)
    folded, lane = [], client.ServerLaneResult("s", "vllm")
    for event in events:
        lane = apply_server(lane, event)
        folded.append(lane)
    assert [(x.state, x.text) for x in folded] == [(x.state, x.text) for x in lanes]
    assert lanes[0].state == "running" and lanes[-1].state == "done" and lanes[-1].text
    assert len({id(x) for x in lanes}) == len(lanes)  # never one lane changed under a reader


def test_the_page_says_what_ran_from_the_runs_end_not_from_its_start_up_caps(random_engine):
    """The page consumes the same events: a lane runner whose end says DFlash ran 3 drafts per step (asked 7)
    makes the status say so; one whose end says it ran what was asked says nothing, whatever the caps."""

    def scripted(ran: int):
        def run_lanes(engine, prompt, lanes, stop, **_):
            for event in runner.lane_events(engine, [lane.request for lane in lanes], stop):
                apply_all(lanes, event)
                yield event
            yield Ended(tuple(LaneRan(lane.method, lane.state, ran if lane.method == "dflash" else None)
                              for lane in lanes))
        return run_lanes

    def status(ran: int) -> str:
        handlers = CompareHandlers.over(random_engine, SessionStore(), run_lanes=scripted(ran))
        settings = settings_for(random_engine, drafts_per_step_one_pass=7)
        outputs = list(handlers.run.run_comparison(settings, True, f"ran-{ran}"))
        return html.unescape(re.sub(r"<[^>]+>", "", outputs[-1][0]))

    assert "DFlash drafted 3 per step (its trained block), not 7" in status(3)
    assert "not 7" not in status(7)
