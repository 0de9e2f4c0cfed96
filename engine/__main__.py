"""Command line: `python -m engine generate ...` runs one generation and writes its trace as JSON.

    python -m engine generate --method ar --prompt "def parse(" --max-new-tokens 64 --json out.json

Bad arguments exit with status 2 and one line on stderr. Arguments are checked before any model loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .methods import METHOD_REGISTRY, METHODS
from .presets import DEFAULT_PRESET, OVERLAP_CHOICES, PRESETS, SCHEDULERS, VERIFY_RULES
from .types import EngineError, GenerationConfig

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
    gen.add_argument("--method", default=DEFAULTS.method, help=f"one of {', '.join(METHODS)}")
    gen.add_argument("--preset", default=DEFAULT_PRESET, help=f"models to use: {', '.join(PRESETS)}")
    gen.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens)
    gen.add_argument("--temperature", type=float, default=DEFAULTS.temperature)
    gen.add_argument("--seed", type=int, default=DEFAULTS.seed)
    gen.add_argument("--draft-len", type=int, default=None,
                     help="K, tokens drafted per step (default: the method's, "
                          + ", ".join(f"{m.name} {m.default_draft_len}" for m in METHOD_REGISTRY.values()
                                      if m.default_draft_len) + ")")
    gen.add_argument("--verify-rule", default=DEFAULTS.verify_rule, help=f"at temperature > 0: {', '.join(VERIFY_RULES)}")
    gen.add_argument("--scheduler", default=DEFAULTS.scheduler, help=f"DSpark: {', '.join(SCHEDULERS)}")
    gen.add_argument("--confidence-threshold", type=float, default=DEFAULTS.confidence_threshold,
                     help="DSpark static cut threshold")
    gen.add_argument("--overlap", choices=list(OVERLAP_CHOICES), default="auto",
                     help="run each step's host work during the next step (auto: on for CUDA, off on the CPU)")
    gen.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    gen.add_argument("--json", help="write the run as JSON to this path ('-' for stdout)")
    return parser


def _draft_len(args) -> int:
    if args.draft_len is not None:
        return args.draft_len
    entry = METHOD_REGISTRY.get(args.method)  # an unknown method is reported by validate()
    return entry.default_draft_len if entry and entry.default_draft_len else DEFAULTS.draft_len


def _read_prompt(args) -> str:
    if args.prompt is not None:
        return args.prompt
    try:
        return args.prompt_file.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise EngineError(f"cannot read prompt file: {exc.strerror}: {exc.filename}") from None


def generate(args) -> int:
    config = GenerationConfig(method=args.method, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              seed=args.seed, draft_len=_draft_len(args), verify_rule=args.verify_rule,
                              scheduler=args.scheduler, confidence_threshold=args.confidence_threshold,
                              overlap=OVERLAP_CHOICES[args.overlap])
    config.validate()
    if args.preset not in PRESETS:
        raise EngineError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
    prompt = _read_prompt(args)
    if not prompt.strip():
        raise EngineError("the prompt is empty")

    from .loop import Engine  # torch loads only once the arguments are known to be good

    result = Engine.load(args.preset, args.device).generate(prompt, config)
    s = result.summary
    report = json.dumps(result.to_dict(), ensure_ascii=False)
    if args.json == "-":
        print(report)
    else:
        print(result.text)
        if args.json:
            Path(args.json).write_text(report + "\n", encoding="utf-8")
    print(f"[{result.method}] {s.num_new_tokens} tokens in {s.num_steps} steps, tau {s.tau:.2f}, "
          f"alpha {s.alpha:.2f}, {s.tokens_per_s:.1f} tokens/s on {result.device} ({s.finish_reason})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return generate(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
