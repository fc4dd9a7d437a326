"""Hostile values for every subcommand and flag of ``cursorops``, run in-process.

Each example runs ``cursorops.cli.main.main(argv)`` against one seeded home and checks the
contract of the command line:

- the exit code is one of the documented ones, and never 1 (unexpected: a bug)
  nor 6 (a store failure caused by input that should have been refused first);
- a refused command writes exactly one line on stderr, ``error: ...``, or
  argparse's usage and its one ``error:`` line (exit 2);
- a refused command changes nothing: every metadata row and every ledger file
  are the same before and after.

The parser is walked, so a new subcommand or flag is fuzzed without editing this
file. Not fuzzed: ``--home`` and ``--metadata-url`` (they choose the installation)
and the Spark engine's flags (``--engine`` is fixed to ``python``: starting a JVM
per example would not test input handling). ``demo`` (each of its stories) and
``standalone`` check their arguments as usual, then do nothing: a real one would
start Airflow, or a server that serves until it is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.cli import demo as cli_demo
from cursorops.cli import main as cli_main
from cursorops.cli import protocol_demo as cli_protocol_demo
from cursorops.cli import standalone_home as cli_standalone_home
from cursorops.wire import standalone as protocol_standalone

HOSTILE = [
    "",
    " ",
    "0",
    "-1",
    "--1",
    "99999999999999999999999",
    "9223372036854775808",
    "-9223372036854775809",
    "3000000000",
    "１２",
    "٣",
    "²",
    "\x00",
    "a\x00b",
    "\udcff",
    "x\udc80y",
    "x" * 5000,
    "..",
    ".",
    "a\nb",
    "1:4294967296",
    "1:-1",
    "1:0:-5",
    "99999999999999y",
    "ℌ",
    "=",
    "entryFilter.bogus=1",
    "entryFilter.reject.publishTime.after=soon",
    "persistent://acme/ops/",
    "acme/ops/spread-partition-99",
]

TOPICS = ["acme/ops/orders", "acme/ops/spread", "persistent://acme/ops/spread-partition-1"]
VALID: dict[str, list[str]] = {
    "topic": TOPICS,
    "subscription": ["shared", "excl", "fresh"],
    "namespace": ["acme/ops", "acme/new"],
    "tenant": ["acme", "newco"],
    "grantee": ["app"],
    "actions": ["consume", "produce,consume"],
    "admin_roles": ["boss"],
    "message_id": ["earliest", "latest", "LEDGER:0"],
    "triplets": ["LEDGER:0", "LEDGER:1:0"],
    "message_ids": ["LEDGER:0", "(LEDGER,1,-1,-1)"],
    "base64_ids": ["CAEQAA=="],
    "count": ["1", "2"],
    "num_messages": ["1", "3"],
    "num_produce": ["1", "2"],
    "batch_size": ["1", "2"],
    "partitions": ["1", "2"],
    "type": ["Shared", "Exclusive", "Key_Shared", "Failover"],
    "property": ["team=a", "entryFilter.reject.key=k"],
    "properties": ["a=b", "a=b,c=d"],
    "time": ["10m", "0"],
    "deliver_after": ["1s"],
    "deliver_at": ["0", "2030-01-01T00:00:00Z"],
    "key": ["k"],
    "messages": ["hello"],
    "role": ["admin", "app", "boss"],
    "output": ["text", "json"],
}
FIXED = {"engine": "python"}
SKIPPED = {"spark_threshold", "file", "help", "home", "metadata_url"}
EXIT_OK = {0, 2, 3, 4, 5}


def _subcommands(
    parser: argparse.ArgumentParser, path: list[str]
) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not children or not children[0].required:
        # A command of its own too when its subcommands are optional (``standalone``).
        yield path, parser
    for child_action in children[:1]:
        for name, child in child_action.choices.items():
            yield from _subcommands(child, [*path, name])


PARSER = cli_main.build_parser()
COMMANDS = list(_subcommands(PARSER, []))


def _value(dest: str, ledger: int) -> st.SearchStrategy[str]:
    """Mostly a valid value when there is one, so the commands also get past the parser."""
    valid = [v.replace("LEDGER", str(ledger)) for v in VALID.get(dest, [])]
    hostile = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))
    if not valid:
        return hostile
    return st.integers(0, 9).flatmap(lambda n: st.sampled_from(valid) if n < 7 else hostile)


@st.composite
def _argv(draw: st.DrawFn, ledger: int) -> list[str]:
    argv: list[str] = []
    for action in PARSER._actions:
        if action.dest == "role" and draw(st.booleans()):
            argv += ["--role", draw(_value("role", ledger))]
    path, parser = draw(st.sampled_from(COMMANDS))
    argv += path
    exclusive: dict[int, list[argparse.Action]] = {}
    for group in parser._mutually_exclusive_groups:
        for action in group._group_actions:
            exclusive.setdefault(id(group), []).append(action)
    chosen_in_group = {key: draw(st.sampled_from(actions)) for key, actions in exclusive.items()}
    in_groups = {id(a): key for key, actions in exclusive.items() for a in actions}
    for action in parser._actions:
        if action.dest in SKIPPED or isinstance(
            action, (argparse._HelpAction, argparse._SubParsersAction)
        ):
            continue
        if not action.option_strings:
            argv.append(draw(_value(action.dest, ledger)))
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.dest in FIXED:
            argv += [flag, FIXED[action.dest]]
            continue
        group = in_groups.get(id(action))
        if group is not None:
            # Sometimes two of a group, which argparse must refuse (usage, exit 2).
            wanted = chosen_in_group[group] is action or draw(st.integers(0, 9)) == 0
        else:
            wanted = action.required or draw(st.booleans())
        if not wanted:
            continue
        if action.nargs == 0:
            argv.append(flag)
            continue
        count = draw(st.integers(1, 3)) if action.nargs in ("+", "*") else 1
        argv += [flag, *(draw(_value(action.dest, ledger)) for _ in range(count))]
    return argv


def _dump(home: Path) -> tuple[object, ...]:
    """Every row of every metadata table, and every ledger file's size and mtime."""
    connection = sqlite3.connect(home / "metadata.db")
    try:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        tables = tuple(
            (name, tuple(sorted(map(repr, connection.execute(f'SELECT * FROM "{name}"')))))
            for name in names
        )
    finally:
        connection.close()
    files = []
    for folder, _dirs, entries in os.walk(home / "ledgers"):
        for entry in entries:
            stat = os.stat(os.path.join(folder, entry))
            files.append((os.path.join(folder, entry), stat.st_size, stat.st_mtime_ns))
    return tables, tuple(sorted(files))


def _no_demo(*_args: object, **_kwargs: object) -> dict[str, object]:
    return {"ok": True}


def _no_standalone(*_args: object, **_kwargs: object) -> int:
    return 0


def _run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr encoded as a real process's are."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(
        err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True
    )
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out_bytes.getvalue().decode(), err_bytes.getvalue().decode()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    root = tmp_path_factory.mktemp("fuzz") / "home"
    seed = [
        ["tenants", "create", "acme", "--admin-roles", "boss"],
        ["namespaces", "create", "acme/ops"],
        ["namespaces", "grant-permission", "acme/ops", "--role", "app", "--actions", "produce"],
        ["topics", "create", "acme/ops/orders"],
        ["topics", "create-partitioned-topic", "acme/ops/spread", "-p", "3"],
        [
            "topics",
            "create-subscription",
            "acme/ops/orders",
            "-s",
            "shared",
            "--type",
            "Shared",
            "-m",
            "earliest",
        ],
        ["topics", "create-subscription", "acme/ops/orders", "-s", "excl", "-m", "earliest"],
        [
            "topics",
            "create-subscription",
            "acme/ops/spread",
            "-s",
            "shared",
            "--type",
            "Shared",
            "-m",
            "earliest",
        ],
        ["produce", "acme/ops/orders", "-m", "a", "-m", "b", "-n", "3", "--batch-size", "2"],
        ["produce", "acme/ops/spread", "-m", "c", "-n", "6"],
    ]
    previous = os.environ.get("CURSOROPS_HOME")
    os.environ["CURSOROPS_HOME"] = str(root)
    try:
        with pytest.MonkeyPatch.context() as patch:
            # Not this test process's name in ps.
            patch.setattr(cli_standalone_home, "_set_title", lambda _title: None)
            patch.setattr(cli_demo, "run", _no_demo)
            patch.setattr(cli_protocol_demo, "run", _no_demo)
            patch.setattr(protocol_standalone, "run", _no_standalone)
            for argv in seed:
                code, _out, err = _run(argv)
                assert code == 0, (argv, err)
            code, out, _err = _run(
                ["-o", "json", "topics", "peek-messages", "acme/ops/orders", "-s", "shared"]
            )
            assert code == 0
            ledger = int(json.loads(out)[0]["triplet"].split(":")[0])
            yield root, ledger
    finally:
        if previous is None:
            os.environ.pop("CURSOROPS_HOME", None)
        else:
            os.environ["CURSOROPS_HOME"] = previous


def test_every_subcommand_is_walked() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    for expected in (
        "produce",
        "consume",
        "topics unsubscribe",
        "topics update-subscription-properties",
        "topics skip-messages",
        "topics create-partitioned-topic",
        "demo",
        "standalone",
        "standalone stop",
        "standalone status",
    ):
        assert expected in names


@pytest.mark.slow
@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_arguments(home: tuple[Path, int], data: st.DataObject) -> None:
    root, ledger = home
    argv = data.draw(_argv(ledger))
    before = _dump(root)
    code, _out, err = _run(argv)
    assert code in EXIT_OK, (argv, code, err)
    if code == 0:
        return
    lines = err.splitlines()
    if code == 2 and err.startswith("usage:"):
        # argparse: its usage, then one "cursorops ...: error: ..." line.
        assert lines[-1].startswith("cursorops") and ": error: " in lines[-1], (argv, err)
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    assert _dump(root) == before, (argv, code, err)
