"""A classroom against the app: many visitors at once, and hundreds of runs in a row.

    python scripts/app_load.py crowd [--clients 20]   # N visitors of one share link, then N on distinct settings
    python scripts/app_load.py soak [--runs 300]      # runs in a row; the server's memory as they go

Starts the app (`python -m app`, the embedded models) on a free port and talks to it as browser pages do
(scripts/app_client.py). crowd: one visitor opens a share link (the engine runs it and the server records it),
then N clients open it at once (each should get the recorded run at once: page loads run outside the queue),
then, unless --link-only, N clients run distinct configurations at once (each finishes or is told the app is
busy); prints p50/p95 of the seconds each waited. soak: runs through the
Run endpoint with a new browser session every 10 runs (--runs-per-session), reading the server's resident memory every 10 runs;
prints it after warm-up and at the end. Both report tracebacks found in the server's log.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.contract.methods import DEFAULT_LANES  # noqa: E402  torch-free
from app_client import ROOT, App, free_port, rss_mib, start_app  # noqa: E402

PROMPT = "def moving_average(values, window):\n"
METHODS = list(DEFAULT_LANES)  # the app's default lanes
LOG = ROOT / "runs" / "app_load_server.log"
LINK_QUERY_OUTPUT = 12  # the load event's outputs: the 11 controls, the link notes, the link's query, the run's


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


def open_link(app: App, query: str) -> dict:
    """What a page opened on a share link does: its load event restores the controls (and shows the run
    when the server has recorded it); otherwise the link's own event runs it through the engine's queue."""
    session = uuid.uuid4().hex[:11]
    loaded = app.call(app.fn_index(trigger="load"), [], session=session, query=query)
    if not loaded["ok"]:
        return loaded
    link_query = loaded["outputs"][LINK_QUERY_OUTPUT]
    if not (isinstance(link_query, str) and link_query):  # shown from the record by the load event
        return {**loaded, "outputs": loaded["outputs"][LINK_QUERY_OUTPUT + 1:]}
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
                                    "rejection", True, "throughput", 0.5, "auto"]))
        for i in range(clients)])
    return {"one_link": summary(f"{clients} visitors of one link", same),
            "distinct": summary(f"{clients} visitors, distinct settings", distinct)}


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
                                "rejection", True, "throughput", 0.5, "auto"], session=session)
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
    parser.add_argument("mode", choices=["crowd", "soak"])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--runs-per-session", type=int, default=10,
                        help="soak: a new browser session after this many runs (1: every run a new visitor)")
    parser.add_argument("--link-only", action="store_true", help="crowd: only the visitors of one recorded link")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--timing-runs", type=int, default=None,
                        help="the server's --timing-runs (1: each comparison runs once, a shorter soak)")
    args = parser.parse_args()

    LOG.parent.mkdir(exist_ok=True)
    port = free_port()
    server = start_app(port, LOG, () if args.timing_runs is None else ("--timing-runs", str(args.timing_runs)))
    try:
        app = App(f"http://127.0.0.1:{port}/")
        if args.mode == "crowd":
            report = crowd(app, args.clients, args.max_new_tokens, args.link_only)
        else:
            report = soak(app, server.pid, args.runs, args.max_new_tokens, args.runs_per_session)
    finally:
        server.terminate()
        server.wait(timeout=30)
    tracebacks = LOG.read_text(errors="replace").count("Traceback")
    report["server_log_tracebacks"] = tracebacks
    print(f"tracebacks in the server's log ({LOG}): {tracebacks}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
