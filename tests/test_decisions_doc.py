"""docs/decisions/ stays one index and its files, and every reference to a decision resolves.

The index (``docs/decisions/README.md``) links every decision file and holds, as one
anchored sentence each, the decisions that need no file. A reference elsewhere names a
file (``docs/decisions/<slug>.md``) or an anchor of the index (``README.md#<slug>``);
either must exist, so a folded or renamed decision cannot leave a link behind.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "docs" / "decisions"
INDEX = (DECISIONS / "README.md").read_text(encoding="utf-8")

FILE_REFERENCE = re.compile(r"decisions/(\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md)")
INDEX_REFERENCE = re.compile(r"decisions/README\.md#([a-z0-9-]+)")
INDEX_LINK = re.compile(r"\]\((\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md)\)")
LOCAL_ANCHOR = re.compile(r"\]\(README\.md#([a-z0-9-]+)\)")
ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')


def decision_files() -> set[str]:
    return {path.name for path in DECISIONS.glob("????-??-??-*.md")}


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    suffixes = {".md", ".py", ".sh", ".toml", ".yml", ".yaml", ".cfg", ".js", ".txt"}
    paths = [ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.is_file() and (p.suffix in suffixes or p.name == "Makefile")]


def test_every_decision_file_is_in_the_index() -> None:
    linked = {match.group(1) for match in INDEX_LINK.finditer(INDEX)}
    assert sorted(decision_files() - linked) == []
    assert sorted(linked - decision_files()) == []


def test_index_anchors_are_unique_and_name_no_file() -> None:
    anchors = ANCHOR.findall(INDEX)
    assert len(anchors) == len(set(anchors))
    clashing = [a for a in anchors if f"{a}.md" in decision_files()]
    assert clashing == [], "a decision is both a file and an index line"


def test_every_decision_file_has_its_sections() -> None:
    incomplete = []
    for name in sorted(decision_files()):
        text = (DECISIONS / name).read_text(encoding="utf-8")
        wanted = ("\n- Date: ", "\n## Context\n", "\n## Decision\n", "\n## Consequences\n")
        if not text.startswith("# ") or not all(part in text for part in wanted):
            incomplete.append(name)
    assert incomplete == []


def test_every_reference_to_a_decision_resolves() -> None:
    files = decision_files()
    anchors = set(ANCHOR.findall(INDEX))
    dangling = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        where = path.relative_to(ROOT).as_posix()
        dangling += [f"{where}: {m}" for m in FILE_REFERENCE.findall(text) if m not in files]
        dangling += [f"{where}: #{m}" for m in INDEX_REFERENCE.findall(text) if m not in anchors]
        if path.parent == DECISIONS:
            dangling += [f"{where}: {m}" for m in INDEX_LINK.findall(text) if m not in files]
            dangling += [f"{where}: #{m}" for m in LOCAL_ANCHOR.findall(text) if m not in anchors]
    assert dangling == []
