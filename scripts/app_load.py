"""A classroom against the app: many visitors at once, and hundreds of runs in a row.

    python scripts/app_load.py crowd [--clients 20]   # N visitors of one share link, then N on distinct settings
    python scripts/app_load.py soak [--runs 300]      # runs in a row; the server's memory as they go
    python scripts/app_load.py pages [--loads 200]    # the server's CPU time per page load and per configuration
    python scripts/app_load.py lesson [--clients 35 --point 4] [--present]  # N visitors open `?lesson=N` (its slide)
    python scripts/app_load.py live [--clients 35 --point 4]    # N visitors press one point's Run it live together
    python scripts/app_load.py disk [--sessions 150]  # N sessions download a comparison; a 200 MiB upload
    python scripts/app_load.py busy [--rounds 3 --togglers 10]  # a comparison alone, then beside N toggling visitors

Starts the app (`python -m app`, the embedded models) on a free port and talks to it as browser pages do
(scripts/app_client.py). crowd: one visitor opens a share link (the engine runs it and the server records it),
then N clients open it at once (each should get the recorded run at once: page loads run outside the queue),
then, unless --link-only, N clients run distinct configurations at once (each finishes or is told the app is
busy); prints p50/p95 of the seconds each waited. soak: runs through the
Run endpoint with a new browser session every 10 runs (--runs-per-session), reading the server's resident memory every 10 runs;
prints it after warm-up and at the end. pages: the server process's CPU time (/proc/PID/stat, its own threads, not
the engine's process) over N loads of the page, as a browser asks for it (compressed), and N of its
configuration, one after another. lesson: each visitor loads the page on `?lesson=N` and runs its load events;
seconds from the page's request to its last load event's answer. live: each visitor presses point N's "Run it live"
(its events in order, as the page sends them); seconds from the press to the measurement. disk: N sessions each
open a recorded link and fetch its download, then one 200 MiB upload; the files and bytes in the server's
folders (Gradio's cache, the download files, the recordings) before and after. All report tracebacks found in the
server's log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

from engine.contract.methods import DEFAULT_LANES  # noqa: E402  torch-free
from scripts.app_client import ROOT, App, _body, rss_mib, start_app
from scripts.support import free_port

PROMPT = "def moving_average(values, window):\n"
METHODS = list(DEFAULT_LANES)  # the app's default lanes
LOG = ROOT / "runs" / "app_load_server.log"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def at_once(calls) -> list[dict]:
    """Start every call together; their results in order."""
    results: list[dict | None] = [None] * len(calls)
    gate = threading.Barrier(len(calls))

    def worker(i, call):
        gate.wait()
        try:
            results[i] = call()
        except Exception as exc:  # a failed client is a result too
            results[i] = {"ok": False, "queue_full": False, "error": repr(exc), "outputs": None, "seconds": 0.0}

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def status_of(result: dict) -> str:
    return str(result["outputs"][0]) if result.get("outputs") else str(result.get("error"))


def summary(name: str, results: list[dict]) -> dict:
    seconds = [r["seconds"] for r in results]
    ok = [r for r in results if r["ok"] and ("done" in status_of(r) or "recorded" in status_of(r))]
    busy = [r for r in results if r.get("queue_full")]
    replayed = [r for r in results if "ran before on this server" in status_of(r)]
    row = {"clients": len(results), "finished": len(ok), "told_busy": len(busy),
           "failed": len(results) - len(ok) - len(busy), "replayed_recorded_run": len(replayed),
           "computed": len(ok) - len(replayed), "p50_s": round(percentile(seconds, 0.5), 2),
           "p95_s": round(percentile(seconds, 0.95), 2), "max_s": round(max(seconds), 2),
           "mb_streamed_total": round(sum(r.get("bytes", 0) for r in results) / 1e6, 2)}
    print(f"{name}: {json.dumps(row)}", flush=True)
    for r in results:
        if r not in ok and r not in busy:
            print(f"  failed: {status_of(r)[:200]}")
    return row


def open_link(app: App, query: str, session: str | None = None) -> dict:
    """What a page opened on a share link does: its load event restores the controls (and shows the run
    when the server has recorded it); otherwise the link's own event runs it through the engine's queue."""
    session = session or uuid.uuid4().hex[:11]
    load = app.fn_index(trigger="load")
    loaded = app.call(load, [], session=session, query=query)
    if not loaded["ok"]:
        return loaded
    at = app.output_elem(load).index("link-query")  # after the controls and the link's notes
    link_query = loaded["outputs"][at]
    if not (isinstance(link_query, str) and link_query):  # shown from the record by the load event
        return {**loaded, "outputs": loaded["outputs"][at + 1:]}
    ran = app.call(app.fn_index(first_input_elem="link-query"), [link_query, True], session=session, query=query)
    ran["seconds"] += loaded["seconds"]
    ran["bytes"] += loaded["bytes"]
    return ran


def crowd(app: App, clients: int, max_new_tokens: int, link_only: bool = False) -> dict:
    run = app.fn_index(api_name="run")
    query = urlencode({"prompt": PROMPT, "methods": ",".join(METHODS), "max_new_tokens": max_new_tokens})
    first = open_link(app, query)  # the lecturer, before class: the server records the run
    print(f"first visit: {status_of(first)[:120]} ({first['seconds']:.1f} s)", flush=True)
    same = at_once([lambda: open_link(app, query) for _ in range(clients)])
    if link_only:
        return {"one_link": summary(f"{clients} visitors of one recorded link", same)}
    distinct = at_once([
        (lambda i=i: app.call(run, [f"{PROMPT}    # visitor {i}\n", METHODS, 0.0, 4, 7, max_new_tokens, "0",
                                    "rejection", True, "throughput", 0.5, "auto", 16, 1]))
        for i in range(clients)])
    return {"one_link": summary(f"{clients} visitors of one link", same),
            "distinct": summary(f"{clients} visitors, distinct settings", distinct)}


BROWSER = {"accept-encoding": "gzip, deflate, br, zstd"}  # what a browser sends with every request


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system, its own threads; Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pages(app: App, server_pid: int, loads: int, point: int) -> dict:
    """The server's CPU milliseconds per page load and per configuration, after one warm-up of each."""
    report = {}
    for name, path in (("page", f"/?lesson={point}"), ("config", "/config")):
        app.request("GET", path, headers=BROWSER)
        before, start = cpu_s(server_pid), time.monotonic()
        for _ in range(loads):
            status, _, body = app.request("GET", path, headers=BROWSER)
            assert status == 200, status
        report[name] = {"loads": loads, "server_cpu_ms_per_load": round(1000 * (cpu_s(server_pid) - before) / loads, 2),
                        "wall_ms_per_load": round(1000 * (time.monotonic() - start) / loads, 2),
                        "bytes_sent": len(body), "bytes_uncompressed": len(app.request("GET", path)[2])}
        print(f"{name}: {json.dumps(report[name])}", flush=True)
    return report


def served(name: str, results: list[dict]) -> dict:
    """How many were served, told busy or failed, and the seconds they waited."""
    seconds = [r["seconds"] for r in results]
    ok = [r for r in results if r["ok"]]
    busy = [r for r in results if r.get("queue_full")]
    row = {"clients": len(results), "served": len(ok), "told_busy": len(busy),
           "failed": len(results) - len(ok) - len(busy), "p50_s": round(percentile(seconds, 0.5), 2),
           "p95_s": round(percentile(seconds, 0.95), 2), "max_s": round(max(seconds), 2)}
    print(f"{name}: {json.dumps(row)}", flush=True)
    for r in results:
        if not r["ok"]:
            print(f"  {'busy' if r.get('queue_full') else 'failed'}: {str(r.get('error'))[:200]}")
    return row


def chain(app: App, events: list[int], session: str, query: str = "", start: float | None = None) -> dict:
    """Run `events` in order for one session, as the page does (each after the last answered); one result, timed
    from `start`."""
    start = time.monotonic() if start is None else start
    result = {"ok": True, "queue_full": False, "error": None}
    for fn_index in events:
        result = app.call(fn_index, [], session=session, query=query)
        if not result["ok"]:
            break
    return {**result, "seconds": time.monotonic() - start}


def lesson_link(app: App, server_pid: int, clients: int, point: int, present: bool = False) -> dict:
    query = f"lesson={point}" + ("&present=1" if present else "")
    loads = app.load_events()

    def visit():
        start = time.monotonic()
        status, _, _ = app.request("GET", f"/?{query}", headers=BROWSER)
        if status != 200:
            return {"ok": False, "queue_full": False, "error": f"page: HTTP {status}",
                    "seconds": time.monotonic() - start}
        return chain(app, loads, uuid.uuid4().hex[:11], query, start)

    before = cpu_s(server_pid)
    row = served(f"{clients} visitors opening ?{query}", at_once([visit] * clients))
    row["server_cpu_s"] = round(cpu_s(server_pid) - before, 2)
    print(f"the server's CPU time for them: {row['server_cpu_s']} s", flush=True)
    return {"lesson_link": row}


def live(app: App, clients: int, point: int) -> dict:
    events = app.elem_events(f"lesson-live-{point}")
    alone = chain(app, events, uuid.uuid4().hex[:11])  # one visitor first: what the measurement takes alone
    print(f"one visitor alone: {json.dumps({k: alone[k] for k in ('ok', 'seconds')})}", flush=True)
    crowd = at_once([lambda: chain(app, events, uuid.uuid4().hex[:11])] * clients)
    return {"alone_s": round(alone["seconds"], 2), "live": served(f"{clients} visitors pressing point {point}'s "
                                                                   "Run it live", crowd)}


RUN_INPUTS = [PROMPT, METHODS, 0.0, 4, 7, 64, "0", "rejection", True, "throughput", 0.5, "auto", 16, 1]


def lane_figures(outputs: list) -> dict:
    """Each finished lane's speedup on the comparison's clock (with its bracket), its wall speedup, and its CPU and
    busy-server chips, read from its chips as the page shows them."""
    import re

    figures = {}
    for box in outputs or []:
        method = re.search(r'data-method="(\w+)"', str(box))
        if not method or "speedup <b>" not in str(box):
            continue
        speedup = re.search(r"speedup <b>([\d.]+)×(?: \(([\d.]+)–([\d.]+)\))?", box)
        wall = re.search(r"wall <b>([\d.]+)×", box)
        share = re.search(r"CPU <b>(\d+)%", box)
        engine = re.search(r"engine <b>(\d+)%</b> <span class=\"tag\">busy server", box)
        figures[method.group(1)] = {"speedup": float(speedup.group(1)) if speedup else None,
                                    "wall": float(wall.group(1)) if wall else None,
                                    "bracket": [float(speedup.group(2)), float(speedup.group(3))]
                                    if speedup and speedup.group(2) else None,
                                    "busy_cpu_pct": int(share.group(1)) if share else None,
                                    "busy_server_engine_pct": int(engine.group(1)) if engine else None}
    return figures


def toggled(app: App, clients: int, until: threading.Event) -> list[int]:
    """`clients` visitors, each on `?lesson=1` (their charts are a comparison's), toggling projector mode in a loop
    until `until`; how many toggles each made."""
    toggle, loads = app.fn_index(first_input_elem="projector"), app.load_events()
    counts = [0] * clients

    def visitor(i: int):
        session, address = f"toggler-{i}", {"x-forwarded-for": f"10.8.0.{i + 1}"}  # each a visitor of its own

        def send(fn: int, data: list) -> None:
            app.request("POST", "/gradio_api/run/predict?lesson=1", _body(data, fn, session).encode(), headers=address)

        try:
            for fn in loads:
                send(fn, [])
            while not until.is_set():
                send(toggle, [counts[i] % 2 == 0, 0, None])
                counts[i] += 1
        except OSError:  # the server stopped at the end of the measurement
            return

    threads = [threading.Thread(target=visitor, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    return counts


def busy(app: App, rounds: int, togglers: int) -> dict:
    """The same comparison `rounds` times alone, then `rounds` times while `togglers` visitors toggle projector mode
    in a loop: each lane's speedups (the comparison's clock, and wall) and whether its chips said the machine was
    busy."""
    run = app.fn_index(api_name="run")

    def measure(label: str) -> list[dict]:
        rows = []
        for i in range(rounds):
            time.sleep(2.5)  # past the window in which an identical run shares the last one's lanes
            result = app.call(run, RUN_INPUTS, session=f"{label}-{i}")
            rows.append({"seconds": round(result["seconds"], 1), "lanes": lane_figures(result["outputs"])})
            if not rows[-1]["lanes"]:
                rows[-1]["answer"] = status_of(result)[:300]
            print(f"{label} {i}: {json.dumps(rows[-1])}", flush=True)
        return rows

    alone = measure("alone")
    until = threading.Event()
    counts = toggled(app, togglers, until)
    time.sleep(2)
    try:
        crowded = measure("beside-togglers")
    finally:
        until.set()
    report = {"rounds": rounds, "togglers": togglers, "toggles": sum(counts), "alone": alone, "crowded": crowded}
    for method in alone[0]["lanes"]:
        for clock in ("speedup", "wall"):
            a = [r["lanes"][method][clock] for r in alone if r["lanes"].get(method, {}).get(clock)]
            c = [r["lanes"][method][clock] for r in crowded if r["lanes"].get(method, {}).get(clock)]
            if a and c:
                mid_a, mid_c = sorted(a)[len(a) // 2], sorted(c)[len(c) // 2]
                print(f"{method} {clock}: alone {a} beside togglers {c}: median {mid_c / mid_a - 1:+.1%}", flush=True)
    return report


def folder_usage(folder: Path) -> dict:
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    return {"files": len(files), "mib": round(sum(p.stat().st_size for p in files) / 2**20, 2)}


def disk(app: App, sessions: int, folders: dict[str, Path], upload_mib: int = 200) -> dict:
    query = urlencode({"prompt": PROMPT, "methods": ",".join(METHODS), "max_new_tokens": 32})
    first = open_link(app, query)  # the lecturer: the server records the run
    print(f"first visit: {status_of(first)[:100]}", flush=True)
    before = {name: folder_usage(folder) for name, folder in folders.items()}
    download = [fn for fn in app.load_events() if app.output_elem(fn) == ["download"]]  # after the page's restore

    def session():
        name = uuid.uuid4().hex[:11]
        opened = open_link(app, query, session=name)
        offered = chain(app, download, name, query)
        file = ((offered.get("outputs") or [{}])[0] or {}).get("value") or {}
        path = file.get("url") or ""
        status = app.request("GET", path[path.index("/gradio_api"):])[0] if "/gradio_api" in path else None
        return {"ok": opened["ok"] and status == 200, "seconds": offered["seconds"], "error": status}

    results = [session() for _ in range(sessions)]
    middle = {name: folder_usage(folder) for name, folder in folders.items()}
    boundary = uuid.uuid4().hex
    upload = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.json\"\r\n"
              "Content-Type: application/json\r\n\r\n").encode() + b"x" * (upload_mib * 2**20) + \
        f"\r\n--{boundary}--\r\n".encode()
    status, _, text = app.request("POST", "/gradio_api/upload", upload,
                                  headers={"content-type": f"multipart/form-data; boundary={boundary}"})
    after = {name: folder_usage(folder) for name, folder in folders.items()}
    report = {"sessions": sessions, "downloaded": sum(r["ok"] for r in results), "before": before,
              "after_downloads": middle, "upload_status": status, "upload_answer": text[:200].decode(errors="replace"),
              "after_upload": after}
    print(json.dumps(report, indent=1), flush=True)
    return report


def soak(app: App, server_pid: int, runs: int, max_new_tokens: int, runs_per_session: int) -> dict:
    run = app.fn_index(api_name="run")
    samples, session = [], None
    start = time.monotonic()
    for i in range(runs):
        if i % runs_per_session == 0:
            session = f"soak{i:05d}"
        if i % 10 == 0:
            samples.append((i, round(rss_mib(server_pid), 1)))
            print(f"run {i}: server {samples[-1][1]} MiB, {time.monotonic() - start:.0f} s", flush=True)
        result = app.call(run, [f"{PROMPT}    # run {i}\n", METHODS, 0.0, 4, 7, max_new_tokens, str(i),
                                "rejection", True, "throughput", 0.5, "auto", 16, 1], session=session)
        if not result["ok"] or "done" not in status_of(result):
            print(f"  run {i} failed: {status_of(result)[:200]}")
    samples.append((runs, round(rss_mib(server_pid), 1)))
    warm = next(mib for i, mib in samples if i >= min(50, runs))
    final = samples[-1][1]
    report = {"runs": runs, "max_new_tokens": max_new_tokens, "runs_per_session": runs_per_session, "rss_mib": samples, "after_warm_up_mib": warm,
              "final_mib": final, "growth_after_warm_up": round(final / warm - 1, 4),
              "minutes": round((time.monotonic() - start) / 60, 1)}
    print(json.dumps({k: v for k, v in report.items() if k != "rss_mib"}))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["crowd", "soak", "pages", "lesson", "live", "disk", "busy"])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--loads", type=int, default=200, help="pages: loads of the page, then of its configuration")
    parser.add_argument("--rounds", type=int, default=3, help="busy: comparisons alone, then beside the togglers")
    parser.add_argument("--togglers", type=int, default=10, help="busy: visitors toggling projector mode in a loop")
    parser.add_argument("--point", type=int, default=4, help="lesson, live: the lesson point")
    parser.add_argument("--sessions", type=int, default=150, help="disk: downloading sessions")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--runs-per-session", type=int, default=10,
                        help="soak: a new browser session after this many runs (1: every run a new visitor)")
    parser.add_argument("--present", action="store_true", help="lesson: the point's slide (`&present=1`)")
    parser.add_argument("--link-only", action="store_true", help="crowd: only the visitors of one recorded link")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--timing-runs", type=int, default=None,
                        help="the server's --timing-runs (1: each comparison runs once, a shorter soak)")
    args = parser.parse_args()

    LOG.parent.mkdir(exist_ok=True)
    port = free_port()
    scratch = Path(tempfile.mkdtemp(prefix="speclab-load-"))
    (scratch / "tmp").mkdir()  # the server's own temporary folder, so the folders measured hold its files only
    folders = {"gradio_cache": scratch / "gradio", "recordings": scratch / "recorded",
               "downloads": scratch / "tmp" / "speclab-comparisons"}
    server = start_app(port, LOG, ("--recordings", str(folders["recordings"]),
                                   *(() if args.timing_runs is None else ("--timing-runs", str(args.timing_runs)))),
                       env={"GRADIO_TEMP_DIR": str(folders["gradio_cache"]), "TMPDIR": str(scratch / "tmp")})
    try:
        app = App(f"http://127.0.0.1:{port}/")
        if args.mode == "crowd":
            report = crowd(app, args.clients, args.max_new_tokens, args.link_only)
        elif args.mode == "pages":
            report = pages(app, server.pid, args.loads, args.point)
        elif args.mode == "lesson":
            report = lesson_link(app, server.pid, args.clients, args.point, args.present)
        elif args.mode == "live":
            report = live(app, args.clients, args.point)
        elif args.mode == "busy":
            report = busy(app, args.rounds, args.togglers)
        elif args.mode == "disk":
            report = disk(app, args.sessions, folders)
        else:
            report = soak(app, server.pid, args.runs, args.max_new_tokens, args.runs_per_session)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)
    tracebacks = LOG.read_text(errors="replace").count("Traceback")
    report["server_log_tracebacks"] = tracebacks
    print(f"tracebacks in the server's log ({LOG}): {tracebacks}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
