"""CUDA checks, for a machine with a GPU (skipped cleanly elsewhere): the embedded models in float32 on the
device (their preset's choice: in bfloat16 a near-tie can turn a run away from the baseline), every method equal
to the baseline at temperature 0, overlap on by default, spans measured with device synchronisation."""

from __future__ import annotations

import pytest
import torch

from engine.contract.types import GenerationConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def cuda_engine():
    from engine.loop import Engine

    engine = Engine.load("tiny", "cuda")
    engine.warm_up()
    return engine


def test_models_run_in_float32_on_the_device(cuda_engine):
    assert cuda_engine.target.dtype == torch.float32
    assert next(cuda_engine.target.parameters()).device.type == "cuda"
    assert cuda_engine.device_name.startswith("cuda")


def test_every_method_equals_the_baseline_on_cuda(cuda_engine):
    from engine.measure.bench import load_prompts

    for prompt in load_prompts()[:8]:
        baseline = cuda_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=48))
        for method in cuda_engine.methods()[1:]:
            other = cuda_engine.generate(prompt, GenerationConfig(method=method, max_new_tokens=48, drafts_per_step=4))
            assert other.output_ids == baseline.output_ids, method


def test_overlap_is_on_by_default_and_changes_nothing_but_time(cuda_engine):
    prompt = "import os\n\n\ndef list_files(path):"
    auto = cuda_engine.generate(prompt, GenerationConfig(method="dflash", max_new_tokens=32, drafts_per_step=7))
    off = cuda_engine.generate(prompt, GenerationConfig(method="dflash", max_new_tokens=32, drafts_per_step=7, overlap=False))
    assert auto.output_ids == off.output_ids
    host = [s for step in auto.steps for s in step.spans if s.label == "trace and text"]
    device = [s for step in auto.steps for s in step.spans if s.work in ("draft", "verify")]
    # Overlapped: some host work ran while device work of a later step was in flight.
    assert any(h.start_s < d.end_s and d.start_s < h.end_s for h in host for d in device)
