"""Global options work before or after the command, every --help shows them, and
``standalone status`` and ``stop`` import no broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cursorops.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "argv",
    [
        ["--home", "/h", "-o", "json", "topics", "stats", "persistent://a/b/c"],
        ["topics", "stats", "--home", "/h", "-o", "json", "persistent://a/b/c"],
        ["topics", "--home", "/h", "stats", "-o", "json", "persistent://a/b/c"],
        ["topics", "stats", "persistent://a/b/c", "--home", "/h", "--output", "json"],
    ],
)
def test_global_options_are_accepted_anywhere(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.home, args.output, args.topic) == ("/h", "json", "persistent://a/b/c")


def test_an_option_given_nowhere_keeps_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CURSOROPS_HOME", "/from-env")
    args = build_parser().parse_args(["topics", "stats", "persistent://a/b/c"])
    assert (args.home, args.output, args.role) == ("/from-env", "text", None)


def test_after_the_command_the_last_given_wins() -> None:
    args = build_parser().parse_args(["--home", "/a", "standalone", "--home", "/b", "status"])
    assert args.home == "/b" and args.standalone_action == "status"


def test_a_command_s_own_flag_keeps_its_meaning() -> None:
    """grant-permission's --role names the grantee (pulsar-admin's flag); the global role
    goes before the command."""
    args = build_parser().parse_args(
        [
            "--role",
            "admin",
            "namespaces",
            "grant-permission",
            "a/b",
            "--role",
            "bob",
            "--actions",
            "consume",
        ]
    )
    assert args.role == "admin" and args.grantee == "bob"


@pytest.mark.parametrize(
    "argv", [["topics", "stats", "--help"], ["topics", "--help"], ["standalone", "--help"]]
)
def test_every_help_shows_the_global_options(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    shown = capsys.readouterr().out
    assert "global options" in shown
    for flag in ("--home", "--metadata-url", "--admin-url", "--output"):
        assert flag in shown, flag


@pytest.mark.parametrize("action", ["status", "stop"])
def test_status_and_stop_import_no_broker(action: str, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from cursorops.cli.main import main\n"
        f"code = main(['--home', {str(tmp_path)!r}, 'standalone', {action!r}])\n"
        "heavy = [m for m in "
        "('cursorops.wire.standalone', 'cursorops.core.services.broker', 'pandas') "
        "if m in sys.modules]\n"
        "print(code, heavy)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_usage_error_spells_out_a_control_character(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["tenants", "create", "admin", "\x1e\u202e"])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "cursorops: error: unrecognized arguments: \\u{001E}\\u{202E}"
