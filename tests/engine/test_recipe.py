"""The model card's recipes: every phase a shipped model went through, oldest first, with its budget."""

import json

from engine.contract.presets import ASSETS_DIR
from engine.train.recipe import phases, recipe, recipe_text


def _phase(steps: int, share: float, **more) -> dict:
    return {"steps": steps, "batch_size": 8, "seq_len": 256, "self_data_fraction": share, **more}


def test_a_drafter_trained_on_from_shipped_weights_lists_the_earlier_phases_first():
    earlier = {"train_config": _phase(3000, 0.5), "self_data_phase": _phase(400, 0.75),
               "greedy_phase": _phase(8000, 1.0, labels="argmax"), "train_minutes": 100.0}
    record = {"train_config": _phase(2000, 1.0), "labels": "0.1 CE + 0.9 TV", "rows": "greedy and sampled rows",
              "earlier": earlier, "train_minutes": 350.0}
    r = recipe(record)
    assert [p["steps"] for p in r["phases"]] == [3000, 400, 8000, 2000]
    assert r["steps"] == 13400 and r["tokens"] == 13400 * 8 * 256 and r["minutes"] == 350.0
    assert recipe_text(r) == ("3000: corpus and the target's continuations (50%) → 400: corpus and the target's "
                              "continuations (75%) → 8000: the target's continuations (argmax) → 2000: greedy and "
                              "sampled rows (0.1 CE + 0.9 TV)")


def test_a_matched_run_counts_its_self_distillation_last_with_its_own_rows():
    """`engine.train eagle3|small-lm-drafter --matched` records DSpark's schedule phase for phase in one record, its
    last phase (self-distillation on the target's rows) under "self_distill_phase", naming its rows there."""
    record = {"train_config": _phase(3000, 0.5), "self_data_phase": _phase(400, 0.75),
              "second_cycle": _phase(3000, 0.5), "second_self_data_phase": _phase(400, 0.75),
              "greedy_phase": _phase(8000, 1.0, labels="soft"),
              "self_distill_phase": _phase(2000, 1.0, labels="soft", rows="greedy and sampled rows"),
              "train_minutes": 772.1}
    r = recipe(record)
    assert [p["steps"] for p in r["phases"]] == [3000, 400, 3000, 400, 8000, 2000] and r["steps"] == 16800
    assert r["tokens"] == 16800 * 8 * 256 and r["minutes"] == 772.1
    assert recipe_text(r).endswith("→ 8000: the target's continuations (soft) → 2000: greedy and sampled rows (soft)")


def test_a_round_of_more_training_counts_its_own_phases():
    record = {"train_config": _phase(3000, 0.0), "more": {"phase": _phase(500, 0.0), "unloop_phase": _phase(100, 0.5)}}
    assert [(p["steps"], p["data"]) for p in recipe(record)["phases"]] == [
        (3000, "corpus"), (500, "corpus"), (100, "corpus and the target's continuations (50%)")]


def test_the_card_prints_each_models_recipe():
    import json

    from engine.contract.presets import ASSETS_DIR
    from engine.train.card import render_markdown

    card = json.loads((ASSETS_DIR / "model_card.json").read_text())  # the shipped card, one recipe put in it
    name = next(iter(card["models"]))
    card["models"][name]["recipe"] = recipe({"train_config": _phase(600, 0.0), "train_minutes": 14.8})
    assert f"| {name} | 600: corpus | 600 | 1.2 M | 14.8 |" in render_markdown(card).splitlines()


def test_a_count_of_rows_is_not_read_as_the_data():
    """The shipped target's unlikelihood phase keeps how many rows it generated (an integer): its data is still its
    share of the target's own continuations, as for any phase that names no rows."""
    record = json.loads((ASSETS_DIR / "target" / "training.json").read_text(encoding="utf-8"))
    assert isinstance(record["unloop_phase"]["rows"], int)
    data = [phase["data"] for phase in phases(record)]
    assert data[-1] == "corpus and the target's continuations (50%)", data
