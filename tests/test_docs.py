"""The repository's text speaks to its users: no development-process vocabulary in tracked text files, and every
relative link of README.md and docs/*.md resolves to a file in the repository.

"stop N", "issue N" and "session" in the sense of a development session describe how SpecLab was built, not what it
is; references to files outside the repository (specification sections, notes, scratch runs) lead nowhere for a
reader. Gradio's browser session is the product's own meaning of "session" and stays: the patterns below target
development phrases, never the bare word, and the allowlist names the few lines that use a phrase in Gradio's sense.
"""

from __future__ import annotations

import re
import subprocess
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
    ("tests/test_step.py", "nothing run in this session yet"),
    ("tests/test_why.py", "nothing run in this session yet"),
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
    assert len(lines) < 150, f"README.md has {len(lines)} lines: keep it an entrance, move detail into docs/"
