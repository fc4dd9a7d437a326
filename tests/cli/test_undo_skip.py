"""``topics skip-messages`` prints its skip id, ``audit skips`` lists the skips, and
``topics undo-skip`` takes one back: text and ``-o json``, and the exit codes of refusals."""

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
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/shop")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(6)])
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["--home", str(home), *args])
    except SystemExit as usage:  # argparse refuses the arguments themselves
        code = int(usage.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def as_json(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> object:
    code, out, err = run(capsys, home, "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


def backlog(home: Path) -> int:
    with Broker(Config.from_home(home)) as broker:
        return sum(a.result.messages for a in broker.analysis.analyze_backlog("admin", TOPIC, "s"))


def test_skip_list_and_undo(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skip = ["topics", "skip-messages", TOPIC, "-s", "s", "--messageId-triplet"]
    skipped = as_json(capsys, home, *skip, "1:1", "1:4")
    assert isinstance(skipped, dict)
    first = skipped["skipId"]
    assert isinstance(first, int) and [m["triplet"] for m in skipped["skipped"]] == ["1:1", "1:4"]
    code, text, _ = run(capsys, home, *skip, "1:2")
    assert code == 0
    second = first + 1
    assert f"skip id              {second} (cursorops topics undo-skip {TOPIC}" in text
    assert backlog(home) == 3

    listed = as_json(capsys, home, "audit", "skips", TOPIC, "-s", "s")
    assert [(s["skipId"], s["ids"], s["undone"]) for s in listed] == [  # type: ignore[union-attr]
        (second, 1, False),
        (first, 2, False),
    ]
    undone = as_json(capsys, home, "topics", "undo-skip", TOPIC, "-s", "s", "--skip-id", str(first))
    assert isinstance(undone, dict)
    assert (undone["skipId"], undone["unacknowledged"]) == (first, ["1:1", "1:4"])
    assert backlog(home) == 5

    code, text, _ = run(capsys, home, "audit", "skips", TOPIC)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith(f"{second}  ") and lines[0].endswith("applied")
    assert lines[1].startswith(f"{first}  ") and f"undone (undo {undone['undoId']})" in lines[1]
    assert "via cli  2 id(s)" in lines[1]

    code, text, _ = run(
        capsys, home, "topics", "undo-skip", TOPIC, "-s", "s", "--skip-id", str(second)
    )
    assert code == 0
    assert text.splitlines() == [
        f"Undid skip {second} on subscription s of {TOPIC}: 1 message(s) unacknowledged again "
        f"(undo id {second + 2})",
        "  unacknowledged       1:2",
    ]
    assert backlog(home) == 6


@pytest.mark.parametrize(
    ("skip_id", "code", "said"),
    [("999", 3, "No skip 999 on"), ("0", 2, "Invalid skip id 0"), ("x", 2, "invalid integer")],
)
def test_refusals_have_their_exit_codes(
    home: Path, capsys: pytest.CaptureFixture[str], skip_id: str, code: int, said: str
) -> None:
    undo = ["topics", "undo-skip", TOPIC, "-s", "s", "--skip-id", skip_id]
    got, _, err = run(capsys, home, *undo)
    assert got == code and said in err


def test_an_undo_is_undone_once(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skipped = as_json(
        capsys, home, "topics", "skip-messages", TOPIC, "-s", "s", "--messageId-triplet", "1:0"
    )
    assert isinstance(skipped, dict)
    undo = ["topics", "undo-skip", TOPIC, "-s", "s", "--skip-id", str(skipped["skipId"])]
    assert run(capsys, home, *undo)[0] == 0
    code, _, err = run(capsys, home, *undo)
    assert code == 4 and "was undone already" in err
