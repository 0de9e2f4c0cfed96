"""The registry of methods and drafter kinds: everything SpecLab knows about a method lives in one entry.

A **method** is a lane of the comparison (its name, label, one-line description, default draft length,
and which drafter kinds may serve it). A **drafter kind** is a checkpoint format with the module that
implements it; that module provides

    recognises(config: dict) -> bool          does a checkpoint's config.json belong to this kind?
    load(path, device, dtype) -> model       build the network and load the weights
    build(model, engine) -> Drafter          the object the speculative loop talks to (drafters/base.py)

so the engine, CLI, app, bench, model card and training read this file and never name a method
themselves. Adding a drafter is one module under `drafters/` plus one entry here.

Torch-free on purpose: the app (which imports no torch) reads names, labels and defaults from here; the
drafter modules are imported only when a model is loaded.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class DrafterKind:
    name: str
    label: str  # shown in the lane header: which drafter the lane ran
    module: str  # the module under engine/ with recognises / load / build

    def implementation(self):
        return importlib.import_module(f"engine.{self.module}")


@dataclass(frozen=True)
class Method:
    name: str  # used in the CLI, the JSON trace, URLs and element ids
    label: str
    description: str  # one line under the lane's name
    default_draft_len: int  # K (serial drafters) or tokens per block (one-pass drafters); 0 = drafts nothing
    one_pass: bool  # True: the whole block in one forward (the app's "tokens per block" setting)
    kinds: tuple[str, ...]  # drafter kinds that can serve this method, tried in order; () = no drafter
    paper: str = ""


# Checkpoint formats, in the order they are recognised (the first whose `recognises` says yes wins).
DRAFTER_KINDS: dict[str, DrafterKind] = {k.name: k for k in (
    DrafterKind("eagle3", "EAGLE-3", "drafters.eagle3"),
    DrafterKind("dspark", "DSpark", "drafters.dspark"),  # also DeepSpec's DFlash (markov_rank 0)
    DrafterKind("dflash", "DFlash", "drafters.dflash"),
    DrafterKind("small-lm", "small LM", "drafters.ar"),
)}

METHOD_REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("baseline", "Baseline", "target only: one target forward per token", 0, False, ()),
    Method("ar", "AR", "drafts K tokens one forward at a time, then one verify", 4, False,
           ("eagle3", "small-lm"),
           "EAGLE-3, arXiv 2503.01840 (a small LM when the preset has no EAGLE-3)"),
    Method("classic", "Classic", "a small LM drafts K tokens, one forward each, then one verify", 4, False,
           ("small-lm",), "Leviathan et al. 2023, arXiv 2211.17192"),
    Method("dflash", "DFlash", "drafts a whole block in one parallel pass", 7, True, ("dspark", "dflash"),
           "DFlash, arXiv 2602.06036"),
    Method("dspark", "DSpark", "one-pass block, Markov head, confidence-scheduled verify", 7, True,
           ("dspark",), "DSpark, deepseek-ai/DeepSpec"),
)}

METHODS = tuple(METHOD_REGISTRY)  # every method, in display order
DEFAULT_LANES = ("baseline", "ar", "dflash", "dspark")  # the app's lanes unless a visitor picks others


def method(name: str) -> Method:
    return METHOD_REGISTRY[name]


def kind_label(kind: str) -> str:
    return DRAFTER_KINDS[kind].label
