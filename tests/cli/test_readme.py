"""The README's "Using the CLI" section, pasted into bash on a fresh home.

Every ``bash`` block of the section runs in one shell, in order, line by line
(a line's shell variables are there for the next ones, as in a terminal), with
the ``cursorops`` of this environment first on ``PATH``, a ``HOME`` and
``TMPDIR`` of the test's own and no ``CURSOROPS_*`` variable. Every line must
succeed: the ids the section uses must be ids its own commands made.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cursorops.cli import home as home_module

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Using the CLI"


def section_lines() -> list[str]:
    """The lines of the section's ``bash`` blocks, in order, without blank lines."""
    text = README.read_text()
    assert SECTION in text, f"{README} has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    assert blocks, f"no bash block under {SECTION!r}"
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert not any(line.endswith("\\") for line in lines), "keep each command on one line"
    return lines


def checked_script(lines: list[str], report: Path) -> str:
    """The lines, each followed by a check of its exit status (the first failure ends it)."""
    out = []
    for number, line in enumerate(lines, 1):
        shown = shlex.quote(line)
        out += [
            f"printf '+ %s\\n' {shown}",
            line,
            "status=$?",
            f"if [ \"$status\" -ne 0 ]; then printf 'README line %d failed (exit %d): %s\\n' "
            f'{number} "$status" {shown} >&2; exit 1; fi',
        ]
    out.append(f"printf '%s' \"$CURSOROPS_HOME\" > {shlex.quote(str(report))}")
    return "\n".join(out) + "\n"


def test_the_using_the_cli_section_runs_as_pasted(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "cursorops").exists(), f"no cursorops console script in {bin_dir}"
    temp, report = tmp_path / "tmp", tmp_path / "home-used"
    temp.mkdir()
    (tmp_path / "user").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "/usr/bin:/bin")]),
        HOME=str(tmp_path / "user"),
        TMPDIR=str(temp),
    )
    try:
        done = subprocess.run(
            ["bash", "--noprofile", "--norc"],
            input=checked_script(section_lines(), report),
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
            check=False,
        )
    finally:
        # A failure halfway must not leave a standalone serving a home of the section.
        for home in temp.iterdir():
            home_module.stop(str(home), None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    home = Path(report.read_text())
    assert home.parent == temp, f"the section must work on a fresh home, not {home}"
    # Pasted as it is, the section leaves nothing behind: its standalone stopped, its
    # home removed, nothing else in the temp folder it was given.
    assert home_module.status(str(home), None) is None, "the section left its standalone"
    assert list(temp.iterdir()) == [], sorted(p.name for p in temp.iterdir())
