"""The only place that loads weights: a folder in assets/, any local folder, or a hub id.

Device "auto" means CUDA when present, else the CPU; weights run in float32 on the CPU and, on CUDA, in the
preset's `cuda_dtype` (bfloat16 unless it says otherwise). The embedded models are stored in float16 and upcast
here. Also hides the one API difference between transformers releases the engine touches: the name of the
KV-cache argument.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
from pathlib import Path
from types import ModuleType

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.utils import logging as hf_logging

from .contract.methods import DRAFTER_KINDS, DrafterKind, Method
from .contract.presets import ASSETS_DIR, resolve_model_path
from .contract.types import EngineError, check_device_name


hf_logging.disable_progress_bar()  # loading bars would clutter the CLI and the app's log


def pick_device(requested: str = "auto") -> torch.device:
    """The torch device for "auto" (CUDA when present, else the CPU), "cpu", "cuda" or "cuda:N".

    Any other name, or CUDA (or GPU N) that this machine does not have, raises EngineError with one line.
    """
    check_device_name(requested)
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cpu":
        return torch.device("cpu")
    _, colon, index = requested.partition(":")
    if not torch.cuda.is_available():
        raise EngineError(f"device {requested!r} was asked for but no CUDA device is available")
    count = torch.cuda.device_count()
    if colon and int(index) >= count:
        raise EngineError(f"device {requested!r} was asked for but this machine has {count} CUDA device(s), "
                          f"numbered from 0")
    return torch.device("cuda", int(index)) if colon else torch.device("cuda")


def set_cpu_threads(device: torch.device, threads: int | None) -> None:
    """On the CPU, run torch with this many threads (None: leave torch's default). Raises EngineError for
    a count below 1."""
    if threads is None or device.type != "cpu":
        return
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise EngineError(f"threads must be a whole number of at least 1, got {threads!r}")
    torch.set_num_threads(threads)


def default_dtype(device: torch.device, cuda_dtype: str = "bfloat16") -> torch.dtype:
    """float32 on the CPU; on CUDA `cuda_dtype` (a preset's choice: contract/presets.py)."""
    return getattr(torch, cuda_dtype) if device.type == "cuda" else torch.float32


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'s' if threads != 1 else ''})"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def read_config(name: str, cache_dir: str | None = None, local_files_only: bool = False) -> dict:
    """A checkpoint's config.json as a dict, from assets/, a local folder, or the hub (cache first)."""
    from transformers.utils import cached_file

    try:
        path = cached_file(resolve_model_path(name), "config.json", cache_dir=cache_dir,
                           local_files_only=local_files_only)
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot load {name!r}: {_first_line(exc)}") from None


def load_causal_lm(name: str, device: torch.device, dtype: torch.dtype | None = None, cache_dir: str | None = None,
                   local_files_only: bool = False):
    path = resolve_model_path(name)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or default_dtype(device), cache_dir=cache_dir,
                                                     local_files_only=local_files_only)
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot load model {name!r}: {_first_line(exc)}") from None
    model.to(device).eval().requires_grad_(False)
    return model


def load_drafter(name: str, kinds: tuple[str, ...], device: torch.device, dtype: torch.dtype | None = None,
                 cache_dir: str | None = None, local_files_only: bool = False):
    """The drafter network in checkpoint `name`, whose format must be one of `kinds` (methods.py): the
    format is recognised from its config.json, never guessed from the method asking for it."""
    config = read_config(name, cache_dir, local_files_only)
    for kind in (DRAFTER_KINDS[k] for k in kinds):
        impl = implementation(kind)
        if impl.recognises(config):
            try:
                model = impl.load(resolve_model_path(name), device, dtype or default_dtype(device),
                                  cache_dir=cache_dir, local_files_only=local_files_only)
                return tagged(model, kind)
            except EngineError:
                raise
            except (OSError, ValueError, TypeError, KeyError) as exc:
                raise EngineError(f"cannot load {kind.label} drafter {name!r}: {_first_line(exc)}") from None
    architectures = ", ".join(config.get("architectures") or ["none"])
    raise EngineError(f"{name!r} is not a drafter of a known format for this lane (architectures: {architectures}; "
                      f"expected {' or '.join(DRAFTER_KINDS[k].label for k in kinds)})")


def implementation(kind: DrafterKind) -> ModuleType:
    """The module implementing `kind` (the registry's seam: DrafterKind.module is its import path), with
    recognises(config), load(path, device, dtype), owns(model) and build(model, engine)."""
    return importlib.import_module(kind.module)


def tree_grower(method: Method) -> ModuleType:
    """The module that grows `method`'s draft trees (Method.tree_module is its import path), with
    grow(chain_drafter, config) -> Drafter over the drafter of the chain method it grows from."""
    return importlib.import_module(method.tree_module)


def build_weightless(kind: DrafterKind, device: torch.device):
    """The drafter state of a kind without weights (DrafterKind.weights False), built from nothing."""
    return tagged(implementation(kind).load(None, device, default_dtype(device)), kind)


def tagged(model, kind: DrafterKind):
    """`model`, marked with the kind that loaded it (drafter_kind_of reads the mark)."""
    model.drafter_kind = kind.name
    return model


def drafter_kind_of(model) -> DrafterKind:
    """The drafter kind (methods.py) that loaded `model`: its mark, or for a model built by hand (tests) the first
    kind whose module owns it."""
    if getattr(model, "drafter_kind", None) in DRAFTER_KINDS:
        return DRAFTER_KINDS[model.drafter_kind]
    for kind in DRAFTER_KINDS.values():
        if implementation(kind).owns(model):
            return kind
    raise EngineError(f"no drafter kind handles a {type(model).__name__}")


def require_runnable(preset, requested_device: str, device: torch.device, cache_dir: str | None,
                     offline: bool | None, check_memory: bool = True) -> dict:
    """Refuse, with one clear line, a preset that cannot run here; returns the hub arguments to load it.
    A preset that needs a GPU is refused on a CPU unless the CPU was asked for by name. `check_memory` False
    skips the free-memory check: where the loading process has no GPU of its own (a ZeroGPU Space's, whose
    `spaces` answers the GPU's memory with a stand-in), the check would read that stand-in."""
    if preset.needs_gpu and device.type != "cuda" and requested_device == "auto":
        raise EngineError(f"preset {preset.name!r} needs a CUDA GPU and there is none here "
                          f"(pass --device cpu to run it on the CPU anyway, slowly)")
    if preset.local:  # shipped in assets/: never look anywhere else
        missing = [name for name in preset.checkpoints() + [preset.tokenizer] if not (ASSETS_DIR / name).exists()]
        if missing:
            raise EngineError(f"preset {preset.name!r}: embedded model folder(s) {', '.join(missing)} missing from "
                              f"assets/ (python -m engine.train rebuilds them)")
        return {"local_files_only": True}
    if offline is None:
        offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    hub = {"cache_dir": cache_dir, "local_files_only": offline}
    missing = [name for name in dict.fromkeys(preset.checkpoints()) if not _cached(name, cache_dir)]
    if missing and offline:
        raise EngineError(f"preset {preset.name!r}: {', '.join(missing)} neither cached nor downloadable "
                          f"(the hub is offline)")
    if device.type == "cuda" and not missing and check_memory:
        need = sum(_weights_bytes(name, cache_dir) for name in dict.fromkeys(preset.checkpoints()))
        free, _ = torch.cuda.mem_get_info(device)
        if need * 1.2 > free:
            raise EngineError(f"preset {preset.name!r} needs about {need / 2**30:.1f} GiB of GPU memory; "
                              f"{free / 2**30:.1f} GiB is free")
    return hub


def _snapshot(name: str, cache_dir: str | None) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # any failure to find it locally means "not cached"
        return None


def _cached(name: str, cache_dir: str | None) -> bool:
    snapshot = _snapshot(name, cache_dir)
    return snapshot is not None and (snapshot / "config.json").exists()


def _weights_bytes(name: str, cache_dir: str | None) -> int:
    snapshot = _snapshot(name, cache_dir)
    return sum(f.stat().st_size for f in snapshot.glob("*.safetensors")) if snapshot else 0


def load_tokenizer(name: str, cache_dir: str | None = None, local_files_only: bool = False):
    try:
        return AutoTokenizer.from_pretrained(resolve_model_path(name), cache_dir=cache_dir,
                                             local_files_only=local_files_only)
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot load tokenizer {name!r}: {_first_line(exc)}") from None


def new_cache(model) -> DynamicCache:
    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers releases before the config argument
        return DynamicCache()


@functools.lru_cache(maxsize=None)
def _cache_kwarg_of(model_class: type) -> str:
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _cache_kwarg(model) -> str:
    return _cache_kwarg_of(type(model))  # looked up once per class, not at every forward


def forward_logits(model, input_ids: torch.Tensor, cache: DynamicCache, logits_to_keep: int = 0,
                   **inputs) -> torch.Tensor:
    """Logits (batch, positions, vocab) of a forward that extends `cache`; logits_to_keep=0 keeps all. inputs: a
    batch's attention_mask and position_ids (engine/ragged.py)."""
    kwargs = {_cache_kwarg(model): cache, **inputs}
    return model(input_ids, use_cache=True, logits_to_keep=logits_to_keep, **kwargs).logits


def forward_with_features(model, input_ids: torch.Tensor, cache: DynamicCache, layer_ids: list[int] | None,
                          logits_to_keep: int | torch.Tensor = 0,
                          **tree_inputs) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Like forward_logits (logits_to_keep may also be a tensor of positions, kept in every row), and also the
    concatenated hidden states of `layer_ids` at every input position
    (batch, positions, len(layer_ids) * H), which block drafters read; None when layer_ids is None.
    tree_inputs: the attention_mask and position_ids of a tree verify (engine/tree.py: verify_inputs) or of a batch
    (engine/ragged.py)."""
    kwargs = {_cache_kwarg(model): cache, **tree_inputs}
    if layer_ids is None:
        return model(input_ids, use_cache=True, logits_to_keep=logits_to_keep, **kwargs).logits, None
    out = model(input_ids, use_cache=True, logits_to_keep=logits_to_keep, output_hidden_states=True, **kwargs)
    return out.logits, torch.cat([out.hidden_states[i + 1] for i in layer_ids], dim=-1)


def cache_tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, object]]:
    """Every written key and value tensor of `cache`, (batch, heads, positions, head_dim), each with a function that
    puts a replacement in its place: transformers 4.54 and later hold one object per layer, earlier releases two
    lists of tensors."""
    if hasattr(cache, "layers"):
        places = [(layer, name) for layer in cache.layers for name in ("keys", "values")]
        found = [(getattr(layer, name), functools.partial(setattr, layer, name)) for layer, name in places]
    else:
        found = [(tensors[i], functools.partial(tensors.__setitem__, i))
                 for tensors in (cache.key_cache, cache.value_cache) for i in range(len(tensors))]
    return [(tensor, put) for tensor, put in found if torch.is_tensor(tensor) and tensor.dim() == 4]


def keep_cache_entries(cache: DynamicCache, length: int, positions: list[int]) -> None:
    """Keep the cache's first `length` entries and then those at `positions` (ascending, each at or past where it
    goes), in every layer: after a tree verify, the committed context and the accepted path's nodes. The path's
    entries are copied down behind the context and the rest cropped, so the work grows with the path, not the cache."""
    for tensor, _ in cache_tensors(cache):
        index = torch.tensor(positions, device=tensor.device, dtype=torch.long)
        tensor[..., length: length + len(positions), :] = tensor.index_select(-2, index)  # copied before written over
    crop_cache(cache, length + len(positions))


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Roll `cache` back to its first `length` positions. A negative argument to `crop` means "remove
    this many" in every transformers release (older ones read a positive one as the length to keep)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)
