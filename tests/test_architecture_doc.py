"""docs/architecture.md names every module of ``core``: the map stays true to the code."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def modules() -> list[str]:
    core = ROOT / "core"
    return sorted(
        path.relative_to(core).as_posix()
        for path in core.rglob("*.py")
        if path.name != "__init__.py" or path.parent == core
        if "migrations/versions" not in path.as_posix()
    )


def test_every_core_module_is_in_the_module_map() -> None:
    missing = [name for name in modules() if f"`{name}`" not in DOC]
    assert missing == [], f"docs/architecture.md does not name {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    section = DOC.split("## Module map of `core/`", 1)[1].split("\n## ", 1)[0]
    named = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    gone = [name for name in named if not (ROOT / "core" / name).exists()]
    assert named
    assert gone == [], f"docs/architecture.md names modules that do not exist: {gone}"
