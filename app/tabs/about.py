"""The About tab: what each method is, where it comes from, the device, the words the pages use (app/glossary.py),
the embedded models' card."""

from __future__ import annotations

import gradio as gr

from engine.contract.interface import EngineLike
from engine.contract.methods import METHOD_REGISTRY
from engine.contract.presets import ASSETS_DIR, DEFAULT_PRESET, PRESETS

from ..glossary import glossary_markdown


def methods_text() -> str:
    """What each registered method is, from the registry (engine/contract/methods.py): the one place it is written."""
    items = "\n".join(f"- **{m.label}**: {m.about or m.description}" for m in METHOD_REGISTRY.values())
    return f"### The methods\n{items}\n\n" + VERIFICATION_TEXT


VERIFICATION_TEXT = """### Verification
At temperature 0 a drafted token is accepted while it equals the target's argmax. Above 0, the rejection
rule accepts token d with probability min(1, p_target(d) / p_draft(d)) and resamples from
normalize(max(p_target − p_draft, 0)) at the first rejection; the match rule accepts while the target's own
sample equals the draft. Both leave the output distributed exactly as the target's.
"""


def checkpoints_text(preset: str) -> str:
    """The operator's own checkpoints (`python -m app --target … --drafter …`), each named by what it is: the name
    given, its revision and a digest of its weights; nothing for a shipped preset."""
    from engine.measure.pair import identities  # plain files and hashes, no torch

    ran = identities(preset)
    if not ran:
        return ""
    rows = "\n".join(f"- {role}: `{m['name']}`" + (f" at revision `{m['revision'][:12]}`" if m["revision"] else "")
                     + (f", weights sha256 `{m['weights_sha256'][:16]}…`" if m["weights_sha256"] else "")
                     for role, m in ran.items())
    return f"\n\nThe checkpoints loaded:\n{rows}"


def render(engine: EngineLike) -> None:
    gr.Markdown(methods_text())
    preset = PRESETS.get(engine.preset)
    drafters = "\n".join(f"- {m}: {engine.drafter_label(m)}" for m in engine.methods())
    gr.Markdown(f"### This machine\nRunning on **{engine.device_name}**, preset **{engine.preset}**"
                + (f": {preset.description}." if preset else ".") + f"\n\nDrafters in this preset:\n{drafters}"
                + checkpoints_text(engine.preset))
    gr.Markdown(glossary_markdown(), elem_id="glossary")
    card = ASSETS_DIR / "MODEL_CARD.md"
    if engine.preset == DEFAULT_PRESET and card.exists():
        gr.Markdown(card.read_text(encoding="utf-8").replace("# Model card", "### Model card", 1))
