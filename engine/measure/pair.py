"""Your own target and drafters: `--target PATH_OR_ID` and `--drafter METHOD=PATH_OR_ID` (repeatable) on the engine's
command line and the bench, loaded as a preset named "custom:" and the target's folder, beside the shipped ones.

- A folder is read as it is; a hub id only from the local hub cache (nothing downloads at run time), pinned to the
  snapshot found there. Remote code is never run: a checkpoint whose config needs it is refused.
- Each checkpoint's format is recognised from its config.json, as the presets' are (engine/models.py load_drafter).
  Before any weights load, the pair is checked: the tokenizer against the target's vocabulary, each drafter's
  vocabulary, hidden size and target layers against the target's. Every mismatch found is named, all in one line.
- A block drafter drafts at the block it was trained for unless told otherwise (`default_drafts`).
- Every output names what it ran (`identities`): each checkpoint's path or id, its revision (the hub snapshot's
  commit), and a sha256 of its weight files.
- An operator may restrict which ids load (SPECLAB_ALLOWED_MODELS, comma-separated ids or folders; `allowed`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from functools import cache
from pathlib import Path

from ..contract.methods import DRAFTER_KINDS, METHODS, method as method_entry, method_id
from ..contract.presets import PRESETS, Preset
from ..contract.types import EngineError

CUSTOM = "custom"
ALLOW_ENV = "SPECLAB_ALLOWED_MODELS"
FEATURE_KINDS = tuple(k for k, kind in DRAFTER_KINDS.items() if kind.features)  # drafters that read the target's states


def parse_drafter(flag: str) -> tuple[str, str]:
    """`METHOD=PATH_OR_ID` as (method, checkpoint); one EngineError line when it is not that."""
    method, sep, name = flag.partition("=")
    if not sep or not name.strip():
        raise EngineError(f"--drafter {flag!r}: expected METHOD=PATH_OR_ID, e.g. dflash=z-lab/Qwen3-4B-DFlash-b16")
    method = method_id(method.strip().lower())
    if method not in METHODS or not method_entry(method).kinds or method_entry(method).tree:
        drafting = [m for m in METHODS if method_entry(m).kinds and not method_entry(m).tree]
        raise EngineError(f"--drafter {flag!r}: no method {method!r} takes a checkpoint; choose among {', '.join(drafting)}")
    return method, name.strip()


def allowed(name: str, environ=None) -> bool:
    """Whether the operator's list allows `name` (no list: every name)."""
    raw = (os.environ if environ is None else environ).get(ALLOW_ENV, "").strip()
    return not raw or name in {x.strip() for x in raw.split(",") if x.strip()}


def locate(name: str, cache_dir: str | None = None) -> tuple[Path, str | None]:
    """(the checkpoint's folder, its revision): a folder as it is (revision None), a hub id from the local cache only
    (its snapshot's commit); one EngineError line when it is neither."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve(), None
    if path.exists() or name.startswith((".", "/", "~")) or name.count("/") != 1:
        raise EngineError(f"{name!r} is not a checkpoint folder (and not a hub id: owner/name)")
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(name, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure to find it locally means "not cached"
        raise EngineError(f"{name!r} is neither a folder nor in the local hub cache (nothing downloads at run time: "
                          f"`huggingface-cli download {name}` first)") from None
    return folder, folder.name


def _config(folder: Path, name: str) -> dict:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineError(f"{name!r}: no readable config.json ({getattr(exc, 'strerror', None) or exc})") from None


def _needs_remote_code(config: dict) -> bool:
    from transformers import CONFIG_MAPPING

    return "auto_map" in config and config.get("model_type") not in CONFIG_MAPPING


def pair_problems(target: dict, drafters: dict[str, dict], tokenizer_size: int | None) -> list[str]:
    """Every way the checkpoints' configs do not fit together (method -> drafter config), in words."""
    problems = []
    vocab, hidden, layers = target.get("vocab_size"), target.get("hidden_size"), target.get("num_hidden_layers")
    if not any(a.endswith("ForCausalLM") for a in target.get("architectures") or []):
        problems.append(f"the target is not a causal LM (architectures: {target.get('architectures')})")
    if _needs_remote_code(target):
        problems.append("the target needs remote code (auto_map), which is never run")
    if tokenizer_size is not None and vocab is not None and tokenizer_size > vocab:
        problems.append(f"the tokenizer has {tokenizer_size} tokens, more than the target's vocabulary of {vocab}")
    for method, config in drafters.items():
        own = config.get("vocab_size")
        if own is not None and vocab is not None and own != vocab:
            problems.append(f"{method}: vocabulary {own}, the target's {vocab}")
        if method_entry(method).kinds[0] == "small-lm":
            if _needs_remote_code(config):
                problems.append(f"{method}: needs remote code (auto_map), which is never run")
            continue
        if config.get("hidden_size") not in (None, hidden):
            problems.append(f"{method}: hidden size {config['hidden_size']}, the target's {hidden}")
        trained_on = config.get("num_target_layers")
        if trained_on is not None and layers is not None and trained_on != layers:
            problems.append(f"{method}: trained on a {trained_on}-layer target, this one has {layers}")
        ids = config.get("target_layer_ids") or (config.get("dflash_config") or {}).get("target_layer_ids") or []
        if layers is not None and any(not 0 <= i < layers for i in ids):
            problems.append(f"{method}: target_layer_ids {ids} outside the target's {layers} layers")
    return problems


def custom_preset(target: str, drafters: dict[str, str], chat: bool = False, cache_dir: str | None = None,
                  environ=None) -> Preset:
    """Check the pair (allow-list, folders or cached ids, configs, tokenizer) and register it as the preset
    "custom:<the target's folder>";
    one EngineError line naming every problem, before any weights load."""
    names = [target, *drafters.values()]
    refused = [n for n in names if not allowed(n, environ)]
    if refused:
        raise EngineError(f"{', '.join(refused)} not on this server's list of models ({ALLOW_ENV})")
    where = {name: locate(name, cache_dir) for name in dict.fromkeys(names)}
    target_config = _config(where[target][0], target)
    drafter_configs = {m: _config(where[n][0], n) for m, n in drafters.items()}
    from transformers import AutoTokenizer

    try:
        tokenizer_size = len(AutoTokenizer.from_pretrained(str(where[target][0]), local_files_only=True))
    except (OSError, ValueError) as exc:
        raise EngineError(f"{target!r}: no tokenizer beside the target ({str(exc).splitlines()[0] if str(exc) else exc})") \
            from None
    if tokenizer_size < 2:  # transformers makes an empty one from a folder holding only a tokenizer config
        raise EngineError(f"{target!r}: no tokenizer beside the target (its folder has no tokenizer.json or vocabulary "
                          f"files; the tokenizer read there holds {tokenizer_size} token)")
    problems = pair_problems(target_config, drafter_configs, tokenizer_size)
    if problems:
        raise EngineError("these checkpoints do not fit together: " + "; ".join(problems))
    # named by its target's folder, so what is measured and kept per preset (DSpark's batched verify cost) is this
    # target's own: "custom:/path/to/the/target"
    preset = Preset(name=f"{CUSTOM}:{where[target][0]}", target=str(where[target][0]), tokenizer=str(where[target][0]),
                    drafters={m: str(where[n][0]) for m, n in drafters.items()},
                    description=f"your own: {target} with " + (", ".join(f"{m} {n}" for m, n in drafters.items())
                                                              or "no drafter"),
                    chat=chat, local=True, cuda_dtype="bfloat16")
    for name in [n for n in PRESETS if n.startswith(CUSTOM + ":")]:  # one pair of one's own at a time
        del PRESETS[name]
    PRESETS[preset.name] = preset
    _SOURCES.clear()
    _SOURCES.update({"target": (target, *where[target]),
                     **{f"drafter:{m}": (n, *where[n]) for m, n in drafters.items()}})
    return preset


def is_custom(preset_name: str) -> bool:
    """Whether a preset's name is that of your own checkpoints (custom_preset)."""
    return preset_name.startswith(CUSTOM + ":")


_SOURCES: dict[str, tuple[str, Path, str | None]] = {}  # role -> (name as given, folder, revision) of "custom"


@cache
def weights_sha256(folder: Path) -> str | None:
    """sha256 over the checkpoint's weight files (*.safetensors, else *.bin), each file's name and bytes in name
    order; None where there are none. Computed once a process (a 4B model's 8 GB take seconds)."""
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def identities(preset_name: str) -> dict | None:
    """What a run of your own checkpoints ran: per role, the name given, its folder, revision and weights' sha256
    (None for any other preset: the shipped ones are named by their preset and weights_digests)."""
    if not is_custom(preset_name) or not _SOURCES:
        return None
    return {role: {"name": name, "path": str(folder), "revision": revision, "weights_sha256": weights_sha256(folder)}
            for role, (name, folder, revision) in _SOURCES.items()}


def default_drafts(engine, method: str, fallback: int) -> int:
    """Drafts per step when none was asked for: a block drafter's trained block (what its checkpoint drafts per
    block), any other drafter's `fallback`."""
    if method_entry(method).one_pass and method in engine.drafter_models:
        return engine.new_drafter(method).max_drafts or fallback
    return fallback


def render_prompt(tokenizer, text: str, thinking: bool) -> str:
    """`text` as a user turn in the tokenizer's chat template, thinking on or off, as text (the engine then encodes it
    as it is)."""
    if not getattr(tokenizer, "chat_template", None):
        raise EngineError("--chat on: this tokenizer has no chat template")
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                         enable_thinking=thinking, tokenize=False)


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """--target, --drafter, --chat and --thinking: your own checkpoints instead of a preset."""
    parser.add_argument("--target", default=None, metavar="PATH_OR_ID",
                        help="your own target: a folder, or a hub id in the local cache (with its tokenizer); "
                             "replaces --preset")
    parser.add_argument("--drafter", action="append", default=[], metavar="METHOD=PATH_OR_ID",
                        help="with --target: a drafter checkpoint for METHOD (repeatable), its format read from its config")
    parser.add_argument("--chat", choices=["auto", "on", "off"], default="auto",
                        help="wrap the prompt in the tokenizer's chat template (auto: the preset's choice; for --target, "
                             "on where its tokenizer has one)")
    parser.add_argument("--thinking", choices=["on", "off"], default="off",
                        help="with the chat template: thinking on or off (off: the template's empty think block)")


def preset_of_flags(target: str | None, drafter_flags: list[str], chat: bool = False):
    """The preset of --target and its --drafter flags (the CLI's, the bench's and the app's), checked as
    `custom_preset` checks it; None without either flag, refused in one line for a drafter without its target."""
    if not target and not drafter_flags:
        return None
    if not target:
        raise EngineError("--drafter needs --target (the model it drafts for)")
    return custom_preset(target, dict(parse_drafter(flag) for flag in drafter_flags), chat=chat)


def load_pair_or_preset(args, **load):
    """The engine of --target/--drafter (checked first, one line for every mismatch) or of --preset; then a function
    that turns a prompt into what the engine encodes (the chat template as asked), and what it ran (identities)."""
    from ..loop import Engine

    custom = preset_of_flags(args.target, args.drafter)
    preset = custom.name if custom else args.preset
    if not custom and args.preset not in PRESETS:
        raise EngineError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
    engine = Engine.load(preset, **load)
    has_template = bool(getattr(engine.tokenizer, "chat_template", None))
    chat = {"on": True, "off": False, "auto": engine.chat or (args.target is not None and has_template)}[args.chat]
    thinking = args.thinking == "on"
    if args.chat == "on" and not has_template:
        raise EngineError("--chat on: this tokenizer has no chat template")
    engine.chat = False  # the prompt is rendered here, the template as asked, then encoded as it is
    form = (lambda text: render_prompt(engine.tokenizer, text, thinking)) if chat else (lambda text: text)
    return engine, form, {"chat": chat, "thinking": thinking if chat else None, "models": identities(preset)}
