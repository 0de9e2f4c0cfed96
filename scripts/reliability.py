"""The app against hostile input and crowds: `python scripts/reliability.py [--mutations 2000] [--crowd 40 100]`.

Replays a catalogue and prints the counts (docs/benchmarks.md has the last figures):
- files: a real saved comparison (assets/lessons/sampled.json) mutated N ways — types flipped, names and
  numbers out of the engine's vocabulary and ranges, values nested, dropped or repeated; each is shown by every
  view (every lane, every chart, the first and last step) or refused in one line. Counts anything else.
- endpoints and links, against a running app (`python -m app`, the embedded models, on a free loopback port):
  bad values sent to every named endpoint, to both Open buttons (no file), the step controls (an infinite
  step) and the examples (one that does not exist), and tampered share links opened; counts the app's own
  one-line answers, Gradio's generic errors, and tracebacks in the server's log.
- long addresses: four addresses over 65,536 characters; counts the app's own one-line answers (HTTP 414) and
  the HTTP server's own refusals of the longest (HTTP 400).
- memory: 20 large files (about 9 MB each) opened at once; the server's resident memory before, at its peak, and
  after.
- crowd: N visitors opening one recorded link together (scripts/app_load.py); p50/p95 seconds.
- new controls: the slides' handlers, the batch control, event indexes that do not exist, script-only events,
  answer streams for unknown sessions and events, REST API names that do not exist, `?present=1&present=0`, trees from files thousands deep or wide; counted
  as the endpoints are.
- fairness (one machine playing many addresses with X-Forwarded-For, which the server honours from the loopback):
  one address flooding the queue and another's place after it; the largest comparison against the budget; 35
  distinct runs from 35 addresses, each one's seconds to its place and expected start; Stop on a waiting run; a
  running visitor's Stop and last result after 70 fresh sessions.
- disk: 100 uploads of 9.9 MB from 8 addresses; the folders of uploads and downloads before and after.
- upload_flood: 16 addresses uploading 9.9 MB files for 10 s (`--flood-s`); then the seconds until a new visitor's
  upload is kept, and whether a download offered before the flood is still served.
- toggle_flood: 150 projector toggles (`--toggles`) from one address on an opened 9.9 MB comparison; the server's
  memory at rest, at its peak and after; another visitor's default comparison alone and beside the toggles.
- class_code: 35 browsers behind one school address each asking for a run of their own, without a class code, in a
  class of 40 the presenter opened (the server runs with a presenter key), and after the class ended.
- crafted: each crafted kind of file inside the size cap (a tree 12,000 deep, 20,000 siblings, edited texts, an
  impossible rate, a 9 MB comparison) opened as the page does; CPU seconds and the answer (no server).
- lessons: 35 visitors opening each lesson point's link together, and two of its slides; p95 seconds each.

`--only NAME ...` runs some families (files, endpoints, addresses, memory, crowd, controls, fairness, disk, lessons,
upload_flood, toggle_flood, class_code, crafted).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

from engine.contract.methods import BASELINE, DFLASH, DSPARK, EAGLE3  # torch-free
from scripts.app_client import API, ROOT, App, join, messages, rss_mib, start_app, tls
from scripts.support import free_port

SAVED = ROOT / "assets" / "lessons" / "sampled.json"
LOG = ROOT / "runs" / "reliability_server.log"
ODD_VALUES = (None, True, False, -1, 0, 1, 2, 0.5, -0.5, 1.5, 99, 2**40, 1e308, -1e308, float("nan"), float("inf"),
              "", "maybe", "<b>x</b>", "cut", "eos", [], {}, [1, 2], {"id": 1})


# --- files -----------------------------------------------------------------------------------------------

def places(doc, path=()):
    """Every (path, value) in a JSON document, containers included."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from places(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from places(value, (*path, i))


def mutate(doc, rng: random.Random, paths: list | None = None):
    """A copy of `doc` with one place changed: given an odd value, dropped, nested in a list, or repeated.
    paths: the places of `doc` (listed once by the caller: a large file has a hundred thousand)."""
    paths = paths if paths is not None else [p for p, _ in places(doc) if p]
    path = rng.choice(paths)
    doc = json.loads(json.dumps(doc))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key, how = path[-1], rng.randrange(4)
    value = parent[key]
    if how == 0:
        parent[key] = rng.choice(ODD_VALUES)
    elif how == 1 and isinstance(parent, dict):
        del parent[key]
    elif how == 2:
        parent[key] = [value]
    elif isinstance(parent, list):
        parent.insert(key, value)
    else:
        parent[key] = rng.choice(ODD_VALUES)
    return doc


def draw_everything(comparison) -> None:
    """Every view of a comparison: each lane, every chart, the first and the last step."""
    from app.draw.charts import comparison_figures
    from app.draw.render import lane_html
    from app.tabs.step import last_step, step_view

    for method in comparison.lanes:
        lane_html(comparison, method)
    comparison_figures(comparison)
    for i in (0, last_step(comparison)):
        step_view(comparison, i)


def read_comparison_of(path: Path):
    from app.comparison import read_comparison

    return read_comparison(path.read_bytes())


def files(mutations: int, seed: int = 0) -> dict:
    from app.comparison import RecordError, read_comparison

    saved, rng = json.loads(SAVED.read_text(encoding="utf-8")), random.Random(seed)
    paths = [p for p, _ in places(saved) if p]
    counts = {"mutations": mutations, "shown": 0, "refused_in_one_line": 0, "other_failures": 0}
    for _ in range(mutations):
        try:
            comparison = read_comparison(json.dumps(mutate(saved, rng, paths)))
        except RecordError as exc:
            counts["refused_in_one_line" if "\n" not in str(exc) else "other_failures"] += 1
            continue
        except Exception as exc:  # what the catalogue is looking for
            counts["other_failures"] += 1
            print(f"  read failed: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        try:
            draw_everything(comparison)
            counts["shown"] += 1
        except Exception as exc:
            counts["other_failures"] += 1
            print(f"  drawing failed: {type(exc).__name__}: {str(exc)[:120]}")
    return counts


def large_file(target_bytes: int = 9_000_000) -> bytes:
    """A valid saved comparison of about `target_bytes`: the lesson's, its decode steps repeated and renumbered."""
    doc = json.loads(SAVED.read_text(encoding="utf-8"))
    size = len(SAVED.read_bytes())
    repeats = max(1, target_bytes // size)
    for method, steps in doc["lanes"].items():
        decode = [s for s in steps[1:] if s.get("finish_reason") is None]
        grown = steps[:1] + [dict(s) for _ in range(repeats) for s in decode] + steps[-1:]
        for i, step in enumerate(grown):
            step["index"] = i
        doc["lanes"][method] = grown
    doc["settings"]["max_new_tokens"] = 512  # the page's most
    return json.dumps(doc).encode()


def crafted_files() -> dict:
    """Each crafted kind of file inside the size cap, opened as the page opens one (read, then every view drawn):
    its CPU seconds and whether it was shown or refused in one line."""
    from app.comparison import RecordError, read_comparison
    from app.draw.render import sameness_html

    def tree(nodes: int, parents=None) -> bytes:
        doc = json.loads(SAVED.read_text(encoding="utf-8"))
        step = next(s for s in doc["lanes"][EAGLE3][1:] if s["drafted"])
        token = {**step["drafted"][0], "verdict": "unverified", "draft_top": [], "target_top": []}
        bonus = next(t for t in step["committed"] if t["source"] == "bonus")
        step.update(drafted=[dict(token) for _ in range(nodes)], num_accepted=0, num_verified=nodes, committed=[bonus],
                    parents=parents if parents is not None else list(range(-1, nodes - 1)))
        return json.dumps(doc).encode()

    def edited() -> bytes:
        doc = json.loads(SAVED.read_text(encoding="utf-8"))
        doc["lanes"][EAGLE3][3]["committed"][0]["text"] = " edited"
        return json.dumps(doc).encode()

    def rate() -> bytes:
        doc = json.loads(SAVED.read_text(encoding="utf-8"))
        doc["run_rates"] = {m: [[None, 1_099_539.0]] for m in doc["lanes"]}
        return json.dumps(doc).encode()

    kinds = {"tree_chain_12000_deep": lambda: tree(12_000), "tree_20000_siblings": lambda: tree(20_000, [-1] * 20_000),
             "tree_64_deep": lambda: tree(64), "edited_texts": edited, "rate_1099539_per_s": rate,
             "large_9mb": large_file}
    report = {}
    for name, make in kinds.items():
        data = make()
        started, read_s = time.process_time(), None
        try:
            comparison = read_comparison(data)
            read_s = round(time.process_time() - started, 2)
            draw_everything(comparison)
            said = "shown" + (" as edited" if "texts edited" in sameness_html(comparison, EAGLE3) else "")
        except RecordError as exc:
            said = f"refused: {str(exc)[:90]}"
        report[name] = {"mb": round(len(data) / 1e6, 1), "cpu_s": round(time.process_time() - started, 2),
                        "read_cpu_s": read_s, "answer": said}
    return report


# --- against a running app -------------------------------------------------------------------------------

BAD_RUN_VALUES = {  # the Run endpoint's inputs, by position, and what to send instead
    0: [None, 5, ["x"], "", "x" * 200_000],
    1: ["nope", [1], None, [BASELINE, BASELINE]],
    2: [float("nan"), "hot", -1, 1e9, None],
    5: [0, 10**9, "many", 2.5],
    6: ["-1", "1e99", "x", 2**80],
    7: ["maybe", None],
    13: [0, 33, "many", None, 2.5, [4]],  # the batch control (requests at once)
}
RUN_INPUTS = ["def f(x):\n", [BASELINE, EAGLE3], 0.0, 4, 7, 8, "0", "rejection", True, "throughput", 0.5, "auto",
              16, 1]  # the Run event's inputs in order (app/tabs/compare.py wire), the last two the tree and batch
TAMPERED_LINKS = ["temperature=nan", "max_new_tokens=-5", "methods=<script>alert(1)</script>", "seed=1e99",
                  "prompt=%00%ff", "lesson=99", "tab=<b>x", "draft_len=1&draft_len=2", "preset=elsewhere",
                  "block_len=16&methods=baseline,dflash", "temperature=1e-40", "lesson=%C2%B2", "lesson=" + "9" * 5000]
NOT_FILES = ["/nonexistent/saved.json", "/etc/hostname", {"path": "/etc/hostname"}, {"a": 1}, None, 5]
NOT_STEPS = [float("inf"), float("-inf"), "1e999", 10**400, {"x": 1}]
NOT_EXAMPLES = [999, -1, "x", None, 1e300, [1]]


def answered_in_one_line(result: dict) -> bool:
    """The app's own answer: a status line (first output) or a gr.Error message, one line either way."""
    if result.get("outputs"):
        return "\n" not in str(result["outputs"][0])
    error = result.get("error")
    return isinstance(error, str) and error.strip() != "" and "\n" not in error and error != "Error"


def endpoints(app: App) -> dict:
    run = app.fn_index(api_name="run")
    counts = {"calls": 0, "one_line": 0, "generic_error": 0}

    def count(result: dict) -> None:
        counts["calls"] += 1
        counts["one_line" if answered_in_one_line(result) else "generic_error"] += 1
        if not answered_in_one_line(result):
            print(f"  generic answer: {str(result.get('error') or result.get('outputs'))[:160]}")

    for position, values in BAD_RUN_VALUES.items():
        for value in values:
            data = list(RUN_INPUTS)
            data[position] = value
            count(app.call(run, data))
    sweep = app.fn_index(api_name="k_sweep")
    for value in (None, 5, ["x"], ""):
        count(app.call(sweep, [value]))
    for index in (app.fn_index(api_name="open_saved"), app.fn_index(first_input_elem="step-upload")):
        for value in NOT_FILES:
            count(app.call(index, [value, True] if index == app.fn_index(api_name="open_saved") else [value]))
    for elem in ("step-slider", "step-previous", "step-next", "step-play"):
        component = next(c["id"] for c in app.config["components"] if c.get("props", {}).get("elem_id") == elem)
        index = next(d["id"] for d in app.config["dependencies"] if any(t[0] == component for t in d["targets"]))
        for value in NOT_STEPS:
            count(app.call(index, [value]))
    examples = app.fn_index(first_input_elem="examples")
    for value in NOT_EXAMPLES:
        count(app.call(examples, [value]))
    load = app.fn_index(trigger="load")
    for query in TAMPERED_LINKS:
        result = app.call(load, [], query=query)
        counts["calls"] += 1
        counts["one_line" if result["ok"] else "generic_error"] += 1
    return counts


def long_addresses(app: App) -> dict:
    """Addresses past what Gradio can parse (65,536 characters): the app's own one-line answer (HTTP 414) while
    the HTTP server still reads the request; past that, the server's own refusal (HTTP 400)."""
    counts = {"addresses": 0, "apps_own_line": 0, "server_refused": 0, "other": 0}
    for length in (66_000, 100_000, 150_000, 300_000):
        status, _, content = app.request("GET", "/?prompt=" + "x" * length)
        text = content.decode("utf-8", "replace")
        counts["addresses"] += 1
        if status == 414 and text.startswith("SpecLab:") and text.count("\n") == 1:
            counts["apps_own_line"] += 1
        elif status == 400:
            counts["server_refused"] += 1
        else:
            counts["other"] += 1
            print(f"  {length:,} characters: HTTP {status} {text[:100]!r}")
    return counts


def upload_and_open(app: App, data: bytes) -> dict:
    """What "Open a saved comparison" does: upload the file, then the open event reads it."""
    with httpx.Client(timeout=600, verify=tls()) as client:
        paths = client.post(f"{app.base}/{API}/upload", files={"files": ("saved.json", data)}).json()
    file = {"path": paths[0], "orig_name": "saved.json", "meta": {"_type": "gradio.FileData"}}
    return app.call(app.fn_index(api_name="open_saved"), [file, True], session=uuid.uuid4().hex[:11])


def memory(app: App, server_pid: int, opens: int = 20) -> dict:
    data = large_file()
    idle = rss_mib(server_pid)
    peak, done = idle, threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mib(server_pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    from scripts.app_load import at_once

    results = at_once([lambda: upload_and_open(app, data) for _ in range(opens)])
    done.set()
    watcher.join()
    shown = sum("opened from a file" in str((r.get("outputs") or [""])[0]) for r in results)
    return {"opens": opens, "file_mb": round(len(data) / 1e6, 1), "shown": shown, "idle_mib": round(idle),
            "peak_mib": round(peak), "after_mib": round(rss_mib(server_pid)), "peak_over_idle": round(peak / idle, 2)}


def tracebacks() -> int:
    return LOG.read_text(errors="replace").count("Traceback (most recent call last)") if LOG.exists() else 0


# --- the new controls ---------------------------------------------------------------------------------------

def controls(app: App) -> dict:
    """Bad values to the slides' handlers, event indexes that do not exist, script-only events, streams for
    unknown sessions, conflicting page parameters; counted as `endpoints` counts."""
    from app.tabs.slides import slide_number

    counts = {"calls": 0, "one_line": 0, "generic_error": 0}

    def count(ok: bool, what: str) -> None:
        counts["calls"] += 1
        counts["one_line" if ok else "generic_error"] += 1
        if not ok:
            print(f"  generic answer: {what[:160]}")

    for elem in ("slide-prev", "slide-next", "slide-live"):
        for index in app.elem_events(elem):
            takes = bool(next(d for d in app.config["dependencies"] if d["id"] == index)["inputs"])
            for value in ODD_VALUES + ("3", 3.0, 10**400, "1e999", -0.0):
                if elem == "slide-live" and slide_number(value) is not None:
                    continue  # a real slide's live measurement: not a bad value, and seconds of engine time
                result = app.call(index, [value] if takes else [], timeout_s=120)
                quiet = result["ok"] and not result.get("outputs")  # an event with no outputs (a press noted)
                count(quiet or answered_in_one_line(result), str(result.get("error") or result.get("outputs")))
    deps = app.config["dependencies"]
    script_only = [d["id"] for d in deps if not d.get("backend_fn")]
    for index in (len(deps), len(deps) + 50, -1, 10**12, True, 2.5, "x", [0], *script_only[:10]):
        for path in ("/queue/join", "/run/predict"):
            status, _, content = app.request("POST", f"/{API}{path}", json.dumps(
                {"data": [], "fn_index": index, "session_hash": "reliability"}).encode())
            count(status in (400, 404) and _one_line_json(content),
                  f"{path} {index!r}: HTTP {status} {content[:100]!r}")
    for i in range(20):
        status, _, content = app.request("GET", f"/{API}/queue/data?session_hash=unknown-{i}")
        count(status == 404 and _one_line_json(content), f"stream: HTTP {status} {content[:100]!r}")
    for name in ("run", "nothing", "stop"):  # the REST API: a call's answer stream for an event that never was
        status, _, content = app.request("GET", f"/{API}/call/{name}/no-such-event")
        count(status == 404 and _one_line_json(content), f"call stream: HTTP {status} {content[:100]!r}")
    for name in ("nothing", "run/../stop"):
        status, _, content = app.request("POST", f"/{API}/call/{name}", b'{"data": []}')
        count(status in (400, 404) and _one_line_json(content), f"call {name}: HTTP {status} {content[:100]!r}")
    for query in ("present=1&present=0", "present=0&present=1", "present=1&lesson=3&lesson=99", "present=2",
                  "present=1&lesson=", "present=" + "1" * 3000):
        for index in app.load_events():
            result = app.call(index, [], query=query)
            count(answered_in_one_line(result) or result["ok"], f"{query[:40]}: {result.get('error')}")
    return counts


def _one_line_json(content: bytes) -> bool:
    try:
        text = json.loads(content).get("error") or json.loads(content).get("detail")
    except (ValueError, AttributeError):
        return False
    return isinstance(text, str) and text.startswith("SpecLab") and "\n" not in text


def trees() -> dict:
    """A file's tree 3,000 deep and one 40,000 wide drawn: seconds and bytes each."""
    from dataclasses import replace

    from app.comparison import read_comparison
    from app.draw.tree import tree_svg

    comparison = read_comparison(SAVED.read_text(encoding="utf-8"))
    step = next(s for lane in comparison.lanes.values() for s in lane.steps if s.drafted)
    token = replace(step.drafted[0], verdict="unverified")
    report = {}
    for name, parents in (("chain_3000", tuple(range(-1, 2999))), ("siblings_40000", (-1,) * 40_000)):
        started = time.process_time()
        svg = tree_svg(replace(step, drafted=(token,) * len(parents), parents=parents, num_accepted=0))
        report[name] = {"cpu_s": round(time.process_time() - started, 3), "kb": round(len(svg) / 1000, 1)}
    return report


# --- a fair queue ------------------------------------------------------------------------------------------

def _withdraw(app: App, sessions: list[str], address: str | None = None) -> None:
    """Stop each session's run: a waiting one is withdrawn at once, a running one ends within a batch of steps."""
    headers = {"x-forwarded-for": address} if address else {}
    for session in sessions:
        for name in ("on_requested", "stop"):
            app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
                api_name=name), "session_hash": session}).encode(), headers=headers)


def fairness(app: App, crowd_size: int = 35) -> dict:
    from scripts.app_load import at_once

    run = app.fn_index(api_name="run")
    report = {}
    # One address floods the queue with distinct runs; another address still gets a place.
    flooder, flood = "198.51.100.66", []
    statuses = []
    for i in range(80):
        session = f"flood-{i}"
        status, body = join(app, run, _run_inputs(f"def flood_{i}(x):\n"), session, flooder)
        statuses.append(status)
        if status == 200:
            flood.append(session)
    other_status, _ = join(app, run, _run_inputs("def other(x):\n"), "other-visitor", "203.0.113.77")
    report["flood"] = {"asked": len(statuses), "places_given": statuses.count(200),
                       "refused_in_one_line": statuses.count(429), "another_address_got_a_place": other_status == 200}
    started = time.monotonic()
    _withdraw(app, flood + ["other-visitor"])
    report["flood"]["withdrawn_s"] = round(time.monotonic() - started, 2)
    time.sleep(2)
    # The largest comparison the page allows, against the budget.
    status, body = join(app, run, _run_inputs("def big(x):\n", max_new_tokens=512, requests_at_once=32), "big",
                        "203.0.113.80")
    report["largest_run"] = {"status": status, "line": str(body.get("detail"))[:300]}
    if status == 200:
        _withdraw(app, ["big"])
    # A class of distinct runs: each one's seconds to its place and expected start.
    sessions = [f"class-{i}" for i in range(crowd_size)]

    def visitor(i: int):
        status, body = join(app, run, _run_inputs(f"def student_{i}(x):\n"), sessions[i], f"10.9.0.{i + 1}")
        if status != 200:
            return {"ok": False, "error": str(body)[:200], "seconds": None}
        words = None
        if _has(app, "where_it_stands"):  # sent with the press, as the page does: the words beside the queue's figures
            _, _, answer = app.request("POST", f"/{API}/run/predict", json.dumps({
                "data": _run_inputs(f"def student_{i}(x):\n"), "fn_index": app.fn_index(api_name="where_it_stands"),
                "session_hash": sessions[i]}).encode(), headers={"x-forwarded-for": f"10.9.0.{i + 1}"})
            words = (json.loads(answer or b"{}").get("data") or [None])[0]
        seen = messages(app, sessions[i], body["event_id"], until=("estimation", "process_starts"), timeout_s=60)
        at, last = seen[-1] if seen else (None, {})
        return {"ok": True, "seconds": at, "told": last.get("msg"), "rank": last.get("rank"),
                "eta_s": last.get("rank_eta"), "words": words if isinstance(words, str) else None}

    results = at_once([lambda i=i: visitor(i) for i in range(crowd_size)])
    told = sorted(r["seconds"] for r in results if r.get("seconds") is not None)
    report["class_of_distinct_runs"] = {
        "visitors": crowd_size, "joined": sum(r["ok"] for r in results),
        "told_place_or_started": len(told), "p95_s": round(told[int(0.95 * (len(told) - 1))], 2) if told else None,
        "max_s": round(max(told), 2) if told else None,
        "largest_eta_s": round(max((r.get("eta_s") or 0) for r in results), 1)}
    said = [r["words"] for r in results if "in line" in (r.get("words") or "")]
    report["class_of_distinct_runs"]["told_in_words"] = len(said)  # past the stated wait: the place, when to return
    report["class_of_distinct_runs"]["last_words"] = max(
        said, key=lambda w: int(re.search(r"number (\d+)", w).group(1)), default="")[:400]
    _withdraw(app, sessions)
    time.sleep(2)
    # Stop on a waiting run; a running visitor's Stop and last result after 70 fresh sessions.
    status, body = join(app, run, _run_inputs("def runner_a(x):\n", max_new_tokens=200), "visitor-a",
                        "203.0.113.90")
    time.sleep(0.5)
    app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
        api_name="on_requested"), "session_hash": "visitor-b"}).encode())
    status_b, body_b = join(app, run, _run_inputs("def waits_b(x):\n"), "visitor-b", "203.0.113.91")
    started = time.monotonic()
    app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
        api_name="stop"), "session_hash": "visitor-b"}).encode())
    seen = messages(app, "visitor-b", body_b.get("event_id", ""), timeout_s=60) if status_b == 200 else []
    report["stop_on_a_waiting_run"] = {"answered_s": round(time.monotonic() - started, 2),
                                       "withdrawn": bool(seen) and "withdrawn" in str(seen[-1][1])}
    for i in range(70):  # a class reloading pages: fresh sessions, each making state on the server
        app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
            api_name="stop"), "session_hash": f"fresh-{i}"}).encode())
    app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
        api_name="stop"), "session_hash": "visitor-a"}).encode())
    seen = messages(app, "visitor-a", body.get("event_id", ""), timeout_s=120) if status == 200 else []
    last = str(seen[-1][1]) if seen else ""
    download = app.call(app.fn_index(api_name="offer_download") if _has(app, "offer_download") else
                        app.followers(run)[-1], [], session="visitor-a")
    report["running_visitor_after_70_sessions"] = {
        "stopped": "stopped" in last, "download_offered": "visible': True" in str(download.get("outputs"))
        or '"visible": true' in json.dumps(download.get("outputs")).lower()}
    report["behind_the_largest_allowed_run"] = behind_the_largest(app)
    return report


def behind_the_largest(app: App) -> dict:
    """The largest comparison the budget lets a visitor run (the tokens its refusal line names at 1 and at 32
    requests at once), then another visitor's default run: the seconds that one waits to start."""
    import re

    run = app.fn_index(api_name="run")
    report = {}
    for requests in (1, 32):
        status, body = join(app, run, _run_inputs("def big(x):\n", max_new_tokens=512, requests_at_once=requests),
                            f"probe-{requests}", "203.0.113.100")
        found = re.search(r"up to (\d+) new tokens at (\d+) request", str(body.get("detail")))
        tokens = int(found.group(1)) if found else 512
        status, big = join(app, run, _run_inputs("def big(x):\n", max_new_tokens=tokens, requests_at_once=requests),
                           f"largest-{requests}", "203.0.113.101")
        time.sleep(0.3)
        status_d, default = join(app, run, _run_inputs("def ordinary(x):\n"), f"ordinary-{requests}", "203.0.113.102")
        waited = messages(app, f"ordinary-{requests}", default.get("event_id", ""), until=("process_starts",))
        took = messages(app, f"largest-{requests}", big.get("event_id", ""))
        report[f"{requests}_at_once"] = {"largest_tokens": tokens, "admitted": status == 200,
                                         "ordinary_waited_s": round(waited[-1][0], 1) if waited else None}
        del took
        messages(app, f"ordinary-{requests}", default.get("event_id", ""))
    return report


def _has(app: App, api_name: str) -> bool:
    return any(d.get("api_name") == api_name for d in app.config["dependencies"])


def _run_inputs(prompt: str, **changes) -> list:
    data = list(RUN_INPUTS)
    data[0] = prompt
    data[1] = [BASELINE, EAGLE3, DFLASH, DSPARK]
    positions = {"max_new_tokens": 5, "requests_at_once": 13}
    data[5] = 64
    for name, value in changes.items():
        data[positions[name]] = value
    return data


# --- the disk ------------------------------------------------------------------------------------------------

def folders_mb() -> float:
    import tempfile

    from app.hosting.disk import files_in

    root = Path(tempfile.gettempdir())
    return round(sum(size for _, size, _ in files_in([root / "gradio", root / "speclab-comparisons"])) / 1e6, 1)


def disk(app: App, uploads: int = 100, addresses: int = 8, size: int = 9_900_000) -> dict:
    from scripts.app_load import at_once

    before = folders_mb()
    data = b"{" + b" " * (size - 2) + b"}"

    def upload(i: int) -> int:
        with httpx.Client(timeout=600, verify=tls()) as client:
            answer = client.post(f"{app.base}/{API}/upload", files={"files": (f"u{i}.json", data)},
                                 headers={"x-forwarded-for": f"10.8.0.{i % addresses + 1}"})
        return answer.status_code

    statuses = [r if isinstance(r, int) else 0 for r in at_once([lambda i=i: upload(i) for i in range(uploads)])]
    after = folders_mb()
    return {"uploads": uploads, "addresses": addresses, "mb_each": size / 1e6, "kept": statuses.count(200),
            "refused": statuses.count(429), "other": len(statuses) - statuses.count(200) - statuses.count(429),
            "folders_mb_before": before, "folders_mb_after": after}


def upload_flood(app: App, seconds: float = 10.0, addresses: int = 16, size: int = 9_900_000) -> dict:
    """`addresses` addresses uploading files of `size` bytes as fast as they are let for `seconds`; then a new visitor
    tries every 5 s: the seconds after the flood's end until its upload is kept. A download offered before the flood
    (a recorded link's) is fetched again after it."""
    from urllib.parse import urlencode

    from scripts.app_load import PROMPT, at_once, open_link

    query = urlencode({"prompt": PROMPT, "methods": "baseline,eagle3", "max_new_tokens": 16})
    open_link(app, query)  # the lecturer, before class: the server records the run
    open_link(app, query, session="offered")  # a visitor of the recorded link, offered its download
    offered = _offered_download(app.call(app.fn_index(api_name="offer_download"), [], session="offered"))
    before = folders_mb()
    ends = time.monotonic() + seconds

    def flooder(i: int) -> list[int]:
        statuses = []
        with httpx.Client(timeout=600, verify=tls()) as client:
            while time.monotonic() < ends:
                data = f"{{{i} {len(statuses)}".encode() + b" " * (size - 16) + b"}"  # each file its own content
                answer = client.post(f"{app.base}/{API}/upload", files={"files": (f"f{i}.json", data)},
                                     headers={"x-forwarded-for": f"10.6.0.{i + 1}"})
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    time.sleep(0.5)
        return statuses

    statuses = [s for r in at_once([lambda i=i: flooder(i) for i in range(addresses)])
                for s in (r if isinstance(r, list) else [])]
    ended, during = time.monotonic(), folders_mb()
    waited = None
    with httpx.Client(timeout=600, verify=tls()) as client:
        while time.monotonic() - ended < 180:
            answer = client.post(f"{app.base}/{API}/upload", files={"files": ("new.json", b"{}")},
                                 headers={"x-forwarded-for": "192.0.2.200"})
            if answer.status_code == 200:
                waited = round(time.monotonic() - ended, 1)
                break
            time.sleep(5)
    fetched = app.request("GET", f"/{API}/file={offered}")[0] if offered else None
    return {"seconds": seconds, "addresses": addresses, "mb_each": size / 1e6, "kept": statuses.count(200),
            "refused": statuses.count(429), "other": len(statuses) - statuses.count(200) - statuses.count(429),
            "folders_mb_before": before, "folders_mb_at_its_end": during, "new_visitor_uploaded_after_s": waited,
            "download_offered_before": bool(offered), "download_after_status": fetched}


def _offered_download(result: dict) -> str | None:
    found = re.search(r"[^\"']*speclab-comparison-[0-9a-f]+\.json", json.dumps(result.get("outputs")))
    return found.group(0) if found else None


def toggle_flood(app: App, server_pid: int, toggles: int = 150, threads: int = 5) -> dict:
    """A visitor opens a large saved comparison and toggles projector mode `toggles` times from `threads` at once,
    one address; meanwhile another visitor runs the default comparison, timed alone before. The web process's
    memory at rest, at its peak and after; the other run's seconds and whether its chips said "busy server"."""
    from scripts.app_load import lane_figures

    run, toggle = app.fn_index(api_name="run"), app.fn_index(first_input_elem="projector")
    session, address = "toggler", {"x-forwarded-for": "10.7.0.1"}
    with httpx.Client(timeout=600, verify=tls()) as client:
        paths = client.post(f"{app.base}/{API}/upload", files={"files": ("saved.json", large_file())},
                            headers=address).json()
    file = {"path": paths[0], "orig_name": "saved.json", "meta": {"_type": "gradio.FileData"}}
    opened = app.call(app.fn_index(api_name="open_saved"), [file, True], session=session)
    time.sleep(2)
    rest = rss_mib(server_pid)
    alone = app.call(run, _run_inputs("def alone(x):\n"), session="other-alone")
    peak, done, sent, answered = rest, threading.Event(), [0], []

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mib(server_pid))
            time.sleep(0.2)

    def toggler(i: int):
        while sent[0] < toggles:
            sent[0] += 1
            status = app.request("POST", "/gradio_api/run/predict", json.dumps({"data": [sent[0] % 2 == 0, 0, None],
                                 "fn_index": toggle, "session_hash": session}).encode(), headers=address)[0]
            answered.append(status)

    watcher = threading.Thread(target=watch)
    watcher.start()
    flood = [threading.Thread(target=toggler, args=(i,), daemon=True) for i in range(threads)]
    for thread in flood:
        thread.start()
    beside = app.call(run, _run_inputs("def beside(x):\n"), session="other-beside")
    done.set()
    for thread in flood:
        thread.join(timeout=120)
    watcher.join()
    time.sleep(5)
    lanes = lane_figures(beside.get("outputs"))
    return {"file_opened": "opened from a file" in str((opened.get("outputs") or [""])[0]), "toggles": sent[0],
            "drawn": answered.count(200), "refused_in_one_line": answered.count(429),
            "rest_mib": round(rest), "peak_mib": round(peak), "after_mib": round(rss_mib(server_pid)),
            "other_run_alone_s": round(alone["seconds"], 1), "other_run_beside_s": round(beside["seconds"], 1),
            "ratio": round(beside["seconds"] / alone["seconds"], 2),
            "marked_busy_server": sum(1 for f in lanes.values() if f.get("busy_server_engine_pct") is not None),
            "lanes": len(lanes)}


PRESENTER_KEY = "the-catalogue-presenter-key"  # the catalogue's server is started with it


def class_code(app: App, students: int = 35, size: int = 40) -> dict:
    """`students` browsers behind one school address each asking for a run of their own: without a class code,
    then in a class of `size` the presenter opened (each browser entering the code), then after the class ended.
    Counts the places given and refused, and each member's place and expected start as the queue told it."""
    from scripts.app_load import at_once

    run, school = app.fn_index(api_name="run"), "198.51.100.40"

    def post(path: str, form: dict, cookie: str = "") -> httpx.Response:
        headers = {"x-forwarded-for": school, **({"cookie": cookie} if cookie else {})}
        return httpx.post(f"{app.base}{path}", verify=tls(), data=form, headers=headers, follow_redirects=False,
                          timeout=60)

    def crowd(label: str, cookies: list[str]) -> dict:
        def student(i: int) -> dict:
            session = f"{label}-{i}"
            status, body = join(app, run, _run_inputs(f"def {label.replace('-', '_')}_{i}(x):\n"), session, school,
                                cookies[i] or None)
            if status != 200:
                return {"ok": False, "line": str(body.get("detail"))[:160]}
            seen = messages(app, session, body["event_id"], until=("estimation", "process_starts"), timeout_s=60)
            last = seen[-1][1] if seen else {}
            return {"ok": True, "rank": last.get("rank"), "eta_s": last.get("rank_eta"),
                    "told_s": seen[-1][0] if seen else None}

        results = at_once([lambda i=i: student(i) for i in range(students)])
        placed = [r for r in results if r.get("ok")]
        for i in range(students):  # withdraw them all, each as its own browser
            app.request("POST", f"/{API}/run/predict", json.dumps({"data": [], "fn_index": app.fn_index(
                api_name="stop"), "session_hash": f"{label}-{i}"}).encode(),
                headers={"x-forwarded-for": school, **({"cookie": cookies[i]} if cookies[i] else {})})
        time.sleep(3)
        told = [r for r in placed if r.get("rank") is not None or r.get("told_s") is not None]
        return {"places_given": len(placed), "refused_in_one_line": sum(1 for r in results if "line" in r),
                "told_place_and_wait": len(told),
                "largest_eta_s": round(max((r.get("eta_s") or 0) for r in placed), 1) if placed else None,
                "refusal": next((r["line"] for r in results if "line" in r), "")}

    report = {"without_a_code": crowd("no-code", [""] * students)}
    presenter = post("/presenter", {"key": PRESENTER_KEY}).cookies.get("speclab_presenter")
    opened = post("/class/open", {"code": "bio-7", "size": size, "hours": 1}, f"speclab_presenter={presenter}")
    members = []
    for _ in range(students):
        answer = post("/class", {"code": "bio-7"})
        members.append("; ".join(f"{k}={v}" for k, v in answer.cookies.items()) if answer.status_code == 303 else "")
    report["class_open"] = opened.status_code == 303
    report["joined_the_class"] = sum(bool(m) for m in members)
    report["with_a_class_code"] = crowd("class", members)
    post("/class/end", {}, f"speclab_presenter={presenter}")
    report["after_the_class_ended"] = crowd("ended", members)
    return report


def lessons(app: App, server_pid: int, clients: int = 35) -> dict:
    """A class opening each lesson point's link together, then the first and a Why point's slide: p95 seconds each
    (scripts/app_load.py lesson); a pause between, so the class's one address has its request allowance back."""
    from scripts.app_load import lesson_link

    from app.lesson import POINTS

    report = {}
    for number, present in [*((p.number, False) for p in POINTS), (1, True), (5, True)]:
        row = lesson_link(app, server_pid, clients, number, present)["lesson_link"]
        report[f"{number}{' slide' if present else ''}"] = {k: row[k] for k in ("served", "p95_s", "server_cpu_s")}
        time.sleep(2 * clients * 5 / 20)  # each visitor's page and load events, at 20 requests a second
    return report


FAMILIES = ("files", "endpoints", "addresses", "memory", "crowd", "controls", "fairness", "disk", "lessons",
            "upload_flood", "toggle_flood", "class_code", "crafted")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutations", type=int, default=2000)
    parser.add_argument("--crowd", type=int, nargs="*", default=[40, 100])
    parser.add_argument("--opens", type=int, default=20)
    parser.add_argument("--flood-s", type=float, default=10.0, help="upload_flood: how long 16 addresses upload")
    parser.add_argument("--toggles", type=int, default=150, help="toggle_flood: toggles from one address")
    parser.add_argument("--only", nargs="*", choices=FAMILIES, default=list(FAMILIES))
    args = parser.parse_args()
    report = {}
    if "files" in args.only:
        report["files"] = files(args.mutations)
        print(f"files: {json.dumps(report['files'])}", flush=True)
    if "controls" in args.only:
        report["trees"] = trees()
        print(f"trees from files: {json.dumps(report['trees'])}", flush=True)
    if "crafted" in args.only:
        draw_everything(read_comparison_of(SAVED))  # the drawing modules imported and warm: each kind times itself
        report["crafted"] = crafted_files()
        print(f"crafted files: {json.dumps(report['crafted'])}", flush=True)
    if not set(args.only) - {"files", "crafted"}:
        return 0 if not report.get("files", {}).get("other_failures", 0) else 1
    LOG.parent.mkdir(exist_ok=True)
    port = free_port()
    server = start_app(port, LOG, env={"SPECLAB_PRESENTER_KEY": PRESENTER_KEY})
    try:
        app = App(f"http://127.0.0.1:{port}")
        steps = (("endpoints", "endpoints and links", lambda: endpoints(app)),
                 ("controls", "new controls", lambda: controls(app)),
                 ("addresses", "long addresses", lambda: long_addresses(app)),
                 ("memory", "memory", lambda: memory(app, server.pid, args.opens)),
                 ("fairness", "fairness", lambda: fairness(app)),
                 ("disk", "disk", lambda: disk(app)),
                 ("upload_flood", "an upload flood", lambda: upload_flood(app, args.flood_s)),
                 ("toggle_flood", "a toggle flood", lambda: toggle_flood(app, server.pid, args.toggles)),
                 ("class_code", "a class behind one address", lambda: class_code(app)),
                 ("lessons", "lesson links", lambda: lessons(app, server.pid)))
        for name, words, step in steps:
            if name in args.only:
                report[name] = step()
                print(f"{words}: {json.dumps(report[name])}", flush=True)
        if "crowd" in args.only:
            from scripts.app_load import crowd

            report["crowd"] = [crowd(app, n, 32, link_only=True) for n in args.crowd]
        report["server_tracebacks"] = tracebacks()
        print(f"tracebacks in the server's log: {report['server_tracebacks']}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    failures = report.get("files", {}).get("other_failures", 0) + sum(
        report.get(name, {}).get("generic_error", 0) for name in ("endpoints", "controls"))
    return 0 if not failures and not report["server_tracebacks"] else 1


if __name__ == "__main__":
    sys.exit(main())
