"""Drafters behind one small interface (base.py), one module per checkpoint format ("drafter kind").

The seam between the torch-free registry (engine/contract/methods.py) and these modules: each DrafterKind names
its module by import path, and `implementation` imports it, only when a model of that kind is loaded or built.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..contract.methods import DrafterKind


def implementation(kind: DrafterKind) -> ModuleType:
    """The module implementing `kind`: recognises(config), load(path, device, dtype), owns(model),
    build(model, engine)."""
    return importlib.import_module(kind.module)
