"""The About tab: what each method is, where it comes from, the embedded models' card, the device."""

from __future__ import annotations

import gradio as gr

from engine.presets import ASSETS_DIR, PRESETS

METHODS_TEXT = """
### The methods
- **Baseline**: the target alone, one forward per token. Every other lane must write exactly its text at
  temperature 0.
- **AR (EAGLE-3)**: a one-layer drafter reads the target's hidden states (three or five of its layers, fused
  by a linear layer) with the last token's embedding and drafts K tokens, one forward each, feeding its own
  hidden state back (Li et al., *EAGLE-3*, arXiv 2503.01840; DeepSpec's checkpoint format). The target then
  verifies all K in one forward. Drafting cost grows with K: the serial ceiling.
- **Classic**: classic speculative decoding, where a small language model with the target's tokenizer drafts K
  tokens, one forward each (Leviathan et al. 2023, *Fast Inference from Transformers via Speculative
  Decoding*).
- **DFlash**: a block-diffusion drafter drafts the whole block in one parallel forward, conditioned on the
  target's hidden states injected as keys and values (*DFlash*, arXiv 2602.06036).
- **DSpark**: DFlash's one-pass backbone, a cheap low-rank Markov head that samples the block left to
  right, and a calibrated confidence head whose scheduler decides how much of the block to verify
  (Cheng et al., PKU × DeepSeek-AI, code in deepseek-ai/DeepSpec).

### Verification
At temperature 0 a drafted token is accepted while it equals the target's argmax. Above 0, the rejection
rule accepts token d with probability min(1, p_target(d) / p_draft(d)) and resamples from
normalize(max(p_target − p_draft, 0)) at the first rejection; the match rule accepts while the target's own
sample equals the draft. Both leave the output distributed exactly as the target's.
"""


def render(engine) -> None:
    gr.Markdown(METHODS_TEXT)
    preset = PRESETS.get(engine.preset)
    drafters = "\n".join(f"- {m}: {engine.drafter_label(m)}" for m in engine.methods())
    gr.Markdown(f"### This machine\nRunning on **{engine.device_name}**, preset **{engine.preset}**"
                + (f": {preset.description}." if preset else ".") + f"\n\nDrafters in this preset:\n{drafters}")
    card = ASSETS_DIR / "MODEL_CARD.md"
    if engine.preset == "tiny" and card.exists():
        gr.Markdown(card.read_text(encoding="utf-8").replace("# Model card", "### Model card", 1))
