"""Example prompts shown under the prompt box (assets/prompts/examples.json)."""

from __future__ import annotations

import json

from engine.contract.presets import ASSETS_DIR

EXAMPLES_PATH = ASSETS_DIR / "prompts" / "examples.json"


def example_prompts() -> list[str]:
    if not EXAMPLES_PATH.exists():
        return ["def fibonacci(n):\n"]
    return [item["prompt"] for item in json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))]


def one_line(prompt: str) -> str:
    """A prompt shown on one line (a dropdown's label): each line break drawn as ⏎, so no two lines run together."""
    return " ⏎ ".join(line for line in prompt.splitlines() if line.strip()) or prompt


def example_choices() -> list[tuple[str, str]]:
    """(label, prompt) pairs for a dropdown: the label on one line, the value the prompt as written."""
    return [(one_line(p), p) for p in example_prompts()]
