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


def _recipe(target: str) -> str:
    return MAKEFILE.read_text().split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_make_test_runs_every_test() -> None:
    """No marker expression: the whole suite, the fast tier included."""
    assert " -m " not in _recipe("test")


def test_make_check_runs_the_gates_then_the_fast_tier_on_sqlite() -> None:
    import tomllib

    recipe = _recipe("check")
    assert recipe.startswith(" lint\n"), "make check runs the gates first"
    assert '-m "$(CHECK_MARKERS)"' in recipe
    assert "start-postgres.sh" not in recipe
    line = next(
        line for line in MAKEFILE.read_text().splitlines() if line.startswith("CHECK_MARKERS :=")
    )
    terms = line.split(":=", 1)[1].strip().split(" and ")
    assert all(term.startswith("not ") for term in terms), line
    excluded = {term.removeprefix("not ") for term in terms}
    assert excluded == {"slow", "airflow", "spark", "e2e", "postgres"}
    pyproject = tomllib.loads((MAKEFILE.parent / "pyproject.toml").read_text())
    declared = {
        marker.split(":", 1)[0] for marker in pyproject["tool"]["pytest"]["ini_options"]["markers"]
    }
    assert excluded <= declared, "every marker of the fast tier is declared (--strict-markers)"


def test_the_install_shows_progress() -> None:
    """The long install prints what it collects (a line every few seconds), not nothing for
    minutes."""
    install = [line for line in _recipe("$(STAMP)").splitlines() if "-e '.[" in line]
    assert install and " -q" not in install[0]


def test_a_run_keeps_only_failed_tests_base_folders() -> None:
    import tomllib

    options = tomllib.loads(MAKEFILE.with_name("pyproject.toml").read_text())["tool"]["pytest"]
    assert options["ini_options"]["tmp_path_retention_policy"] == "failed"
