"""Drafters behind one small interface (base.py), one module per checkpoint format ("drafter kind").

Each DrafterKind in the torch-free registry (engine/contract/methods.py) names its module here by import path;
engine.models.implementation imports it, only when a model of that kind is loaded or built.
"""
