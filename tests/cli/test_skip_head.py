"""``topics skip -n`` and ``topics clear-backlog``: messages counted, not entries; exit codes
of refusals; nothing changes on a refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cursorops.cli.main import main
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/shop/orders"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Ten messages in batches of four on an Exclusive subscription."""
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/shop")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.EXCLUSIVE, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(10)], batch_size=4
        )
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["--home", str(home), *args])
    except SystemExit as usage:
        code = int(usage.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def backlog(home: Path) -> int:
    with Broker(Config.from_home(home)) as broker:
        return sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s"))


def test_skip_n_then_clear_backlog(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    code, out, err = run(capsys, home, "topics", "skip", TOPIC, "-s", "s", "-n", "6")
    assert code == 0, err
    assert out.startswith(f"Skipped 6 message(s) (3 id(s)) on subscription s of {TOPIC}")
    assert backlog(home) == 4
    code, out, err = run(capsys, home, "-o", "json", "topics", "clear-backlog", TOPIC, "-s", "s")
    assert code == 0, err
    document = json.loads(out)
    assert document["messages"] == 4 and isinstance(document["skipId"], int)
    assert backlog(home) == 0
    code, out, _ = run(capsys, home, "-o", "json", "audit", "skips", TOPIC, "-s", "s")
    listed = json.loads(out)
    # Newest first. Batches of 4, 4 and 2: skip -n 6 took the first batch whole and two
    # indexes of the second (3 ids); clear-backlog the second's last two and the third whole.
    assert [(s["skipId"], s["ids"], s["undone"]) for s in listed] == [
        (document["skipId"], 3, False),
        (document["skipId"] - 1, 3, False),
    ]


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (("-n", "0"), 2),
        (("-n", "-3"), 2),
        (("-n", "１２"), 2),
        (("-n", "x"), 2),
        ((), 2),
    ],
)
def test_bad_counts_change_nothing(
    capsys: pytest.CaptureFixture[str], home: Path, args: tuple[str, ...], exit_code: int
) -> None:
    code, _, err = run(capsys, home, "topics", "skip", TOPIC, "-s", "s", *args)
    assert code == exit_code, err
    assert backlog(home) == 10


def test_unknown_subscription_and_no_permission(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    assert run(capsys, home, "topics", "clear-backlog", TOPIC, "-s", "nobody")[0] == 3
    assert run(capsys, home, "--role", "eve", "topics", "clear-backlog", TOPIC, "-s", "s")[0] == 5
    assert backlog(home) == 10


def test_refused_where_approval_is_required_naming_the_workflow(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    with Broker(Config.from_home(home)) as broker:
        broker.admin.set_namespace_policy("admin", "acme/shop", skip_requires_approval=True)
    code, _, err = run(capsys, home, "topics", "skip", TOPIC, "-s", "s", "-n", "1")
    assert code == 2 and "A reason is required" in err
    asked = ("topics", "skip", TOPIC, "-s", "s", "-n", "1", "--reason", "stale")
    code, _, err = run(capsys, home, *asked)
    # The home's broker starts no workflow without an Airflow login: refused, nothing planned.
    assert code == 5 and "cursorops_skip_head" in err
    assert backlog(home) == 10
