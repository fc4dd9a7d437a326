"""``cursorops topics redrive``: preview, apply, and the exit codes of its refusals."""

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
    """Subscriptions ``a`` and ``b``; four messages dead-lettered for ``a``."""
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/shop")
        broker.admin.create_topic("admin", TOPIC)
        for sub in ("a", "b"):
            broker.admin.create_subscription("admin", TOPIC, sub, SubscriptionType.SHARED)
        dlq = f"{TOPIC}-a-DLQ"
        broker.admin.create_topic("admin", dlq)
        broker.admin.create_subscription(
            "admin", dlq, "reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", dlq, [OutgoingMessage(b"%d" % i, key=f"k{i}") for i in range(4)]
        )
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _backlog(home: Path, sub: str) -> int:
    with Broker(Config.from_home(home)) as broker:
        return len(broker.reading.peek_messages("admin", TOPIC, sub, 100))


def test_preview_then_redrive(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, home, "-o", "json", "topics", "redrive", TOPIC, "-s", "a", "--preview"
    )
    assert code == 0 and json.loads(out)["messages"] == 4
    assert _backlog(home, "a") == 0
    code, out, _ = _run(
        capsys, home, "topics", "redrive", TOPIC, "-s", "a", "--predicate", '{"key": "k2"}'
    )
    assert code == 0 and "Redrove 1 message(s)" in out and "b" in out
    code, out, _ = _run(capsys, home, "-o", "json", "topics", "redrive", TOPIC, "-s", "a")
    document = json.loads(out)
    assert code == 0 and document["redriven"] == 3 and document["acknowledgedOn"] == ["b"]
    assert _backlog(home, "a") == 4 and _backlog(home, "b") == 0


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["-s", "b"], 3),  # no dead-letter topic for b
        (["-s", "nobody"], 3),
        (["-s", "a", "--predicate", "{"], 2),
        (["-s", "a", "--predicate", '{"key": "none"}'], 2),  # nothing matches
        (["-s", "a", "--dead-letter-topic", "x/y"], 2),
    ],
)
def test_refusals_exit_with_their_family_code(
    home: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int
) -> None:
    got, out, err = _run(capsys, home, "topics", "redrive", TOPIC, *args)
    assert (got, out) == (code, "")
    assert err.startswith("error: ") and err.count("\n") == 1
    assert _backlog(home, "a") == 0


def test_a_role_without_produce_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(Config.from_home(home)) as broker:
        broker.admin.grant_permission("admin", "acme/shop", "reader", ["consume"])
    got, _, err = _run(capsys, home, "--role", "reader", "topics", "redrive", TOPIC, "-s", "a")
    assert got == 5 and "not authorized to produce" in err
