"""The serving lane as a measurement: a prompt set sent to an operator's vLLM or SGLang server (its OpenAI-compatible
or native streaming API, app/servers/client.py) at a chosen concurrency, into the bench's per-prompt rows.

    python -m app.servers.measure --server "vllm=http://host:8000" --prompts prompts.jsonl --concurrency 4 \\
        --max-new-tokens 64 --json runs/serving.json [--beside runs/bench.json] [--by COLUMN]

Every prompt is asked once, `concurrency` requests in flight at a time. Each row is one answer: the same fields as
the bench's rows (lane, origin, prompt_index, the prompt file's labels, tokens, wall_s, tokens_per_s) with `origin`
"server", plus what this client measured (TTFT, time per output token) and what the server counted of its own
speculative decoding (steps, accepted, drafted, τ, acceptance rate), each figure named by its source. The server's
/metrics counters are read before and after, their difference over the run kept as the server's claim. Figures that
cannot be true (app/servers/claims.py) are listed under `problems`.

`--beside BENCH.json`: a bench report over the same prompt file (the same sha256): its local lanes' rows join the
server's, and each local lane is set against the server prompt by prompt (engine/measure/decide.py; the two ran on
different machines, which the pair's words say).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.contract.types import EngineError
from engine.measure.decide import labels_of, pair_words, pairwise, prompt_file_record, read_prompt_file, rows_csv

from .claims import CLAIM, counter_problems, figure_problems
from .client import ServerCounters, ServerLaneResult, ServerSpec, Timeouts, parse_server, read_counters, stream_lane

MAX_CONCURRENCY = 256
SOURCES = {"client": "measured here, from the streamed answer (network included)",
           "server": "the server's own per-request figures (its answer's metrics / meta_info)",
           "metrics": "the server's /metrics counters, after the run less before it (all its traffic meanwhile)"}


def _answer(spec: ServerSpec, prompt: str, settings: dict, timeouts: Timeouts, environ) -> tuple[ServerLaneResult, float]:
    start = time.perf_counter()
    lane = None
    for lane in stream_lane(spec, prompt, settings, None, timeouts, environ):
        pass
    return lane, time.perf_counter() - start


def answer_row(lane: ServerLaneResult, wall_s: float, index: int, labels: dict) -> dict:
    """One answer as a bench row: tokens over this client's wall time, and the server's own counts beside it."""
    tokens = lane.num_tokens or 0
    row = {"lane": lane.name, "origin": "server", "prompt_index": index,
           **{k: v for k, v in labels.items() if k != "prompt"},
           "tokens": tokens, "wall_s": round(wall_s, 5),
           "tokens_per_s": round(tokens / wall_s, 2) if wall_s > 0 and tokens else None,
           "ttft_s": None if lane.ttft_s is None else round(lane.ttft_s, 5),
           "tpot_s": None if lane.tpot_s is None else round(lane.tpot_s, 6),
           "timing_from": lane.timing_from, "state": lane.state, "error": lane.error}
    spec = lane.spec
    row.update(server_steps=spec.num_steps if spec else None, server_accepted=spec.num_accepted if spec else None,
               server_drafted=spec.num_drafted if spec else None,
               server_tau=None if spec is None or spec.tau is None else round(spec.tau, 4),
               server_acceptance_rate=None if spec is None or spec.acceptance_rate is None
               else round(spec.acceptance_rate, 4),
               server_problems="; ".join(figure_problems(spec)) if spec else None)
    return row


def _counter_delta(before: ServerCounters | str, after: ServerCounters | str) -> dict:
    """The server's /metrics over the run: vLLM's counters after less before; SGLang's gauges as read after."""
    if isinstance(after, str):
        return {"source": "metrics", "unavailable": after}
    fields = ("num_drafts", "num_draft_tokens", "num_accepted", "accept_length", "accept_rate")
    values = {f: getattr(after, f) for f in fields}
    if after.kind == "vllm" and isinstance(before, ServerCounters):
        values.update({f: (getattr(after, f) or 0) - (getattr(before, f) or 0) for f in fields[:3]})
    delta = ServerCounters(after.kind, **values)
    return {"source": "metrics", "kind": after.kind, "over": "the run" if after.kind == "vllm" else "its latest batch",
            **{k: v for k, v in values.items() if v is not None},
            "tau": delta.tau, "acceptance_rate": delta.acceptance_rate,
            "problems": counter_problems(delta), "shown_as": CLAIM}


def measure_server(spec: ServerSpec, rows: list[dict], concurrency: int, settings: dict,
                   timeouts: Timeouts = Timeouts(), environ=None, log=None) -> dict:
    """Every prompt of `rows` (a prompt file's rows) asked once, `concurrency` at a time: the per-prompt rows, the
    whole run's throughput, the server's own figures summed over its answers, and its counters over the run."""
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"a concurrency of {concurrency} is outside 1 to {MAX_CONCURRENCY}")
    before = read_counters(spec, timeouts, environ)
    done = [0]
    lock = threading.Lock()

    def ask(i: int):
        result = _answer(spec, rows[i]["prompt"], settings, timeouts, environ)
        with lock:
            done[0] += 1
            if log:
                log(f"\r{done[0]}/{len(rows)} answers", end="")
        return result

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="speclab-measure") as pool:
        answers = list(pool.map(ask, range(len(rows))))
    wall = time.perf_counter() - start
    if log:
        log("")
    after = read_counters(spec, timeouts, environ)
    prompt_rows = [answer_row(lane, s, i, rows[i]) for i, (lane, s) in enumerate(answers)]
    good = [lane for lane, _ in answers if lane.state == "done"]
    specs = [lane.spec for lane in good if lane.spec is not None]
    steps, accepted = sum(s.num_steps for s in specs), sum(s.num_accepted for s in specs)
    drafted = [s.num_drafted for s in specs]
    tokens = sum(lane.num_tokens or 0 for lane in good)
    return {"server": spec.name, "kind": next((lane.kind for lane, _ in answers), spec.kind),
            "concurrency": concurrency, "settings": dict(settings), "requests": len(rows), "answers": len(good),
            "errors": sorted({lane.error for lane, _ in answers if lane.error}),
            "throughput": {"source": "client", "tokens": tokens, "wall_s": round(wall, 4),
                           "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None},
            "server_figures": {"source": "server", "answers_with_figures": len(specs), "steps": steps,
                               "accepted": accepted, "drafted": sum(drafted) if specs and all(d is not None for d in drafted) else None,
                               "tau": round(1 + accepted / steps, 4) if steps else None,
                               "acceptance_rate": round(accepted / sum(drafted), 4)
                               if specs and all(drafted) else None,
                               "problems": sorted({p for s in specs for p in figure_problems(s)}), "shown_as": CLAIM},
            "server_counters": _counter_delta(before, after), "prompt_rows": prompt_rows}


def beside(report: dict, bench: dict) -> None:
    """Join a bench report's local rows to the server's, and set each local lane against the server prompt by prompt;
    one ValueError line when the two did not run the same prompt file."""
    ours, theirs = (report["prompts"] or {}).get("sha256"), (bench.get("prompts") or {}).get("sha256")
    if ours != theirs or report["prompts"]["prompts_used"] != bench["prompts"]["prompts_used"]:
        raise ValueError("--beside: the bench report ran another prompt file (or another number of its prompts); "
                         "run both over the same file")
    speeds: dict[str, list[float]] = {}
    for row in [*bench["prompt_rows"], *report["prompt_rows"]]:
        speeds.setdefault(row["lane"], [0.0] * report["prompts"]["prompts_used"])[row["prompt_index"]] = \
            row["tokens_per_s"] or 0.0
    server = report["server"]
    report["prompt_rows"] = [*bench["prompt_rows"], *report["prompt_rows"]]
    report["beside"] = {"bench_device": bench.get("device"), "bench_preset": bench.get("preset"),
                        "note": "local lanes on this machine, the server lane on the server's: different hardware",
                        "pairwise": pairwise(speeds, [(lane, server) for lane in speeds if lane != server])}


def table(report: dict) -> str:
    t, f, c = report["throughput"], report["server_figures"], report["server_counters"]
    lines = [f"{report['server']} ({report['kind']}): {report['answers']}/{report['requests']} answers at concurrency "
             f"{report['concurrency']}, {report['settings'].get('max_new_tokens')} new tokens a request",
             f"throughput ({SOURCES['client']}): {t['tokens']} tokens in {t['wall_s']:.2f} s, "
             f"{t['tokens_per_s'] or 0:.1f} tokens/s",
             f"τ and acceptance ({SOURCES['server']}, {CLAIM}): "
             + (f"τ {f['tau']:.2f}, accepted / drafted {f['acceptance_rate']:.2f}" if f["tau"] is not None
                else "none reported")]
    if "unavailable" in c:
        lines.append(f"counters ({SOURCES['metrics']}): {c['unavailable']}")
    else:
        tau, rate = c.get("tau"), c.get("acceptance_rate")
        lines.append(f"counters ({SOURCES['metrics']}, {CLAIM}): τ {'—' if tau is None else f'{tau:.2f}'}, "
                     f"acceptance {'—' if rate is None else f'{rate:.2f}'}")
    for problem in sorted({*f["problems"], *c.get("problems", ())}):
        lines.append(f"⚠ the server's figures do not hold together: {problem}")
    if report["errors"]:
        lines.append(f"errors: {'; '.join(report['errors'])}")
    for row in (report.get("beside") or {}).get("pairwise", ()):
        lines.append(f"- {pair_words(row)} (different machines)")
    for label, group in (report.get("by") or {}).get("groups", {}).items():
        lines.append(f"{report['by']['column']} = {label}: {group['answers']} answers, "
                     f"{group['tokens_per_s'] or 0:.1f} tokens/s per request (mean)")
    return "\n".join(lines)


def _groups(report: dict, column: str, labels: list[str]) -> dict:
    groups: dict[str, list[dict]] = {}
    for row, label in zip(report["prompt_rows"], labels):
        groups.setdefault(label, []).append(row)
    return {"column": column, "groups": {label: {
        "answers": sum(r["state"] == "done" for r in rows),
        "tokens_per_s": round(sum(r["tokens_per_s"] or 0 for r in rows) / len(rows), 2),
        "server_accepted": sum(r["server_accepted"] or 0 for r in rows),
        "server_drafted": sum(r["server_drafted"] or 0 for r in rows)} for label, rows in groups.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.servers.measure", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="NAME=URL[,kind=vllm|sglang][,model=ID]")
    parser.add_argument("--prompts", type=Path, required=True,
                        help="prompt file: .jsonl, .csv or plain text, as the bench reads (docs/formats.md)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N prompts (0 = all)")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--by", default=None, metavar="COLUMN", help="also split the rows by this label")
    parser.add_argument("--beside", type=Path, default=None, metavar="BENCH_JSON",
                        help="a bench report over the same prompt file: its local lanes beside the server's")
    parser.add_argument("--json", type=Path, default=Path("runs/serving.json"))
    parser.add_argument("--csv", type=Path, default=None, help="per-prompt rows (default: the --json path with .csv)")
    args = parser.parse_args(argv)
    try:
        spec = parse_server(args.server)
        rows = read_prompt_file(args.prompts)[: args.limit or None]
        if not rows:
            raise ValueError(f"no prompts in {args.prompts}")
        labels = labels_of(rows, args.by)
        bench = json.loads(args.beside.read_text(encoding="utf-8")) if args.beside else None
        settings = {"temperature": args.temperature, "max_new_tokens": args.max_new_tokens, "seed": args.seed}
        report = measure_server(spec, rows, args.concurrency, settings,
                                log=lambda text, end="\n": print(text, end=end, file=sys.stderr, flush=True))
        report["prompts"] = prompt_file_record(args.prompts, len(rows))
        report["sources"] = SOURCES
        if labels is not None:
            report["by"] = _groups(report, args.by, labels)
        if bench is not None:
            beside(report, bench)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        csv_path = args.csv or args.json.with_suffix(".csv")
        csv_path.write_text(rows_csv(report["prompt_rows"]), encoding="utf-8")
    except (ValueError, EngineError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(report))
    print(f"wrote {args.json} and {csv_path} (per-prompt rows)")
    return 0 if report["answers"] == report["requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
