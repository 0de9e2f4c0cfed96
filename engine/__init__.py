"""SpecLab's speculative decoding engine (torch + transformers only).

Entry points: `engine.loop.Engine` (load a preset, then `stream()` steps or `generate()` a whole run),
`python -m engine generate ...` (the CLI), `python -m engine.measure.bench` (the benchmark) and
`python -m engine.train ...` (the embedded models). Importing this package loads nothing heavy: the
plain-value modules (`types`, `presets`, `summary`) import no torch, so the app can use them freely.
"""
