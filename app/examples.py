"""Example prompts shown under the prompt box (assets/prompts/examples.json)."""

from __future__ import annotations

import json

from engine.presets import ASSETS_DIR

EXAMPLES_PATH = ASSETS_DIR / "prompts" / "examples.json"


def example_prompts() -> list[str]:
    if not EXAMPLES_PATH.exists():
        return ["def fibonacci(n):\n"]
    return [item["prompt"] for item in json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))]
