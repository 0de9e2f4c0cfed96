"""How much the engine's CPU forward path saves: the embedded target as transformers runs it (SDPA), with the
engine's attention (engine/cpu/attention.py), with that and engine/cpu/layout.py, and as the engine runs it (the
fused forward of engine/target/ over its own cache), timed interleaved over a 200-token cache, and the prefill.

    .venv/bin/python scripts/forward_times.py [--repeats 150]

Medians in ms; the paths give the same logits to float32 rounding (tests/engine/test_attention.py,
tests/engine/test_layout.py, tests/engine/test_target.py).
"""

from __future__ import annotations

import argparse
import time

import torch


from engine.cpu.attention import use_lean_attention  # noqa: E402
from engine.cpu.layout import use_column_major_weights, use_packed_vocab_products  # noqa: E402
from engine.models import crop_cache, forward_logits, load_causal_lm, new_cache  # noqa: E402
from engine.target import FusedQwen3, Target  # noqa: E402


def _median_ms(samples: list[float]) -> float:
    return 1000 * sorted(samples)[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=150)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    models = {name: load_causal_lm("target", torch.device("cpu")) for name in ("transformers", "+attention", "+layout")}
    for name in ("+attention", "+layout"):
        use_lean_attention(models[name])
    use_column_major_weights(models["+layout"])
    use_packed_vocab_products(models["+layout"])
    fused = FusedQwen3(models["+layout"])
    ids = torch.randint(5, 4000, (1, 200), generator=torch.Generator().manual_seed(0))
    names = [*models, "engine"]
    print(f"{'forward':<26}" + "".join(f"{name:>14}" for name in names))
    with torch.inference_mode():
        caches = {}
        for name, model in models.items():
            caches[name] = new_cache(model)
            forward_logits(model, ids, caches[name])
        target = Target(fused, None, 256)
        target.prefill(ids)

        def forward(name: str, new: torch.Tensor) -> None:
            if name == "engine":
                target.verify(new)
                target.keep(ids.shape[1])
            else:
                forward_logits(models[name], new, caches[name])
                crop_cache(caches[name], ids.shape[1])

        for n in (1, 5, 8):
            new = torch.randint(5, 4000, (1, n), generator=torch.Generator().manual_seed(n))
            times = {name: [] for name in names}
            for _ in range(args.repeats):
                for name in names:
                    start = time.perf_counter()
                    forward(name, new)
                    times[name].append(time.perf_counter() - start)
            print(f"{f'{n} token(s), 200 cached':<26}" + "".join(f"{_median_ms(t):>11.2f} ms" for t in times.values()))
        times = {name: [] for name in names}
        for _ in range(max(3, args.repeats // 10)):
            for name in names:
                start = time.perf_counter()
                if name == "engine":
                    Target(fused, None, 256).prefill(ids[:, :190])
                else:
                    forward_logits(models[name], ids[:, :190], new_cache(models[name]), logits_to_keep=1)
                times[name].append(time.perf_counter() - start)
        print(f"{'prefill of 190 tokens':<26}" + "".join(f"{_median_ms(t):>11.2f} ms" for t in times.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
