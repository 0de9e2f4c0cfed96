"""The repository's text speaks to its users: no development-process vocabulary in tracked text files, and every
relative link of README.md and docs/*.md resolves to a file in the repository.

"stop N", "issue N" and "session" in the sense of a development session describe how SpecLab was built, not what it
is; references to files outside the repository (specification sections, notes, scratch runs) lead nowhere for a
reader. Gradio's browser session is the product's own meaning of "session" and stays: the patterns below target
development phrases, never the bare word, and the allowlist names the few lines that use a phrase in Gradio's sense.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

from conftest import ROOT

TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".json", ".toml", ".ini", ".yml", ".yaml", ".cfg"}
TEXT_NAMES = {"Dockerfile"}
THIS_FILE = "tests/test_docs.py"  # it spells out every pattern

# Development-process vocabulary: pattern -> what it is.
FORBIDDEN = {
    r"\b[Ss]tops? \d+": '"stop N": a step of development',
    r"\b[Ii]ssues? #?\d+": '"issue N": a development ticket',
    r"\b[Tt]he issue's\b": "a development ticket",
    r"\bSPEC\b": "a specification outside the repository",
    r"DEVELOPERS\.md": "a file outside the repository",
    r"docs/UX": "a file outside the repository",
    r"\bruns/s\d+\b": "a scratch folder outside git",
    r"/work/\w": "an absolute path of a development machine",
    r"(?i)\b(?:this|that|an earlier|earlier|last|previous|next|later|another) session\b": "a development session",
    r"(?i)\ba session's\b": "a development session",
    r"(?i)\bsession's machine\b": "a development session",
    r"(?i)\b(?:in|within|during) a session\b": "a development session",
    r"(?i)\bthe session ended\b": "a development session",
}
FORBIDDEN_RE = {re.compile(pattern): what for pattern, what in FORBIDDEN.items()}

# Lines that use a phrase above in Gradio's sense (a visitor's browser session): (path, text on the line).
ALLOWED = {
    ("app/tabs/step.py", "No run yet in this session"),
    ("tests/app/test_step.py", "nothing run in this session yet"),
    ("tests/app/test_why.py", "nothing run in this session yet"),
}


@cache
def tracked_files() -> tuple[str, ...]:
    """The repository's files as git knows them; without git (an exported tree) every file but build outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30).stdout
        return tuple(name for name in out.decode("utf-8").split("\0") if name)
    except (OSError, subprocess.SubprocessError):
        skipped = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", "node_modules"}
        return tuple(str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                     if p.is_file() and not skipped & set(p.relative_to(ROOT).parts))


def text_files() -> list[str]:
    """Tracked text files the vocabulary check reads: not this file, and not the data files under assets/."""
    names = []
    for name in tracked_files():
        path = Path(name)
        if name == THIS_FILE or (path.parts[0] == "assets" and path.suffix == ".json"):
            continue
        if (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES) and (ROOT / path).is_file():
            names.append(name)
    return names


def vocabulary_findings(name: str, text: str) -> list[str]:
    findings = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in FORBIDDEN_RE.items():
            match = pattern.search(line)
            if match and not any(path == name and allowed in line for path, allowed in ALLOWED):
                findings.append(f"{name}:{number}: {match.group(0)!r} ({what}): {line.strip()[:120]}")
    return findings


def test_no_development_vocabulary_in_tracked_text():
    files = text_files()
    assert "README.md" in files and any(name.startswith("docs/") for name in files), "the check found no docs"
    findings = []
    for name in files:
        findings += vocabulary_findings(name, (ROOT / name).read_text(encoding="utf-8", errors="replace"))
    assert not findings, "development-process vocabulary (say what the thing is, not how it was built):\n" + \
        "\n".join(findings)


def test_the_vocabulary_check_can_fail():
    assert vocabulary_findings("docs/x.md", "as measured in stop 3, then")
    assert vocabulary_findings("docs/x.md", "Issue 9 asks for it")
    assert vocabulary_findings("docs/x.md", "on this session's machine")
    assert vocabulary_findings("docs/x.md", "see SPEC §4 and DEVELOPERS.md")
    assert vocabulary_findings("app/tabs/step.py", "measured in an earlier session")
    # Gradio's browser session, and the allowlisted line, are fine
    assert not vocabulary_findings("app/x.py", "one file per browser session; the session's last comparison")
    assert not vocabulary_findings("app/tabs/step.py", 'NO_RUN = "No run yet in this session: run a comparison"')
    assert not vocabulary_findings("app/x.py", "Stop ends your own run; stops after 180 s")


# --- links -------------------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def markdown_files() -> list[str]:
    return sorted(name for name in tracked_files()
                  if name == "README.md" or (name.startswith("docs/") and name.endswith(".md")))


def prose(text: str) -> str:
    """Markdown without code blocks and code spans, where link syntax is literal."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


@cache
def anchors(path: Path) -> frozenset[str]:
    """The fragment of each heading of a markdown file, as GitHub makes it (lower case, punctuation dropped,
    spaces to hyphens, repeats numbered)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(out)


def broken_links(name: str) -> list[str]:
    source = ROOT / name
    tracked = set(tracked_files())
    broken = []
    for target in LINK.findall(prose(source.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        path = (source.parent / file_part).resolve() if file_part else source
        try:
            relative = path.relative_to(ROOT).as_posix()
        except ValueError:
            broken.append(f"{name}: {target} (outside the repository)")
            continue
        if not path.exists() or not (relative in tracked or any(t.startswith(relative + "/") for t in tracked)):
            broken.append(f"{name}: {target} (no such file in the repository)")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{name}: {target} (no heading #{fragment} in {relative})")
    return broken


def test_relative_links_resolve():
    files = markdown_files()
    assert "README.md" in files and "docs/benchmarks.md" in files
    broken = [problem for name in files for problem in broken_links(name)]
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_readme_is_an_entrance():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 90, f"README.md has {len(lines)} lines: keep it an entrance, move detail into docs/"


# --- the README's commands ---------------------------------------------------------------------------------------

README_COMMAND = re.compile(r"\bbash ((?:scripts|\.ci)/[\w./-]+)|\bpython -m ([\w.]+)|\bpython ((?:scripts)/[\w./-]+)"
                            r"|(?<![\w/])(\.ci/run)\b")
PACKAGES = ("engine", "app")
CHEAP_HELP = ("app", "engine")  # modules whose --help answers without importing torch


def readme_commands(text: str) -> tuple[set[str], set[str]]:
    """The files (scripts, .ci/run) and the modules (`python -m X`) a README names."""
    files, modules = set(), set()
    for script, module, python_script, ci in README_COMMAND.findall(text):
        files.update(name for name in (script, python_script, ci) if name)
        if module:
            modules.add(module)
    return files, modules


def module_file(module: str) -> Path | None:
    """The file `python -m MODULE` runs, under engine/ or app/, or None."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def readme_command_problems(text: str) -> list[str]:
    files, modules = readme_commands(text)
    problems = [f"{name}: no such file" for name in sorted(files) if not (ROOT / name).is_file()]
    problems += [f"python -m {module}: no module file under {' or '.join(PACKAGES)}/"
                 for module in sorted(modules) if module_file(module) is None]
    return problems


def test_the_readmes_commands_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    files, modules = readme_commands(text)
    assert {"scripts/run.sh", "scripts/test.sh", ".ci/run"} <= files, f"the README's commands: {sorted(files)}"
    assert not readme_command_problems(text), "commands the README names that do not exist:\n" + \
        "\n".join(readme_command_problems(text))
    # what the README says of them: run.sh hands its options to the app, .ci/run runs exactly the test command
    assert 'python -m app "$@"' in (ROOT / "scripts/run.sh").read_text(encoding="utf-8").splitlines()[-1]
    assert "exec bash scripts/test.sh" in (ROOT / ".ci/run").read_text(encoding="utf-8")


def test_the_readmes_cheap_commands_run():
    _, modules = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert set(CHEAP_HELP) <= {module.split(".")[0] for module in modules}
    for module in CHEAP_HELP:
        done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "usage" in done.stdout.lower(), \
            f"python -m {module} --help: status {done.returncode}\n{done.stderr[-2000:]}"


def test_the_command_check_can_fail():
    assert readme_command_problems("Then `bash scripts/no_such_script.sh` serves it.")
    assert readme_command_problems("Measure with `python -m engine.measure.no_such_tool`.")
    assert readme_command_problems("Or `python -m nowhere`.")
    assert readme_command_problems("Or `.venv/bin/python scripts/no_such.py`.")
    assert not readme_command_problems("`bash scripts/run.sh --port 8000` then `python -m app --help`; `.ci/run`")


# --- figures that come from a recording -------------------------------------------------------------------------

def test_the_docs_generated_blocks_are_what_the_recordings_give():
    """The model card's speed tables in docs/benchmarks.md, the lesson's figures there, and the goals table of
    docs/embedded-models.md are written from the recordings (scripts/record_docs.py, run by `python -m
    scripts.record`); after a recording or a change to the words that judge its numbers, run it again."""
    from scripts import record_docs

    assert {name for name, _ in record_docs.BLOCKS} >= {"docs/benchmarks.md", "docs/embedded-models.md"}
    assert not record_docs.differences(), ("generated blocks that differ from the recordings (python -m "
                                           "scripts.record_docs writes them): " + ", ".join(record_docs.differences()))


def test_the_generated_block_check_can_fail():
    from scripts import record_docs

    name, block = next(iter(record_docs.BLOCKS))
    text = (ROOT / name).read_text(encoding="utf-8")
    edited = record_docs.replaced(text, block, "DFlash 9.99× — met")
    assert edited != record_docs.replaced(edited, block, record_docs.BLOCKS[(name, block)]())
    assert record_docs.replaced(edited, block, "same") == record_docs.replaced(text, block, "same")
    try:
        record_docs.replaced("no markers here", block, "x")
    except ValueError as exc:
        assert "marker" in str(exc)
    else:
        raise AssertionError("a file without the block's markers was not refused")


def test_the_goal_verdicts_follow_the_numbers(monkeypatch):
    from scripts import record_docs

    card = record_docs.card()
    for speedup, verdict in ((1.5, "missed"), (2.5, "met")):
        for kind in ("quiet", "busy"):
            card["bench"][kind]["lanes"]["dflash"]["speedup"] = speedup
        monkeypatch.setattr(record_docs, "card", lambda: card)
        row = next(line for line in record_docs.goals().splitlines() if line.startswith("| DFlash ≥ 2×"))
        assert row.endswith(f"— {verdict} |"), row


def test_the_card_blocks_sampling_words_come_from_the_preset():
    """What each drafter drafts with above 0, read from the preset and the folders it names: weights of their own, one
    set with a calibration at T = 1 in its config, one set whose last phase learned from the sampled rows too (the
    shipped DFlash), or the weights of temperature 0."""
    from engine.contract.presets import Preset
    from engine.train.card import sampling_weights

    preset = Preset("p", "target", "tokenizer",
                    drafters={"eagle3": "eagle3-drafter", "classic": "small-lm-drafter", "dflash": "dflash-drafter",
                              "dspark": "dspark-drafter"},
                    sampled_drafters={"eagle3": "eagle3-drafter-sampled", "dspark": "dspark-drafter"})
    assert sampling_weights(preset) == ("EAGLE-3's weights trained for it, DSpark's one set of weights with its T = 1 "
                                        "calibration, DFlash's one set of weights trained at both temperatures, "
                                        "Classic's own weights, as at temperature 0")
    both = Preset("p", "target", "tokenizer", drafters={"eagle3": "eagle3-drafter", "dflash": "dflash-drafter"},
                  sampled_drafters={"eagle3": "eagle3-drafter-sampled", "dflash": "dflash-drafter-sampled"})
    assert sampling_weights(both) == "EAGLE-3's and DFlash's weights trained for it"


def test_one_set_trained_on_sampled_rows_is_named_for_both_temperatures(tmp_path):
    """A drafter with no weights of its own for sampling and no T = 1 calibration, whose last phase learned from the
    target's sampled rows too (its training record says so), drafts at both temperatures with what it was trained for."""
    import shutil

    from engine.contract.presets import ASSETS_DIR, Preset
    from engine.train.card import sampling_weights

    folder = tmp_path / "dflash-one-set"
    folder.mkdir()
    shutil.copy(ASSETS_DIR / "dflash-drafter" / "config.json", folder)
    record = json.loads((ASSETS_DIR / "dspark-drafter" / "training.json").read_text(encoding="utf-8"))
    (folder / "training.json").write_text(json.dumps(record), encoding="utf-8")
    assert "sampled" in record["rows"]
    one_set = Preset("p", "target", "tokenizer", drafters={"dflash": str(folder)})
    assert sampling_weights(one_set) == "DFlash's one set of weights trained at both temperatures"
    record.pop("rows")  # its last phase then reads as the target's continuations of the corpus, greedy or not
    (folder / "training.json").write_text(json.dumps(record), encoding="utf-8")
    assert sampling_weights(one_set) == "DFlash's own weights, as at temperature 0"
