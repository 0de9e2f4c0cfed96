"""Command line: `python -m engine generate ...` runs one generation and writes its trace as JSON.

    python -m engine generate --method eagle3 --prompt "def parse(" --max-new-tokens 64 --json out.json

Your own checkpoints instead of a preset (folders, or hub ids already in the local cache; engine/measure/pair.py):

    python -m engine generate --target ./Qwen3-4B --drafter dflash=z-lab/Qwen3-4B-DFlash-b16 --method dflash \
        --prompt "Write a haiku" --chat on --thinking off --json out.json

Bad arguments exit with status 2 and one line on stderr, never a traceback. Arguments, the prompt and the
--json destination are checked before any model loads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from .contract.methods import LEGACY_METHOD_IDS, METHOD_REGISTRY, METHODS, method_id
from .contract.presets import DEFAULT_PRESET, OVERLAP_CHOICES, PRESETS, SCHEDULERS, VERIFY_RULES
from .contract.types import MAX_PROMPT_CHARS, EngineError, GenerationConfig, check_device_name
from .measure.pair import add_pair_arguments, load_pair_or_preset

DEFAULTS = GenerationConfig()


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m engine", description="SpecLab speculative decoding engine")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    gen = commands.add_parser("generate", help="run one generation and report every step")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--prompt-file", type=Path, help="read the prompt from this file (UTF-8)")
    gen.add_argument("--method", default=DEFAULTS.method, type=method_id,
                     help=f"one of {', '.join(METHODS)} ({', '.join(f'{old} for {new}' for old, new in LEGACY_METHOD_IDS.items())} still accepted)")
    gen.add_argument("--preset", default=DEFAULT_PRESET, help=f"models to use: {', '.join(PRESETS)}")
    add_pair_arguments(gen)
    gen.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens)
    gen.add_argument("--temperature", type=float, default=DEFAULTS.temperature)
    gen.add_argument("--seed", type=int, default=DEFAULTS.seed)
    gen.add_argument("--drafts-per-step", "--draft-len", dest="drafts_per_step", type=int, default=None,
                     help="K, tokens drafted per step (default: a --drafter block drafter's trained block, else the method's, "
                          + ", ".join(f"{m.name} {m.default_drafts}" for m in METHOD_REGISTRY.values()
                                      if m.default_drafts) + ")")
    gen.add_argument("--tree-nodes", type=int, default=DEFAULTS.tree_nodes,
                     help="node budget of the tree lanes (eagle3_tree, dflash_tree): drafts per step, as a tree")
    gen.add_argument("--requests-at-once", type=int, default=DEFAULTS.requests_at_once,
                     help="decode the prompt among this many requests (the others held-out prompts, the batch kept "
                          "full): a busy server's step")
    gen.add_argument("--verify-rule", default=DEFAULTS.verify_rule, help=f"at temperature > 0: {', '.join(VERIFY_RULES)}")
    gen.add_argument("--scheduler", default=DEFAULTS.scheduler, help=f"DSpark: {', '.join(SCHEDULERS)}")
    gen.add_argument("--confidence-threshold", type=float, default=DEFAULTS.confidence_threshold,
                     help="DSpark static cut threshold")
    gen.add_argument("--overlap", choices=list(OVERLAP_CHOICES), default="auto",
                     help="run each step's host work during the next step (auto: on for CUDA, off on the CPU)")
    gen.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N")
    gen.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto",
                     help="replay the target's verifies as CUDA graphs (auto: on the GPUs the device check passed on)")
    gen.add_argument("--threads", type=int, default=None,
                     help="torch CPU threads (default: the preset's; 1 for the embedded models, see docs/benchmarks.md)")
    gen.add_argument("--json", help="write the run as JSON to this path ('-' for stdout)")
    gen.add_argument("--warm-up", action="store_true",
                     help="first run every method briefly, as the app does when it starts, so one-time costs "
                          "(allocations, DSpark's verify-speed profile) stay out of the measured run")
    return parser


def _drafts_per_step(args) -> int:
    if args.drafts_per_step is not None:
        return args.drafts_per_step
    entry = METHOD_REGISTRY.get(args.method)  # an unknown method is reported by validate()
    return entry.default_drafts if entry and entry.default_drafts else DEFAULTS.drafts_per_step


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _read_prompt(args) -> str:
    """The prompt from --prompt, or from --prompt-file as UTF-8 (undecodable bytes replaced, newlines kept).

    Raises EngineError for a file that cannot be read or a prompt over MAX_PROMPT_CHARS characters. At most
    one character past the limit is read, so a huge file or /dev/zero is refused without being read whole.
    """
    if args.prompt is not None:
        prompt = args.prompt
    else:
        try:
            with args.prompt_file.open(encoding="utf-8", errors="replace", newline="") as file:
                prompt = file.read(MAX_PROMPT_CHARS + 1)
        except OSError as exc:
            raise EngineError(f"cannot read prompt file {str(args.prompt_file)!r}: {_reason(exc)}") from None
    if len(prompt) > MAX_PROMPT_CHARS:
        raise EngineError(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    return prompt


def _check_writable(path: str) -> None:
    """Raise EngineError unless `path` can be opened for writing (its folder exists, it is not a folder).

    Called before any model loads, so a bad --json path costs nothing. Opening for appending leaves an
    existing file as it is; a file this check created is removed again. A full disk shows only when the
    report is written (see _write_report).
    """
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise EngineError(f"cannot write --json file {path!r}: {_reason(exc)}") from None
    if not existed:
        os.remove(path)


def _write_report(path: str, report: str) -> None:
    """Write the JSON report to `path`; a failed write (a full disk) raises EngineError."""
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(report + "\n")
    except OSError as exc:
        raise EngineError(f"cannot write --json file {path!r}: {_reason(exc)}") from None


def _stdout_closed() -> int:
    """The reader of stdout went away (`... --json - | head -c 10`): stop quietly, as `yes | head` does.

    As Python's signal docs advise, stdout is pointed at devnull so the flush at exit cannot fail again.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader closed early


def generate(args) -> int:
    config = GenerationConfig(method=args.method, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              seed=args.seed, drafts_per_step=_drafts_per_step(args), verify_rule=args.verify_rule,
                              scheduler=args.scheduler, confidence_threshold=args.confidence_threshold,
                              overlap=OVERLAP_CHOICES[args.overlap], tree_nodes=args.tree_nodes,
                              requests_at_once=args.requests_at_once)
    config.validate()
    if args.threads is not None and not 1 <= args.threads <= 1024:
        raise EngineError(f"--threads must be between 1 and 1024, got {args.threads}")
    if args.preset not in PRESETS and not args.target:
        raise EngineError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
    check_device_name(args.device)
    prompt = _read_prompt(args)
    if not prompt.strip():
        raise EngineError("the prompt is empty")
    json_path = args.json if args.json != "-" else None
    if json_path is not None:
        _check_writable(json_path)

    # torch loads only once the arguments are known to be good
    engine, form, ran = load_pair_or_preset(args, device=args.device, threads=args.threads,
                                            cuda_graphs=args.cuda_graphs)
    if args.drafts_per_step is None:
        from .measure.pair import default_drafts

        config = replace(config, drafts_per_step=default_drafts(engine, config.method, config.drafts_per_step))
    if args.warm_up:
        engine.warm_up()
    prompt = form(prompt)
    result = engine.generate(prompt, config)
    report = json.dumps({**result.to_dict(), **ran, "prompt": prompt}, ensure_ascii=False)
    if json_path is not None:
        _write_report(json_path, report)
    print(report if args.json == "-" else result.text, flush=True)
    s = result.summary
    print(f"[{result.method}] {s.num_new_tokens} tokens in {s.num_steps} steps, tau {s.tau:.2f}, "
          f"alpha {s.alpha:.2f}, {s.tokens_per_s:.1f} tokens/s on {result.device} ({s.finish_reason})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status: 0, 2 for a bad call (one line on stderr), 130 when
    interrupted, 141 when the reader of stdout closed it early."""
    args = build_parser().parse_args(argv)
    try:
        return generate(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
