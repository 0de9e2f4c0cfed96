"""`python -m app`: load the engine on the embedded models and serve the app."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

from engine.contract.presets import DEFAULT_PRESET, PRESETS


def load_engine(preset, device: str, threads: int | None = None, own_process: bool = True,
                cuda_graphs: str = "auto"):
    """The engine, warmed up: in a process of its own (engine/process.py), so that visitors' page loads and
    requests never take the cores or the interpreter lock its runs are timed on; or in this one. preset: a
    shipped preset's name, or an operator's own pair's Preset (registered in the process that runs it)."""
    if own_process:
        from engine.process import EngineProcess

        return EngineProcess(preset, device, threads=threads, cuda_graphs=cuda_graphs)
    from engine.loop import Engine

    engine = Engine.load(getattr(preset, "name", preset), device, threads=threads, cuda_graphs=cuda_graphs)
    engine.warm_up()
    return engine


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="SpecLab web app")
    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS))
    parser.add_argument("--target", default=None, metavar="PATH_OR_ID",
                        help="the operator's own target instead of --preset: a folder or a cached hub id (runs in an "
                             "engine process of its own, as a preset does; SPECLAB_ALLOWED_MODELS may list the ids "
                             "allowed; docs/formats.md)")
    parser.add_argument("--drafter", action="append", default=[], metavar="METHOD=PATH_OR_ID",
                        help="with --target: a drafter checkpoint for METHOD (repeatable)")
    parser.add_argument("--chat", choices=["on", "off"], default="on",
                        help="with --target: prompts as a user turn of its chat template, thinking off (default on)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: the preset's; 1 for the embedded models, see docs/benchmarks.md)")
    parser.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto",
                        help="replay the target's verifies as CUDA graphs (auto: on the GPUs the device check passed on; "
                             "docs/benchmarks.md)")
    parser.add_argument("--timing-runs", type=int, default=None, metavar="N",
                        help="complete runs of each lane, taking turns, each step's fastest timing kept (default 3; 1 = the live "
                             "pass only; docs/benchmarks.md)")
    parser.add_argument("--recordings", type=Path, default=None, metavar="DIR",
                        help="where recorded runs are kept across restarts, so a share link replays the same numbers "
                             "(default: SPECLAB_RECORDINGS, else ~/.cache/speclab/recorded)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the models in the web server's own process (default: a process of their own, so that "
                             "page loads and other visitors' requests cannot slow the runs being timed)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--server", action="append", metavar="NAME=URL", default=[],
                        help="a vLLM or SGLang server shown as a lane beside the local ones (repeatable; also "
                             "SPECLAB_SERVERS; NAME=URL,kind=vllm|sglang,model=ID; see docs/servers.md)")
    parser.add_argument("--job-budget", type=float, default=None, metavar="SECONDS",
                        help="the most engine time one visitor's comparison may be estimated to take (default 15; a "
                             "browser with the presenter key, SPECLAB_PRESENTER_KEY, is not limited; docs/hosting.md)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.job_budget is not None and not 1 <= args.job_budget <= 3600:
        parser.error("--job-budget must be a number of seconds from 1 to 3600")
    from .hosting.presenter import ENVIRONMENT, checked_key

    try:
        presenter_key = checked_key(os.environ.get(ENVIRONMENT))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.timing_runs is not None and not 1 <= args.timing_runs <= 10:
        parser.error("--timing-runs must be a whole number from 1 to 10")
    from .servers.client import servers_from

    try:
        servers = servers_from(args.server)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from engine.contract.types import EngineError

    from .main import build_app, launch

    notice = ""
    if args.target or args.drafter:  # the operator's own checkpoints: checked here, then run like a preset
        from engine.measure.pair import preset_of_flags

        try:
            preset = preset_of_flags(args.target, args.drafter, chat=args.chat == "on")
            engine = load_engine(preset, args.device, args.threads, not args.in_process, args.cuda_graphs)
        except EngineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        engine = engine if args.target else load_engine(args.preset, args.device, args.threads, not args.in_process,
                                                        args.cuda_graphs)
    except EngineError as exc:
        if args.preset == DEFAULT_PRESET:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # A real preset that cannot run here (no GPU, weights not cached): serve the embedded models instead.
        notice = f"{exc}; showing the embedded models ({DEFAULT_PRESET}) instead"
        print(f"warning: {notice}", file=sys.stderr)
        try:
            engine = load_engine(DEFAULT_PRESET, args.device, args.threads, not args.in_process, args.cuda_graphs)
        except EngineError as again:
            print(f"error: {again}", file=sys.stderr)
            return 2
    print(f"SpecLab: {engine.preset} models on {engine.device_name}; open http://{args.host}:{args.port}")
    from .run import runner
    from .recordings import default_folder

    run_lanes = runner.run_lanes if args.timing_runs is None else \
        functools.partial(runner.run_lanes, timing_runs=args.timing_runs)
    launch(build_app(engine, notice=notice, run_lanes=run_lanes, servers=servers,
                     recordings=args.recordings or default_folder(), pin_key=os.environ.get("SPECLAB_PIN_KEY"),
                     presenter_key=presenter_key, **({} if args.job_budget is None else {"job_budget_s": args.job_budget})),
           server_name=args.host, server_port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
