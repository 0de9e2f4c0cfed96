"""The only place that loads weights: a folder in assets/, any local folder, or a hub id.

Device "auto" means CUDA when present, else the CPU; weights run in float32 on the CPU and bfloat16 on
CUDA (the embedded models are stored in float16 and upcast here). Also hides the one API difference
between transformers releases the engine touches: the name of the KV-cache argument.
"""

from __future__ import annotations

import inspect

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.utils import logging as hf_logging

from .presets import resolve_model_path
from .types import EngineError


hf_logging.disable_progress_bar()  # loading bars would clutter the CLI and the app's log


def pick_device(requested: str = "auto") -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as exc:
        raise EngineError(f"unknown device {requested!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise EngineError("device 'cuda' was asked for but no CUDA device is available")
    return device


def default_dtype(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def load_causal_lm(name: str, device: torch.device, dtype: torch.dtype | None = None):
    path = resolve_model_path(name)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or default_dtype(device))
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot load model {name!r}: {str(exc).splitlines()[0]}") from None
    model.to(device).eval().requires_grad_(False)
    return model


def load_block_drafter(kind: str, name: str, device: torch.device, dtype: torch.dtype | None = None):
    """A DFlash (kind "dflash") or DSpark (kind "dspark") drafter from a checkpoint folder or hub id."""
    from .drafters.dflash_model import DFlashDraftModel
    from .drafters.dspark_model import DSparkDraftModel

    cls = {"dflash": DFlashDraftModel, "dspark": DSparkDraftModel}[kind]
    try:
        model = cls.from_pretrained(resolve_model_path(name), dtype=dtype or default_dtype(device))
    except (OSError, ValueError, TypeError) as exc:
        raise EngineError(f"cannot load {kind} drafter {name!r}: {str(exc).splitlines()[0]}") from None
    model.to(device).eval().requires_grad_(False)
    return model


def load_tokenizer(name: str):
    try:
        return AutoTokenizer.from_pretrained(resolve_model_path(name))
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot load tokenizer {name!r}: {str(exc).splitlines()[0]}") from None


def new_cache(model) -> DynamicCache:
    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers releases before the config argument
        return DynamicCache()


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def forward_logits(model, input_ids: torch.Tensor, cache: DynamicCache, logits_to_keep: int = 0) -> torch.Tensor:
    """Logits (batch, positions, vocab) of a forward that extends `cache`; logits_to_keep=0 keeps all."""
    kwargs = {_cache_kwarg(model): cache}
    return model(input_ids, use_cache=True, logits_to_keep=logits_to_keep, **kwargs).logits


def forward_with_features(model, input_ids: torch.Tensor, cache: DynamicCache, layer_ids: list[int] | None,
                          logits_to_keep: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Like forward_logits, and also the concatenated hidden states of `layer_ids` at every input position
    (batch, positions, len(layer_ids) * H), which block drafters read; None when layer_ids is None."""
    if layer_ids is None:
        return forward_logits(model, input_ids, cache, logits_to_keep), None
    kwargs = {_cache_kwarg(model): cache}
    out = model(input_ids, use_cache=True, logits_to_keep=logits_to_keep, output_hidden_states=True, **kwargs)
    return out.logits, torch.cat([out.hidden_states[i + 1] for i in layer_ids], dim=-1)


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Roll `cache` back to its first `length` positions. A negative argument to `crop` means "remove
    this many" in every transformers release (older ones read a positive one as the length to keep)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)
