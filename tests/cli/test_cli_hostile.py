"""What only a real process shows: undecodable argv bytes, a reader that goes away.

The command runs in a new process with argv given as bytes, as a shell passes them.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_fuzz import _dump, _run

pytestmark = pytest.mark.e2e

TOPIC = "acme/ops/orders"


def run(
    home: Path, *args: str | bytes, stdout: int = subprocess.PIPE
) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    environment["CURSOROPS_HOME"] = str(home)
    command: list[str | bytes] = [sys.executable, "-m", "cursorops.cli.main", *args]
    return subprocess.run(
        command,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=Path(__file__).parents[2],
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for args in (
        ["tenants", "create", "acme"],
        ["namespaces", "create", "acme/ops"],
        ["topics", "create", TOPIC],
        ["topics", "create-subscription", TOPIC, "-s", "s", "-m", "earliest"],
    ):
        assert run(root, *args).returncode == 0
    return root


def one_error_line(result: subprocess.CompletedProcess) -> str:  # type: ignore[type-arg]
    lines = result.stderr.decode("utf-8").splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert b"Traceback" not in result.stderr
    return lines[0]


def test_payload_bytes_arrive_exactly(home: Path) -> None:
    """A payload is the bytes given on the command line, UTF-8 or not.

    docs/decisions/README.md#2026-11-23-a-produce-m-payload-is-the-exact-bytes-of-the-command-line
    """
    raw = b"caf\xe9 \xff\x00-end"[:-5] + b"\xfe\xfd"
    produced = run(home, "produce", TOPIC, "-m", raw, "-m", "plain")
    assert produced.returncode == 0, produced.stderr
    consumed = run(home, "-o", "json", "consume", TOPIC, "-s", "s", "-n", "5")
    got = json.loads(consumed.stdout)
    assert got[0]["payloadEncoding"] == "base64"
    assert base64.b64decode(got[0]["payload"]) == raw
    assert got[1]["payload"] == "plain"


def test_undecodable_key_in_a_real_process(home: Path) -> None:
    before = _dump(home)
    result = run(home, "produce", TOPIC, "-m", "x", "-k", b"k\xff")
    assert result.returncode == 2
    assert "not valid UTF-8" in one_error_line(result)
    assert _dump(home) == before


# In-process from here: os.fsdecode gives the very str Python makes of undecodable argv.


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("hostile-in-process")
    previous = os.environ.get("CURSOROPS_HOME")
    os.environ["CURSOROPS_HOME"] = str(root)
    try:
        for args in (
            ["tenants", "create", "acme"],
            ["namespaces", "create", "acme/ops"],
            ["topics", "create", TOPIC],
            ["topics", "create-subscription", TOPIC, "-s", "s", "-m", "earliest"],
            ["produce", TOPIC, "-m", "x", "-n", "3"],
        ):
            assert _run(args)[0] == 0
        yield root
    finally:
        if previous is None:
            os.environ.pop("CURSOROPS_HOME", None)
        else:
            os.environ["CURSOROPS_HOME"] = previous


@pytest.mark.parametrize(
    "args",
    [
        ["produce", TOPIC, "-m", "x", "-k", os.fsdecode(b"k\xff")],
        ["produce", TOPIC, "-m", "x", "-p", os.fsdecode(b"a=\xff")],
        ["consume", TOPIC, "-s", os.fsdecode(b"s\xff")],
        ["topics", "create-subscription", TOPIC, "-s", os.fsdecode(b"\xffsub")],
        ["topics", "create-subscription", TOPIC, "-s", "a\x00b"],
        ["topics", "create-subscription", TOPIC, "-s", "x", "-m", "1:4294967296"],
        ["topics", "create-subscription", TOPIC, "-s", "x", "-p", "entryFilter.oops.key=1"],
        ["topics", "update-subscription-properties", TOPIC, "-s", "s", "-p", "entryFilter.x=1"],
        ["topics", "update-subscription-properties", TOPIC, "-s", "s"],
        ["topics", "unsubscribe", TOPIC, "-s", "nope"],
        ["topics", "create", os.fsdecode(b"acme/ops/t\xff")],
        ["topics", "create", "acme/ops/t\n"],
        ["topics", "create", " acme/ops/t"],
        ["produce", TOPIC, "-m", "x", "--deliver-after", "90"],
        ["--role", os.fsdecode(b"r\xff"), "topics", "stats", TOPIC],
        ["produce", TOPIC, "-m", "x", "--deliver-after", "99999999999999y"],
        ["produce", TOPIC, "-m", "x", "--deliver-after", "292471208y"],
        ["produce", TOPIC, "-m", "x", "--deliver-at", "99999999999999999999"],
        ["produce", TOPIC, "-m", "x", "--deliver-at", "²"],
        ["produce", TOPIC, "-m", "x", "-n", "99999999999999"],
        ["topics", "reset-cursor", TOPIC, "-s", "s", "-t", "99999999999999y"],
        ["topics", "create-partitioned-topic", "acme/ops/p", "-p", "3000000000"],
        ["demo", "--partitions", "3000000000"],
        ["tenants", "create", ".."],
        ["tenants", "create", "."],
        ["tenants", "create", "a\n"],
        ["namespaces", "create", "acme/.."],
        ["topics", "create", "acme/ops/" + "x" * 300],
        ["topics", "stats", TOPIC + "-partition-0"],
    ],
)
def test_hostile_values_are_one_line_and_change_nothing(seeded: Path, args: list[str]) -> None:
    before = _dump(seeded)
    code, _out, err = _run(args)
    assert code in (2, 3, 5), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert _dump(seeded) == before


INTEGER_OPTIONS = [
    ["topics", "create-partitioned-topic", "acme/ops/p", "-p"],
    ["produce", TOPIC, "-m", "x", "-n"],
    ["produce", TOPIC, "-m", "x", "--batch-size"],
    ["consume", TOPIC, "-s", "s", "--ack", "-n"],
    ["topics", "peek-messages", TOPIC, "-s", "s", "-n"],
    ["topics", "analyze-backlog", TOPIC, "--spark-threshold"],
    ["audit", "history", TOPIC, "--limit"],
    ["demo", "--partitions"],
]


@pytest.mark.parametrize("value", ["１２", "٣", "²", "+2", " 2", "2 ", "1_0", "2\n"])
@pytest.mark.parametrize("command", INTEGER_OPTIONS, ids=lambda c: c[-1] + "@" + c[1])
def test_integer_options_take_ascii_digits_only(
    seeded: Path, command: list[str], value: str
) -> None:
    """As the REST body's numbers and the times: int() alone takes '１２', '٣', '+2', ' 2'."""
    before = _dump(seeded)
    code, _out, err = _run([*command, value])
    assert code == 2, err
    assert err.splitlines()[-1].count("error: ") == 1
    assert "ASCII decimal" in err
    assert _dump(seeded) == before


def test_output_into_head_exits_quietly(home: Path) -> None:
    assert run(home, "produce", TOPIC, "-m", "x" * 100, "-n", "5000").returncode == 0
    reader = subprocess.Popen(
        ["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    assert reader.stdin is not None
    result = run(
        home,
        "topics",
        "peek-messages",
        TOPIC,
        "-s",
        "s",
        "-n",
        "5000",
        stdout=reader.stdin.fileno(),
    )
    reader.stdin.close()
    reader.wait()
    assert result.returncode == 141
    assert result.stderr == b""


def test_a_history_limit_beyond_any_store_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Found by the fuzz: a --limit no SQL integer holds was an unexpected error."""
    from cursorops.cli.main import main

    code = main(["--home", str(tmp_path), "audit", "history", "a/b/c", "--limit", "9" * 23])
    assert code == 2


def test_text_output_spells_out_what_would_reorder_hide_or_forge_a_line(tmp_path: Path) -> None:
    """A right-to-left override in a key or a subscription name, a zero-width space in a
    property and a newline in a payload are printed as their code points: one line per
    message, every other character (any script) as written; JSON keeps the exact text."""
    topic, sub = "acme/ops/legible", "**APPROVED** | \u202eevil"
    for args in (
        ["tenants", "create", "acme"],
        ["namespaces", "create", "acme/ops"],
        ["topics", "create", topic],
        ["topics", "create-subscription", topic, "-s", sub, "-m", "earliest"],
        ["produce", topic, "-m", "Grüße 顧客\nFORGED line", "-k", "inv\u202egnp.exe"],
        ["produce", topic, "-m", "two", "-p", "note=a\u200bb"],
    ):
        assert run(tmp_path, *args).returncode == 0
    peek = run(tmp_path, "topics", "peek-messages", topic, "-s", sub, "-n", "2")
    assert peek.returncode == 0, peek.stderr
    text = peek.stdout.decode("utf-8")
    assert len(text.splitlines()) == 2, text
    assert "key=inv\\u{202E}gnp.exe" in text and "note=a\\u{200B}b" in text
    assert "payload=Grüße 顧客\\u{000A}FORGED line" in text
    listed = run(tmp_path, "topics", "subscriptions", topic).stdout.decode("utf-8")
    assert "**APPROVED** | \\u{202E}evil" in listed
    for shown in (text, listed):
        assert not any(unicodedata.category(c) in {"Cc", "Cf"} for c in shown.replace("\n", ""))
    exact = json.loads(
        run(tmp_path, "-o", "json", "topics", "peek-messages", topic, "-s", sub).stdout
    )
    assert (
        exact[0]["key"] == "inv\u202egnp.exe" and exact[0]["payload"] == "Grüße 顧客\nFORGED line"
    )


def test_an_error_names_a_hostile_value_legibly(tmp_path: Path) -> None:
    result = run(tmp_path, "topics", "stats", "acme/ops/no\u202eexist")
    line = one_error_line(result)
    assert "\u202e" not in line and "no\\u202eexist" in line


def test_a_reason_is_limited_in_the_characters_typed(seeded: Path) -> None:
    """500 "€" travel in a 4,507-character header and pass; the refusal of 501 counts what
    was typed, not what the header carried."""
    command = ["topics", "reset-cursor", TOPIC, "-s", "s", "-t", "0"]
    before = _dump(seeded)
    for extra, refusal in (
        (["--reason", "€" * 501], "reason is 501 characters; at most 500"),
        (["--reason", "ok", "--ticket", "😀" * 257], "ticket is 257 characters; at most 256"),
    ):
        code, _out, err = _run([*command, *extra])
        assert code == 2, err
        assert err.splitlines() == [f"error: {refusal}"]
        assert _dump(seeded) == before
    code, _out, err = _run([*command, "--reason", "€" * 500, "--ticket", "😀" * 256])
    assert code == 0, err
