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
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid

import httpx


from scripts.app_client import API, ROOT, App, rss_mib, start_app
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


# --- against a running app -------------------------------------------------------------------------------

BAD_RUN_VALUES = {  # the Run endpoint's inputs, by position, and what to send instead
    0: [None, 5, ["x"], "", "x" * 200_000],
    1: ["nope", [1], None, ["baseline", "baseline"]],
    2: [float("nan"), "hot", -1, 1e9, None],
    5: [0, 10**9, "many", 2.5],
    6: ["-1", "1e99", "x", 2**80],
    7: ["maybe", None],
}
RUN_INPUTS = ["def f(x):\n", ["baseline", "eagle3"], 0.0, 4, 7, 8, "0", "rejection", True, "throughput", 0.5, "auto"]
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
    with httpx.Client(timeout=600) as client:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutations", type=int, default=2000)
    parser.add_argument("--crowd", type=int, nargs="*", default=[40, 100])
    parser.add_argument("--opens", type=int, default=20)
    args = parser.parse_args()
    report = {"files": files(args.mutations)}
    print(f"files: {json.dumps(report['files'])}", flush=True)
    LOG.parent.mkdir(exist_ok=True)
    port = free_port()
    server = start_app(port, LOG)
    try:
        app = App(f"http://127.0.0.1:{port}")
        report["endpoints"] = endpoints(app)
        print(f"endpoints and links: {json.dumps(report['endpoints'])}", flush=True)
        report["long_addresses"] = long_addresses(app)
        print(f"long addresses: {json.dumps(report['long_addresses'])}", flush=True)
        report["memory"] = memory(app, server.pid, args.opens)
        print(f"memory: {json.dumps(report['memory'])}", flush=True)
        from scripts.app_load import crowd

        report["crowd"] = [crowd(app, n, 32, link_only=True) for n in args.crowd]
        report["server_tracebacks"] = tracebacks()
        print(f"tracebacks in the server's log: {report['server_tracebacks']}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0 if not report["files"]["other_failures"] and not report["server_tracebacks"] else 1


if __name__ == "__main__":
    sys.exit(main())
