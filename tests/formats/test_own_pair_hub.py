"""Your own pair by hub id, end to end with nothing downloaded: a target and a drafter laid out as a local hub
cache lays them out (models--OWNER--NAME/refs/main and snapshots/COMMIT), the hub offline, run through the same
loading path as a folder (`--target ID --drafter METHOD=ID`); every output names each id and its snapshot."""

from __future__ import annotations

import json
import shutil

import huggingface_hub.constants

from engine.__main__ import main

from test_formats import _snapshot
from test_own_pair import _run, folders  # noqa: F401 - the module's checkpoints, by path

TARGET_ID, DRAFTER_ID = "someone/tiny-target", "someone/tiny-dflash"


def test_a_hub_id_in_the_local_cache_runs_as_its_folder_does_and_is_named_by_id(folders, capsys, tmp_path,  # noqa: F811
                                                                                monkeypatch):
    hub = tmp_path / "hub"
    for repo_id, folder in ((TARGET_ID, folders / "target"), (DRAFTER_ID, folders / "dflash")):
        snapshot = _snapshot(hub, repo_id)
        for file in folder.resolve().iterdir():
            shutil.copy(file, snapshot / file.name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))  # read once, at import
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

    drafter = f"dflash={folders / 'dflash'}"
    status, by_path, err = _run(capsys, folders, "--method", "dflash", "--drafter", drafter, "--chat", "off")
    assert status == 0, err
    out = tmp_path / "hub.json"
    status = main(["generate", "--target", TARGET_ID, "--drafter", f"dflash={DRAFTER_ID}", "--method", "dflash",
                   "--prompt", "def parse(self, text):", "--max-new-tokens", "12", "--device", "cpu", "--chat", "off",
                   "--json", str(out)])
    err = capsys.readouterr().err
    assert status == 0, err
    by_id = json.loads(out.read_text())
    assert by_id["output_ids"] == by_path["output_ids"] and by_id["config"]["drafts_per_step"] == 15
    commit = snapshot.name
    models = by_id["models"]
    assert models["target"]["name"] == TARGET_ID and models["target"]["revision"] == commit
    assert models["drafter:dflash"]["name"] == DRAFTER_ID and models["drafter:dflash"]["revision"] == commit
    assert models["drafter:dflash"]["weights_sha256"] == by_path["models"]["drafter:dflash"]["weights_sha256"]
    assert by_id["preset"] == f"custom:{hub / 'models--someone--tiny-target' / 'snapshots' / commit}"

    status = main(["generate", "--target", "someone/not-cached", "--prompt", "x", "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "neither a folder nor in the local hub cache" in err[0]
