"""The benchmark against transformers: same outputs as `generate` and assisted generation, sane report."""

from __future__ import annotations

import pytest

from engine.bench import format_table, load_prompts, run_bench


@pytest.mark.slow
def test_bench_matches_transformers_and_reports_every_lane(random_engine):
    prompts = ["def parse(self, text):\n", "import os\n", "class Queue:\n"]
    report = run_bench(random_engine, prompts, max_new_tokens=20, draft_len=3)
    assert report["identical_outputs"], report["mismatches"]
    assert set(report["lanes"]) == {"baseline", "ar", "dflash", "dspark", "dflash_overlap_on", "dflash_overlap_off", "dspark_verify_all",
                                    "dspark_static_cut",
                                    "hf_generate", "hf_assisted"}
    assert report["lanes"]["baseline"]["speedup"] == 1.0
    assert report["lanes"]["baseline"]["tokens"] == report["lanes"]["hf_generate"]["tokens"] == 60
    ar = report["lanes"]["ar"]
    assert ar["tau"] == pytest.approx(ar["alpha"] + 1, abs=1e-3)
    assert len(ar["per_position_acceptance"]) == 3
    table = format_table(report)
    assert "| ar |" in table and "ar_vs_hf_assisted" in table


def test_heldout_prompts_are_shipped():
    prompts = load_prompts()
    assert len(prompts) >= 30
    assert all(p.rstrip().endswith(":") for p in prompts)
