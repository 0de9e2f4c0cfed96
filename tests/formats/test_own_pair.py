"""Your own target and drafters by path (`--target`, `--drafter METHOD=PATH`): public-format checkpoints with random
weights and a tiny target load from plain folders, run, equal the target's own greedy decoding, draft at their trained
block, and are named in every output (path, revision, weights' digest); checkpoints that do not fit together are
refused in one line naming every mismatch, before any weights load."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest
import torch

from engine.__main__ import main
from engine.contract.presets import PRESETS
from engine.contract.types import EngineError, GenerationConfig
from engine.measure.pair import allowed, is_custom, locate, pair_problems, parse_drafter

from conftest import tiny_qwen3
from test_formats import CHAT_TEMPLATE, HIDDEN, TARGET_LAYERS, _snapshot, _write, deepspec_eagle3, zlab_dflash


@pytest.fixture(scope="module")
def folders(tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    target = tiny_qwen3(len(tokenizer), layers=TARGET_LAYERS, hidden=HIDDEN, context=256, seed=5)
    target.config.eos_token_id = tokenizer.eos_token_id
    target.save_pretrained(root / "target")
    chat = copy.deepcopy(tokenizer)
    chat.chat_template = CHAT_TEMPLATE
    chat.save_pretrained(root / "target")
    g = torch.Generator().manual_seed(3)
    for name, (config, weights) in {"dflash": zlab_dflash(target, g), "eagle3": deepspec_eagle3(target, g)}.items():
        folder = _write(root, f"local/{name}", config, weights)
        (root / name).symlink_to(folder, target_is_directory=True)
    yield root
    for name in [n for n in PRESETS if is_custom(n)]:
        del PRESETS[name]


def _run(capsys, folders, *extra) -> tuple[int, dict | None, str]:
    out = folders / "run.json"
    out.unlink(missing_ok=True)
    status = main(["generate", "--target", str(folders / "target"), "--prompt", "def parse(self, text):",
                   "--max-new-tokens", "12", "--device", "cpu", "--json", str(out), *extra])
    err = capsys.readouterr().err
    return status, json.loads(out.read_text()) if out.exists() else None, err


def test_your_own_pair_runs_by_path_at_its_trained_block_and_is_named(folders, capsys):
    status, base, err = _run(capsys, folders, "--method", "baseline", "--chat", "off")
    assert status == 0, err
    drafter = f"dflash={folders / 'dflash'}"
    status, run, err = _run(capsys, folders, "--method", "dflash", "--drafter", drafter, "--chat", "off")
    assert status == 0, err
    assert run["output_ids"] == base["output_ids"] and len(run["output_ids"]) == 12
    assert run["preset"] == f"custom:{(folders / 'target').resolve()}" and run["config"]["drafts_per_step"] == 15  # z-lab's block 16: 15 drafts
    models = run["models"]
    assert models["drafter:dflash"]["path"] == str((folders / "dflash").resolve())
    weights = (folders / "dflash" / "model.safetensors").read_bytes()
    assert models["drafter:dflash"]["weights_sha256"] == hashlib.sha256(b"model.safetensors\0" + weights).hexdigest()
    assert models["target"]["name"] == str(folders / "target") and models["target"]["revision"] is None
    status, chat, err = _run(capsys, folders, "--method", "baseline", "--chat", "on", "--thinking", "on")
    assert status == 0 and chat["chat"] and chat["thinking"] and "<|im_start|>user" in chat["prompt"]
    assert "<think>" not in chat["prompt"]  # thinking on: the template leaves the empty think block out
    status, chat_off, _ = _run(capsys, folders, "--method", "baseline")  # auto: on, its tokenizer has a template
    assert chat_off["chat"] and chat_off["thinking"] is False and "</think>" in chat_off["prompt"]


def test_a_vocabulary_mismatch_is_one_line_before_any_weights_load(folders, tokenizer, capsys, tmp_path):
    small = tmp_path / "small-target"
    target = tiny_qwen3(len(tokenizer) - 100, layers=TARGET_LAYERS, hidden=HIDDEN, context=256)
    target.save_pretrained(small)
    tokenizer.save_pretrained(small)
    status = main(["generate", "--target", str(small), "--drafter", f"eagle3={folders / 'eagle3'}",
                   "--prompt", "x", "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and not (tmp_path / "x.json").exists()
    assert f"the tokenizer has {len(tokenizer)} tokens, more than the target's vocabulary of {len(tokenizer) - 100}" \
        in err[0] and f"eagle3: vocabulary {len(tokenizer)}" in err[0]


def test_a_target_folder_without_its_tokenizer_is_one_line(folders, capsys, tmp_path):
    """transformers reads a folder holding only a tokenizer config as an empty tokenizer, which encodes every prompt to
    nothing: refused by name before any weights load, not a crash inside the first forward."""
    bare = tmp_path / "bare-target"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        (bare / name).symlink_to(folders / "target" / name)
    status = main(["generate", "--target", str(bare), "--prompt", "def f(x):", "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "no tokenizer beside the target" in err[0], err
    assert not (tmp_path / "x.json").exists()


def test_every_mismatch_is_named_and_bad_flags_are_one_line(tmp_path):
    target = {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 8}
    drafter = {"vocab_size": 100, "hidden_size": 32, "num_target_layers": 24, "target_layer_ids": [1, 9]}
    problems = pair_problems(target, {"dspark": drafter}, 100)
    assert problems == ["dspark: hidden size 32, the target's 64", "dspark: trained on a 24-layer target, this one has 8",
                        "dspark: target_layer_ids [1, 9] outside the target's 8 layers"]
    assert pair_problems({**target, "architectures": ["Foo"], "auto_map": {}, "model_type": "foo"}, {}, 100) == [
        "the target is not a causal LM (architectures: ['Foo'])", "the target needs remote code (auto_map), which is never run"]
    assert parse_drafter("DFlash=./x") == ("dflash", "./x")
    for flag, message in [("dflash", "expected METHOD=PATH_OR_ID"), ("baseline=x", "no method 'baseline' takes")]:
        with pytest.raises(EngineError, match=message):
            parse_drafter(flag)
    with pytest.raises(EngineError, match="neither a folder nor in the local hub cache"):
        locate("someone/not-cached", cache_dir=str(tmp_path))
    snapshot = _snapshot(tmp_path, "someone/cached")
    (snapshot / "config.json").write_text("{}")
    assert locate("someone/cached", cache_dir=str(tmp_path)) == (snapshot, snapshot.name)  # pinned to its commit
    assert allowed("a/b", {}) and allowed("a/b", {"SPECLAB_ALLOWED_MODELS": "a/b, c/d"})
    assert not allowed("e/f", {"SPECLAB_ALLOWED_MODELS": "a/b,c/d"})
    assert main(["generate", "--drafter", "dflash=x", "--prompt", "x"]) == 2


def test_the_bench_runs_your_own_pair_and_names_its_weights(folders, capsys, tmp_path):
    from engine.measure import bench

    prompts = tmp_path / "p.txt"
    prompts.write_text("def parse(self, text):\nimport os\n")
    out = tmp_path / "bench.json"
    assert bench.main(["--target", str(folders / "target"), "--drafter", f"dflash={folders / 'dflash'}",
                       "--prompts", str(prompts), "--max-new-tokens", "6", "--device", "cpu", "--no-hf", "--chat", "off",
                       "--json", str(out)]) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    assert is_custom(report["preset"]) and report["drafts_per_block"] == 15 and report["identical_outputs"]
    assert set(report["weights"]) == {"target", "drafter:dflash"} and report["models"]["drafter:dflash"]["revision"] is None
    assert report["weights"]["drafter:dflash"] == report["models"]["drafter:dflash"]["weights_sha256"]
    assert report["prompts"]["format"] == "text" and report["chat"] is False


def test_the_app_serves_an_operators_own_pair_and_only_allowed_ids(folders, capsys, monkeypatch):
    import app.main
    from app.__main__ import main as app_main

    target, drafter = str(folders / "target"), f"dflash={folders / 'dflash'}"
    monkeypatch.setenv("SPECLAB_ALLOWED_MODELS", target)
    assert app_main(["--target", target, "--drafter", drafter]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {folders / 'dflash'} not on this server's list of models (SPECLAB_ALLOWED_MODELS)"]
    monkeypatch.setenv("SPECLAB_ALLOWED_MODELS", f"{target},{folders / 'dflash'}")
    served = []
    monkeypatch.setattr(app.main, "build_app", lambda engine, **kw: engine)
    monkeypatch.setattr(app.main, "launch", lambda engine, **kw: served.append(engine))
    # one torch thread, as the embedded models' preset runs: an operator's pair takes torch's default (a thread per
    # core), whose threads wait on each other at every operator when the cores are shared (seconds of CPU here)
    assert app_main(["--target", target, "--drafter", drafter, "--device", "cpu", "--threads", "1"]) == 0
    (engine,) = served
    try:  # run as a preset is, in an engine process of its own, with the same output as the pair run here
        from engine.loop import Engine
        from engine.process import EngineProcess

        assert isinstance(engine, EngineProcess) and engine.pid != os.getpid()
        assert is_custom(engine.preset) and "dflash" in engine.methods() and PRESETS[engine.preset].chat
        config = GenerationConfig(method="dflash", max_new_tokens=8)
        here = Engine.load(engine.preset, "cpu").generate("def parse(self, text):", config)
        assert engine.generate("def parse(self, text):", config).output_ids == here.output_ids
    finally:
        engine.close()


def test_the_about_tab_names_the_operators_checkpoints(folders):
    from app.tabs.about import checkpoints_text
    from engine.measure.pair import custom_preset, identities

    preset = custom_preset(str(folders / "target"), {"dflash": str(folders / "dflash")}).name
    text = checkpoints_text(preset)
    digest = identities(preset)["drafter:dflash"]["weights_sha256"]
    assert f"- drafter:dflash: `{folders / 'dflash'}`, weights sha256 `{digest[:16]}…`" in text
    assert checkpoints_text("tiny") == ""


def test_a_drafter_without_its_target_is_one_line_in_every_command(capsys):
    """The CLI, the bench and the app refuse `--drafter` without `--target` before loading anything, in the same
    words: one check (engine/measure/pair.py `preset_of_flags`) serves all three."""
    from app.__main__ import main as app_main
    from engine.measure import bench

    for run in (lambda: main(["generate", "--drafter", "dflash=x", "--prompt", "x"]),
                lambda: bench.main(["--drafter", "dflash=x", "--no-hf"]),
                lambda: app_main(["--drafter", "dflash=x"])):
        assert run() == 2
        assert capsys.readouterr().err.strip().splitlines() == ["error: --drafter needs --target (the model it drafts for)"]
