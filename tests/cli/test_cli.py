"""The ``cursorops`` command end to end: every call is a new process on one home.

Because each command runs in its own process, every check made after an
acknowledgement or a skip is also a check that it survived a restart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cursorops.cli import values
from cursorops.cli.main import EXIT_CODES
from cursorops.core.domain.errors import (
    ConflictError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    StoreError,
    leaf_classes,
)

pytestmark = pytest.mark.e2e

ORDERS = "persistent://acme/shop/orders"
PLAIN = "persistent://acme/shop/plain"
PARTITIONS = 3
NOW = 1_800_000_000_000


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> object:
        return json.loads(self.stdout)


def cursorops(
    home: Path | None, *args: str, role: str | None = None, env: dict[str, str] | None = None
) -> Run:
    """Run the command in a new process; only ``env`` sets CURSOROPS_* variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    environment.update(env or {})
    command = [sys.executable, "-m", "cursorops.cli.main"]
    if home is not None:
        command += ["--home", str(home)]
    if role is not None:
        command += ["--role", role]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def ok(home: Path, *args: str, role: str | None = None) -> Run:
    run = cursorops(home, *args, role=role)
    assert run.code == 0, f"{args}: exit {run.code}\n{run.stderr}"
    assert "Traceback" not in run.stderr
    return run


def ok_json(home: Path, *args: str, role: str | None = None) -> Any:
    return ok(home, "-o", "json", *args, role=role).json()


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run commands that only read side by side, each in its own process."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]


@dataclass
class World:
    home: Path
    orders: list[dict[str, Any]]
    """Ids printed by ``produce`` for the 30 batched messages on ORDERS."""
    delayed: list[dict[str, Any]]
    """Ids of the 2 delayed messages on ORDERS."""
    plain: list[dict[str, Any]]
    """Ids of the 3 messages on the non-partitioned PLAIN."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("home")
    ok(home, "tenants", "create", "acme", "--admin-roles", "shop-admin")
    ok(home, "namespaces", "create", "acme/shop")
    ok(
        home,
        "namespaces",
        "grant-permission",
        "acme/shop",
        "--role",
        "reader",
        "--actions",
        "consume",
    )
    ok(
        home,
        "namespaces",
        "grant-permission",
        "acme/shop",
        "--role",
        "writer",
        "--actions",
        "produce",
    )
    ok(home, "topics", "create-partitioned-topic", "acme/shop/orders", "-p", str(PARTITIONS))
    ok(home, "topics", "create", "acme/shop/plain", role="shop-admin")
    ok(
        home,
        "topics",
        "create-subscription",
        ORDERS,
        "-s",
        "work",
        "--type",
        "Shared",
        "-m",
        "earliest",
        "-p",
        "team=billing",
    )
    ok(home, "topics", "create-subscription", ORDERS, "-s", "excl", "-m", "earliest")
    ok(
        home,
        "topics",
        "create-subscription",
        PLAIN,
        "-s",
        "work",
        "--type",
        "Key_Shared",
        "-m",
        "earliest",
    )
    plain = ok_json(home, "produce", PLAIN, "-m", "p1", "-m", "p2", "-m", "p3")
    orders = ok_json(
        home,
        "produce",
        ORDERS,
        "-m",
        "a",
        "-m",
        "b",
        "-n",
        "15",
        "--batch-size",
        "5",
        "-p",
        "x=1,y=2",
        role="writer",
    )
    delayed = ok_json(
        home,
        "produce",
        ORDERS,
        "-m",
        "later",
        "-n",
        "2",
        "--deliver-after",
        "1h",
        "--batch-size",
        "5",
    )
    assert isinstance(orders, list) and isinstance(delayed, list) and isinstance(plain, list)
    yield World(home, orders, delayed, plain)


def snapshot(home: Path) -> list[Any]:
    return together(
        lambda: ok_json(home, "topics", "stats", ORDERS),
        lambda: ok_json(home, "topics", "analyze-backlog", ORDERS),
        lambda: ok_json(home, "topics", "stats", PLAIN),
    )


def test_every_error_leaf_has_an_exit_code() -> None:
    families = {
        InvalidInputError: 2,
        NotFoundError: 3,
        ConflictError: 4,
        NotAuthorizedError: 5,
        StoreError: 6,
    }
    for leaf in leaf_classes():
        assert leaf in EXIT_CODES, leaf
        expected = [code for family, code in families.items() if issubclass(leaf, family)]
        assert [EXIT_CODES[leaf]] == expected, leaf


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10m", NOW - 600_000),
        ("3h", NOW - 3 * 3_600_000),
        ("2d", NOW - 2 * 86_400_000),
        ("1w", NOW - 7 * 86_400_000),
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
        ("2023-11-14 22:13:20", 1_700_000_000_000),
    ],
)
def test_reset_times(text: str, expected: int) -> None:
    assert values.parse_time_ms(text, "--time", NOW) == expected


@pytest.mark.parametrize("text", ["10x", "-10m", "10", "m", "1.5h", "yesterday", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidInputError, match="--deliver-after"):
        values.parse_duration_ms(text, "--deliver-after")


def test_produce_prints_ids(world: World) -> None:
    assert len(world.orders) == 30 and len(world.delayed) == 2 and len(world.plain) == 3
    assert all(o["batchSize"] == 5 and 0 <= o["batchIndex"] < 5 for o in world.orders)
    assert {o["partition"] for o in world.orders} <= set(range(PARTITIONS))
    assert all(d["batchIndex"] == -1 for d in world.delayed)
    assert all(p["partition"] == -1 and p["batchIndex"] == -1 for p in world.plain)
    assert len({o["base64"] for o in world.orders}) == 30


def test_full_flow(world: World) -> None:
    home = world.home
    # The home and the role from the environment; -o after the command.
    env = {"CURSOROPS_HOME": str(home), "CURSOROPS_ROLE": "reader"}
    tenants, listed, stats = together(
        lambda: ok_json(home, "tenants", "list"),
        lambda: cursorops(None, "topics", "list", "acme/shop", "-o", "json", env=env),
        lambda: ok_json(home, "topics", "stats", ORDERS),
    )
    assert tenants == ["acme", "public"]
    assert listed.code == 0, listed.stderr
    assert listed.json() == [
        {"topic": ORDERS, "partitions": PARTITIONS},
        {"topic": PLAIN, "partitions": 0},
    ]
    assert stats["messages"] == 32 and stats["entries"] == 8
    work = stats["subscriptions"]["work"]
    assert work["type"] == "Shared" and work["properties"] == {"team": "billing"}
    assert work["msgBacklog"] == 32 and work["backlogEntries"] == 8

    # Without --ack nothing is acknowledged: the next consumer gets the same messages.
    first = ok_json(home, "consume", ORDERS, "-s", "work", "-n", "4")
    again = ok_json(home, "consume", ORDERS, "-s", "work", "-n", "4")
    assert [m["triplet"] for m in first] == [m["triplet"] for m in again]
    acked = ok_json(home, "consume", ORDERS, "-s", "work", "-n", "4", "--ack")
    assert [m["triplet"] for m in acked] == [m["triplet"] for m in first]
    assert {m["payload"] for m in acked} <= {"a", "b"}
    assert all(m["properties"] == {"x": "1", "y": "2"} for m in acked)
    acked_ids = {(m["partition"], m["triplet"]) for m in acked}

    analysis = ok_json(home, "topics", "analyze-backlog", ORDERS, "-s", "work")
    assert analysis["total"]["messages"] == 28
    assert sum(row["messages"] for row in analysis["partitions"]) == 28
    assert len(analysis["partitions"]) == PARTITIONS

    # Skip one batch index by triplet (as the reader, who has consume) and one
    # delayed message by base64.
    pill = next(o for o in world.orders if (o["partition"], o["triplet"]) not in acked_ids)
    gone = world.delayed[0]
    skipped = ok_json(
        home,
        "topics",
        "skip-messages",
        ORDERS,
        "-s",
        "work",
        "--messageId-triplet",
        pill["triplet"],
        role="reader",
    )
    assert [s["triplet"] for s in skipped["skipped"]] == [pill["triplet"]]
    assert skipped["skipped"][0]["partition"] == pill["partition"]
    skipped = ok_json(
        home,
        "topics",
        "skip-messages",
        ORDERS,
        "-s",
        "work",
        "--messageId-base64",
        gone["base64"],
        "--messageId-base64",
        pill["base64"],
    )
    assert [s["triplet"] for s in skipped["skipped"]] == [gone["triplet"]]
    assert [s["triplet"] for s in skipped["alreadyAcknowledged"]] == [pill["triplet"]]
    text = ok(
        home,
        "topics",
        "skip-messages",
        ORDERS,
        "-s",
        "work",
        "--messageId-triplet",
        gone["triplet"],
    ).stdout
    assert "already acknowledged" in text and gone["triplet"] in text

    # New processes: the acks and skips are still there.
    analysis, text, peeked, one = together(
        lambda: ok_json(home, "topics", "analyze-backlog", ORDERS),
        lambda: ok(home, "topics", "analyze-backlog", ORDERS).stdout,
        lambda: ok_json(home, "topics", "peek-messages", ORDERS, "-s", "work", "-n", "100"),
        lambda: ok_json(home, "topics", "peek-messages", ORDERS, "-s", "work"),
    )
    assert analysis["subscriptions"]["work"]["messages"] == 26
    assert analysis["subscriptions"]["excl"]["messages"] == 32
    assert analysis["total"]["messages"] == 58
    assert "TOTAL" in text and "58" in text
    peeked_ids = {(m["partition"], m["triplet"]) for m in peeked}
    assert len(peeked) == 26
    assert (pill["partition"], pill["triplet"]) not in peeked_ids
    assert (gone["partition"], gone["triplet"]) not in peeked_ids
    assert any(m["deliverAt"] is not None for m in peeked)
    assert len(one) == 1

    rest = ok_json(home, "consume", ORDERS, "-s", "work", "-n", "100", "--ack")
    rest_ids = {(m["partition"], m["triplet"]) for m in rest}
    assert len(rest) == 25  # 26 minus the delayed message not yet due
    assert (pill["partition"], pill["triplet"]) not in rest_ids
    assert not rest_ids & acked_ids
    assert all(m["deliverAt"] is None for m in rest)
    stats, text = together(
        lambda: ok_json(home, "topics", "stats", ORDERS),
        lambda: ok(home, "topics", "stats", ORDERS).stdout,
    )
    assert stats["subscriptions"]["work"]["msgBacklog"] == 1
    assert stats["subscriptions"]["excl"]["msgBacklog"] == 32
    assert "msgBacklog (messages, exact): 1" in text

    # Reset the non-partitioned topic to its second entry, then to one hour ago.
    second = world.plain[1]["triplet"]
    reset = ok_json(home, "topics", "reset-cursor", PLAIN, "-s", "work", "-m", second)
    assert reset["markDeletePosition"] == {PLAIN: world.plain[0]["triplet"]}
    got = ok_json(home, "consume", PLAIN, "-s", "work", "-n", "10", "--ack")
    assert [m["payload"] for m in got] == ["p2", "p3"]
    ok(home, "topics", "reset-cursor", PLAIN, "-s", "work", "-t", "1h")
    got = ok_json(home, "consume", PLAIN, "-s", "work", "-n", "10")
    assert [m["payload"] for m in got] == ["p1", "p2", "p3"]


BAD_INPUTS: list[tuple[str, int, tuple[str, ...], str | None]] = [
    # (what, exit code, arguments, role); "{...}" fields are filled from the world
    (
        "bad topic name",
        2,
        (
            "topics",
            "skip-messages",
            "persistent://acme/shop/a/b",
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
        ),
        None,
    ),
    (
        "unknown topic",
        3,
        (
            "topics",
            "skip-messages",
            "acme/shop/nope",
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
        ),
        None,
    ),
    (
        "unknown subscription",
        3,
        ("topics", "skip-messages", ORDERS, "-s", "nope", "--messageId-triplet", "{order}"),
        None,
    ),
    (
        "bad triplet",
        2,
        ("topics", "skip-messages", ORDERS, "-s", "work", "--messageId-triplet", "{order}", "1:x"),
        None,
    ),
    (
        "bad base64",
        2,
        ("topics", "skip-messages", ORDERS, "-s", "work", "--messageId-base64", "{order64}", "!!!"),
        None,
    ),
    (
        "batch index out of range",
        2,
        (
            "topics",
            "skip-messages",
            ORDERS,
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
            "{order_entry}:5",
        ),
        None,
    ),
    (
        "batch index on a non-batched entry",
        2,
        (
            "topics",
            "skip-messages",
            ORDERS,
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
            "{delayed}:0",
        ),
        None,
    ),
    (
        "unknown entry",
        3,
        (
            "topics",
            "skip-messages",
            ORDERS,
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
            "{plain}",
        ),
        None,
    ),
    (
        "position beyond the last entry",
        2,
        (
            "topics",
            "skip-messages",
            ORDERS,
            "-s",
            "work",
            "--messageId-triplet",
            "{order}",
            "{last_ledger}:9999",
        ),
        None,
    ),
    (
        "skip on an Exclusive subscription",
        4,
        ("topics", "skip-messages", ORDERS, "-s", "excl", "--messageId-triplet", "{order}"),
        None,
    ),
    (
        "role without grants",
        5,
        ("topics", "skip-messages", ORDERS, "-s", "work", "--messageId-triplet", "{order}"),
        "nobody",
    ),
    (
        "role with produce only",
        5,
        ("topics", "skip-messages", ORDERS, "-s", "work", "--messageId-triplet", "{order}"),
        "writer",
    ),
    (
        "bad --type",
        2,
        ("topics", "create-subscription", ORDERS, "-s", "new", "--type", "Exclusivish"),
        None,
    ),
    ("bad -t duration", 2, ("topics", "reset-cursor", PLAIN, "-s", "work", "-t", "10x"), None),
    ("bad --deliver-after", 2, ("produce", ORDERS, "-m", "x", "--deliver-after", "soon"), None),
    ("existing topic", 4, ("topics", "create", ORDERS), None),
]


def test_bad_input_changes_nothing(world: World) -> None:
    home = world.home
    order = next(o for o in world.orders if o["batchIndex"] == 4)
    ledgers = [int(str(o["triplet"]).split(":")[0]) for o in world.orders + world.delayed]
    fields = {
        "order": order["triplet"],
        "order64": order["base64"],
        "order_entry": ":".join(str(order["triplet"]).split(":")[:2]),
        "delayed": world.delayed[0]["triplet"],
        "plain": world.plain[0]["triplet"],
        "last_ledger": str(max(ledgers)),
    }
    # "unknown entry" needs a ledger of another topic below this topic's last one.
    assert int(str(world.plain[0]["triplet"]).split(":")[0]) < max(ledgers)
    before = snapshot(home)

    def attempt(case: tuple[str, int, tuple[str, ...], str | None]) -> str | None:
        what, code, template, role = case
        run = cursorops(home, *(a.format(**fields) for a in template), role=role)
        lines = run.stderr.splitlines()
        if run.code != code or len(lines) != 1 or not lines[0].startswith("error: "):
            return f"{what}: exit {run.code} (want {code}), stderr {run.stderr!r}"
        return None

    # None of these may write anything, so they can run side by side; the
    # snapshot afterwards catches any that did.
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [f for f in pool.map(attempt, BAD_INPUTS) if f is not None]
    # argparse usage errors exit 2 too.
    run = cursorops(home, "topics", "skip-messages", ORDERS, "-s", "work")
    if run.code != 2 or "Traceback" in run.stderr:
        failures.append(f"no ids: exit {run.code}, stderr {run.stderr!r}")
    assert not failures, "\n".join(failures)
    assert snapshot(home) == before


def test_demo_runs_twice(tmp_path: Path) -> None:
    run = ok(tmp_path, "demo")
    assert "Backlog BEFORE" in run.stdout and "Backlog AFTER" in run.stdout
    assert "FAIL" not in run.stdout and run.stdout.count("ok  ") == 6
    summary = ok_json(tmp_path, "demo", "--partitions", "2")
    assert summary["ok"] is True
    before, after = summary["backlogBefore"]["total"], summary["backlogAfter"]["total"]
    assert after["messages"] == before["messages"] - 2
    assert after["entries"] == before["entries"] - 1
    assert summary["pill"]["batchIndex"] >= 0 and summary["delayed"]["batchIndex"] == -1
