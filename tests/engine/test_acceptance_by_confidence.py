"""scripts/acceptance_by_confidence.py: every judged draft at temperature 0, binned by how sure the target was."""

from __future__ import annotations

import pytest

from engine.contract.types import GenerationConfig
from scripts import acceptance_by_confidence as abc

PROMPTS = ["def add(a, b):", "import os\nimport sys\n"]
LANES = ["eagle3", "dflash", "dspark"]


def test_each_judged_draft_stands_at_its_output_position_and_is_binned_by_the_targets_probability(random_engine):
    measured = abc.measure(random_engine, LANES, PROMPTS, drafts=3, max_new_tokens=14, kinds=["code", "lines"])
    assert measured["mismatches"] == {} and set(measured["by_kind"]) == {"code", "lines"}
    for b, row in enumerate(measured["rows"]):  # every prompt together is the sum of its kinds
        kinds = [measured["by_kind"][kind][b] for kind in ("code", "lines")]
        assert row["positions"] == sum(k["positions"] for k in kinds)
        assert all(row["lanes"][lane]["drafts"] == sum(k["lanes"][lane]["drafts"] for k in kinds) for lane in LANES)
    assert "code prompts:" in abc.describe(measured, LANES)
    rows = measured["rows"]
    assert len(rows) == len(abc.EDGES) - 1 and sum(r["positions"] for r in rows) == 14 * len(PROMPTS)
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-9
    for lane in LANES:
        judged = accepted = 0
        for prompt in PROMPTS:
            result = random_engine.generate(prompt, GenerationConfig(method=lane, max_new_tokens=14, drafts_per_step=3))
            found = abc.judged_positions(result)
            # an accepted draft is the token the run wrote at its position; a rejected one is not
            assert all((result.output_ids[p] == token) == ok for p, token, ok in found if p < len(result.output_ids))
            assert sum(ok for *_, ok in found) == sum(s.num_accepted for s in result.steps if s.kind == "decode")
            judged += sum(p < len(result.output_ids) for p, *_ in found)
            accepted += sum(ok for p, _, ok in found if p < len(result.output_ids))
        counted = [r["lanes"][lane] for r in rows]
        assert sum(c["drafts"] for c in counted) == judged > 0 and sum(c["accepted"] for c in counted) == accepted
        assert all(c["low"] <= c["rate"] <= c["high"] for c in counted if c["drafts"])


def test_the_bins_hold_the_targets_own_probabilities():
    probabilities = [0.0, 0.19, 0.2, 0.5, 0.94, 0.95, 1.0]
    assert [abc.bin_of(p) for p in probabilities] == [0, 0, 1, 2, 4, 5, 5]
    assert abc.bin_label(0) == "0 ≤ p < 0.2" and abc.bin_label(5) == "p ≥ 0.95"


@pytest.mark.parametrize("argv,words", [(["--drafts-per-step", "0"], "≥ 1"),
                                        (["--preset", "nope"], "unknown preset")])
def test_a_wrong_argument_is_refused_in_one_line_before_any_model_loads(argv, words, capsys):
    assert abc.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
