"""A real server under load: C requests sent at once to an operator-configured vLLM or SGLang server, at each
concurrency, reading each answer's speculative-decoding figures and the throughput they made together.

    python -m app.servers.load --server "name=http://host:8000" --concurrency 1,2,4,8,16,32 --json runs/server_load.json

The server's address is the operator's (NAME=URL[,kind=…][,model=…], as for the server lanes:
app/servers/client.py); a visitor never sets one. Each row: how many answers ended well, the tokens they wrote over the wall time from the
first request sent to the last answer's end (throughput), and τ and the acceptance rate over every answer that
reported speculative figures. Run it once against the server with speculation and once without (the server's own
setting) to read the speedup at each concurrency.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from .client import ServerLaneResult, ServerSpec, Timeouts, parse_server, stream_lane

MAX_CONCURRENCY = 256


def _last(spec: ServerSpec, prompt: str, settings: Mapping, timeouts: Timeouts, environ) -> ServerLaneResult:
    lane = None
    for lane in stream_lane(spec, prompt, settings, None, timeouts, environ):
        pass
    return lane


def at_concurrency(spec: ServerSpec, prompts: list[str], concurrency: int, settings: Mapping,
                   timeouts: Timeouts = Timeouts(), environ: Mapping[str, str] | None = None) -> dict:
    """`concurrency` requests at once (prompts taken in turn), one thread each: the row described above."""
    answers: list[ServerLaneResult | None] = [None] * concurrency

    def ask(i: int) -> None:
        answers[i] = _last(spec, prompts[i % len(prompts)], settings, timeouts, environ)

    threads = [threading.Thread(target=ask, args=(i,), daemon=True, name=f"speclab-load-{i}")
               for i in range(concurrency)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    done = [a for a in answers if a is not None and a.state == "done"]
    tokens = sum(a.num_tokens or 0 for a in done)
    specs = [a.spec for a in done if a.spec is not None and a.spec.num_steps]
    steps, accepted = sum(s.num_steps for s in specs), sum(s.num_accepted for s in specs)
    drafted = [s.num_drafted for s in specs]
    errors = sorted({a.error for a in answers if a is not None and a.error})
    return {"concurrency": concurrency, "answers": len(done), "errors": errors, "tokens": tokens, "wall_s": wall,
            "tokens_per_s": tokens / wall if wall > 0 else 0.0,
            "tau": 1 + accepted / steps if steps else None,
            "acceptance_rate": accepted / sum(drafted) if specs and all(drafted) else None,
            "with_spec_figures": len(specs)}


def load_sweep(spec: ServerSpec, prompts: list[str], sizes: list[int], settings: Mapping,
               timeouts: Timeouts = Timeouts(), environ: Mapping[str, str] | None = None) -> dict:
    for size in sizes:
        if not 1 <= size <= MAX_CONCURRENCY:
            raise ValueError(f"a concurrency of {size} is outside 1 to {MAX_CONCURRENCY}")
    rows = [at_concurrency(spec, prompts, size, settings, timeouts, environ) for size in sizes]
    return {"server": spec.name, "settings": dict(settings), "rows": rows}


def table(sweep: dict) -> str:
    lines = [f"{sweep['server']}: {sweep['settings'].get('max_new_tokens')} new tokens a request", "",
             "| concurrency | answers | tokens/s | τ | acceptance |", "|---|---|---|---|---|"]
    for row in sweep["rows"]:
        tau = f"{row['tau']:.2f}" if row["tau"] is not None else "–"
        rate = f"{row['acceptance_rate']:.2f}" if row["acceptance_rate"] is not None else "–"
        lines.append(f"| {row['concurrency']} | {row['answers']}/{row['concurrency']} | {row['tokens_per_s']:.1f} | "
                     f"{tau} | {rate} |")
    errors = sorted({e for row in sweep["rows"] for e in row["errors"]})
    return "\n".join(lines + ([f"errors: {'; '.join(errors)}"] if errors else []))


def main(argv: list[str] | None = None) -> int:
    from engine.contract.presets import load_prompts  # plain JSON reading, no torch

    parser = argparse.ArgumentParser(prog="python -m app.servers.load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="NAME=URL[,kind=vllm|sglang][,model=ID]")
    parser.add_argument("--concurrency", default="1,2,4,8,16,32", help="comma-separated requests at once")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        sizes = [int(v) for v in args.concurrency.split(",") if v.strip()]
        spec = parse_server(args.server)
        settings = {"temperature": args.temperature, "max_new_tokens": args.max_new_tokens, "seed": 0}
        sweep = load_sweep(spec, load_prompts(), sizes, settings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(sweep))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(sweep, indent=1) + "\n")
    return 0 if all(row["answers"] == row["concurrency"] for row in sweep["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
