"""How much the engine's CPU forward path saves: the embedded target as transformers runs it (SDPA), with the
engine's attention (engine/cpu/attention.py), and as the engine runs it (that and engine/cpu/layout.py), timed
interleaved over a 200-token cache, and the prefill.

    .venv/bin/python scripts/forward_times.py [--repeats 150]

Medians in ms; both paths give the same logits from 5 new tokens on (tests/engine/test_attention.py, tests/engine/test_layout.py).
"""

from __future__ import annotations

import argparse
import time

import torch


from engine.cpu.attention import use_lean_attention  # noqa: E402
from engine.cpu.layout import use_column_major_weights, use_packed_vocab_products  # noqa: E402
from engine.models import crop_cache, forward_logits, load_causal_lm, new_cache  # noqa: E402


def _median_ms(samples: list[float]) -> float:
    return 1000 * sorted(samples)[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=150)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    models = {name: load_causal_lm("target", torch.device("cpu")) for name in ("transformers", "+attention", "engine")}
    for name in ("+attention", "engine"):
        use_lean_attention(models[name])
    use_column_major_weights(models["engine"])
    use_packed_vocab_products(models["engine"])
    ids = torch.randint(5, 4000, (1, 200), generator=torch.Generator().manual_seed(0))
    print(f"{'forward':<26}" + "".join(f"{name:>14}" for name in models))
    with torch.inference_mode():
        caches = {}
        for name, model in models.items():
            caches[name] = new_cache(model)
            forward_logits(model, ids, caches[name])
        for n in (1, 5, 8):
            new = torch.randint(5, 4000, (1, n), generator=torch.Generator().manual_seed(n))
            times = {name: [] for name in models}
            for _ in range(args.repeats):
                for name, model in models.items():
                    start = time.perf_counter()
                    forward_logits(model, new, caches[name])
                    times[name].append(time.perf_counter() - start)
                    crop_cache(caches[name], ids.shape[1])
            print(f"{f'{n} token(s), 200 cached':<26}" + "".join(f"{_median_ms(t):>11.2f} ms" for t in times.values()))
        times = {name: [] for name in models}
        for _ in range(max(3, args.repeats // 10)):
            for name, model in models.items():
                start = time.perf_counter()
                forward_logits(model, ids[:, :190], new_cache(model), logits_to_keep=1)
                times[name].append(time.perf_counter() - start)
        print(f"{'prefill of 190 tokens':<26}" + "".join(f"{_median_ms(t):>11.2f} ms" for t in times.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
