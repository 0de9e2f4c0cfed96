"""The shipped block drafters saved again in their reference formats, weights as they are:
`python -m engine.train reexport`.

A drafter saved in a layout that differs from the reference's only in its config or its stored copies needs a new
save, not training: its weights are already the reference modules' (same names, same numbers). This stage loads each
of assets/dflash-drafter and assets/dspark-drafter as SpecLab loads it, rebuilds its config with the
builder (train/dflash.py, train/dspark.py) for the shipped target, puts the same weights in a drafter built
from that config, gives the DSpark drafter frozen copies of the target's embedding table and LM head (what
DeepSpec's checkpoints store), and saves over the folder in float16. Nothing is retrained and training.json
stays as it is: the stage refuses to write unless the rebuilt drafter has the shipped one's settings and
computes the same function, and checks afterwards that the stored weights are the shipped ones bit for bit.
On folders already in these layouts it writes the same files again.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from ..drafters.dflash_model import DFlashDraftModel, load_block_model
from ..drafters.dspark_model import DSparkDraftModel
from . import dflash, dspark

KINDS = {"dflash": (DFlashDraftModel, dflash.dflash_config), "dspark": (DSparkDraftModel, dspark.dspark_config)}


def _settings(model: DFlashDraftModel) -> dict:
    """What decides how a block drafter drafts beyond its weights' names and shapes."""
    settings = {"block_size": model.block_size, "mask_token_id": model.mask_token_id,
                "target_layer_ids": list(model.target_layer_ids)}
    if isinstance(model, DSparkDraftModel):
        settings.update(markov_head_type=model.markov_head.head_type if model.markov_head is not None else None,
                        confidence_head_with_markov=model.confidence_head_with_markov,
                        confidence_temperatures=list(model.confidence_temperatures),
                        confidence_temperatures_sampled=getattr(model.config, "confidence_temperatures_sampled", None))
    return settings


@torch.no_grad()
def _same_function(a: DFlashDraftModel, b: DFlashDraftModel) -> bool:
    """Both drafters give identical hidden states on one random block and context (float32, the CPU)."""
    generator = torch.Generator().manual_seed(0)
    hidden = a.config.hidden_size
    noise = torch.randn(1, a.block_size, hidden, generator=generator)
    features = torch.randn(1, 5, len(a.target_layer_ids) * hidden, generator=generator)
    positions = torch.arange(5 + a.block_size).unsqueeze(0)
    return torch.equal(a(noise, features, positions), b(noise, features, positions))


def reexport(folder: Path, kind: str, target) -> list[str]:
    """Save the drafter in `folder` (a `kind` block drafter for `target`, float32) again in its reference format;
    returns the weight names now stored."""
    cls, config_of = KINDS[kind]
    shipped = load_block_model(cls, str(folder), torch.device("cpu"), torch.float32)
    config = config_of(target.config, shipped.mask_token_id, block_size=shipped.block_size)
    if kind == "dspark":  # its calibrations (train/dspark.calibrate: at temperature 0, 1 where fitted) are part of it
        config.confidence_temperatures = list(shipped.confidence_temperatures)
        if getattr(shipped.config, "confidence_temperatures_sampled", None) is not None:
            config.confidence_temperatures_sampled = list(shipped.config.confidence_temperatures_sampled)
    drafter = cls(config).eval().requires_grad_(False)
    own = {name: tensor for name, tensor in shipped.state_dict().items()
           if not name.startswith(("embed_tokens.", "lm_head."))}
    drafter.load_state_dict(own, strict=True)  # every name and shape the same, or an error
    if _settings(drafter) != _settings(shipped) or not _same_function(drafter, shipped):
        raise ValueError(f"{folder}: today's {kind} config builder describes another drafter than the one shipped "
                         f"({_settings(shipped)} against {_settings(drafter)}); retrain it instead")
    if kind == "dspark":
        drafter.copy_target_embeddings(target)
    drafter.to(torch.float16).save_pretrained(folder)
    stored = load_file(str(folder / "model.safetensors"))
    changed = [name for name, tensor in own.items() if not torch.equal(stored[name], tensor.to(torch.float16))]
    if changed:
        raise ValueError(f"{folder}: weights changed on saving: {', '.join(changed[:4])}")
    return sorted(stored)
