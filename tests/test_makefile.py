"""The Makefile prints only what it runs: make echoes a recipe line that is a comment."""

from __future__ import annotations

from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def test_no_recipe_line_is_a_comment() -> None:
    echoed = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(MAKEFILE.read_text().splitlines(), 1)
        if line.startswith("\t") and line.strip().startswith("#")
    ]
    assert echoed == [], "move these comments above their rule (make prints them):\n" + "\n".join(
        echoed
    )


def test_make_test_runs_the_suite_inside_the_postgres_script() -> None:
    """The script's trap stops its server however the suite ends (tests/test_start_postgres.py)."""
    recipe = MAKEFILE.read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "bash scripts/start-postgres.sh -- " in recipe
