"""Bad input to the jobs: one clear ``error:`` line, a non-zero exit, and no cursor changed."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cursorops.core.domain import errors
from cursorops.core.domain.exit_codes import EXIT_CODES
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.spark import analyze_backlog, apply_skip_plan, find_messages
from cursorops.spark.common import run_job, translate_spark_error
from cursorops.spark.match_list import match_list_from_ids
from tests.spark_apps.topics import TOPIC, Installation, cursor_records, make_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OTHER = "persistent://acme/ops/invoices"

pytestmark = pytest.mark.spark


@pytest.fixture
def installed(tmp_path: Path, spark: SparkSession) -> Installation:
    """Two topics in one home; the Spark session is up so ``main`` reuses it."""
    make_topic(tmp_path / "home", 81, partitions=2, messages=60, topic=OTHER)
    return make_topic(tmp_path / "home", 82, partitions=2, messages=60)


def _fails(
    capsys: pytest.CaptureFixture[str], exit_code: int, message: str, job: object, *argv: str
) -> None:
    assert job.main(list(argv)) == exit_code  # type: ignore[attr-defined]
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, captured.err
    assert message in lines[0], lines[0]
    assert captured.out == ""


def _home(installed: Installation) -> list[str]:
    return ["--home", str(installed.config.home)]


def _first_ledger(installed: Installation, topic: str) -> int:
    with Broker(installed.config) as broker:
        partition = broker.metadata.get_topic(topic).partition_names()[0]
        return broker.metadata.ledgers(partition)[0].ledger_id


def test_unknown_topic_and_subscription(
    installed: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    records = cursor_records(installed.config, TOPIC)
    home = _home(installed)
    missing = "persistent://acme/ops/nothing"
    _fails(capsys, 3, "nothing", analyze_backlog, *home, missing)
    _fails(capsys, 3, "ghost", analyze_backlog, *home, TOPIC, "-s", "ghost")
    _fails(capsys, 3, "ghost", find_messages, *home, TOPIC, "-s", "ghost", "--key", "k",
           "--output", str(Path(installed.config.home) / "p"))  # fmt: skip
    _fails(capsys, 3, "ghost", apply_skip_plan, *home, TOPIC, "-s", "ghost", "--ids", "1:0")
    _fails(capsys, 3, "nothing", apply_skip_plan, *home, missing, "-s", "plain", "--ids", "1:0")
    _fails(capsys, 2, "names a partition", analyze_backlog, *home, f"{TOPIC}-partition-0")
    assert cursor_records(installed.config, TOPIC) == records


def test_malformed_predicates(installed: Installation, capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--output", str(Path(installed.config.home) / "plan")]
    base = [*_home(installed), TOPIC, "-s", "plain", *out]
    _fails(capsys, 2, "Invalid predicate: not JSON", find_messages, *base, "--predicate", "{key")
    _fails(capsys, 2, "give at least one condition", find_messages, *base)
    _fails(capsys, 2, "keyz: Extra inputs are not permitted", find_messages, *base,
           "--predicate", '{"keyz": "a"}')  # fmt: skip
    _fails(capsys, 2, "deliverAt.after 'soonish'", find_messages, *base,
           "--deliver-at-after", "soonish")  # fmt: skip
    assert not os.path.exists(Path(installed.config.home) / "plan")


def test_bad_entry_filter_property_is_named_and_refused_at_creation(
    installed: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused when the subscription is created, so analyze-backlog never meets it.
    with Broker(installed.config) as broker:
        with pytest.raises(errors.InvalidPredicateError, match="entryFilter.rejekt.key"):
            broker.admin.create_subscription(
                "admin", TOPIC, "typo", SubscriptionType.SHARED, {"entryFilter.rejekt.key": "k"}
            )
        assert "typo" not in [s.name for s in broker.metadata.list_subscriptions(TOPIC)]
    assert analyze_backlog.main([*_home(installed), TOPIC, "-s", "plain"]) == 0
    assert capsys.readouterr().err.count("error:") == 0


def test_bad_limits(installed: Installation, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(installed)
    other = _first_ledger(installed, OTHER)
    _fails(capsys, 2, f"ledger {other} is not a ledger of", analyze_backlog, *home, TOPIC,
           "--start-after", f"{other}:0")  # fmt: skip
    _fails(capsys, 2, "--time-limit 'soon'", analyze_backlog, *home, TOPIC, "--time-limit", "soon")
    _fails(capsys, 2, "--time-limit '90': add a unit, such as 90s", analyze_backlog, *home, TOPIC,
           "--time-limit", "90")  # fmt: skip
    _fails(capsys, 2, "--max-entries 0", analyze_backlog, *home, TOPIC, "--max-entries", "0")


def test_ids_of_another_topic_change_nothing(
    installed: Installation, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    records = cursor_records(installed.config, TOPIC)
    home = _home(installed)
    mine, theirs = _first_ledger(installed, TOPIC), _first_ledger(installed, OTHER)
    plan = tmp_path / "other-plan.parquet"
    pq.write_table(match_list_from_ids(OTHER, "plain", [MessageId(theirs, 0)]), plan)
    _fails(capsys, 2, f"holds ids of {OTHER}", apply_skip_plan, *home, TOPIC, "-s", "plain",
           "--match-list", str(plan))  # fmt: skip
    _fails(capsys, 3, f"no ledger {theirs} in this topic", apply_skip_plan, *home, TOPIC,
           "-s", "plain", "--ids", f"{mine}:0", f"{theirs}:0")  # fmt: skip
    _fails(capsys, 2, "Nothing skipped", apply_skip_plan, *home, TOPIC, "-s", "plain",
           "--ids", f"{mine}:0:99")  # fmt: skip
    _fails(capsys, 2, "Invalid --messageId-triplet: 'one:two': expected ledgerId:entryId",
           apply_skip_plan, *home, TOPIC, "-s", "plain", "--ids", "one:two")  # fmt: skip
    _fails(capsys, 4, "Unsupported subscription type", apply_skip_plan, *home, TOPIC,
           "-s", "exclusive", "--ids", f"{mine}:0")  # fmt: skip
    not_a_match_list = tmp_path / "plan.txt"
    not_a_match_list.write_text("hello")
    _fails(capsys, 2, "not a readable Parquet match list", apply_skip_plan, *home, TOPIC, "-s",
           "plain", "--match-list", str(not_a_match_list))  # fmt: skip
    assert cursor_records(installed.config, TOPIC) == records


def test_unreadable_ledger_file_is_named_and_changes_nothing(
    installed: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    records = cursor_records(installed.config, TOPIC)
    with Broker(installed.config) as broker:
        partition = broker.metadata.get_topic(TOPIC).partition_names()[1]
        segments = broker.ledgers.segment_paths(TopicName.parse(partition))
        ledger = broker.metadata.ledgers(partition)[0].ledger_id
    broken = segments[-1]
    with open(broken, "wb") as sink:
        sink.write(b"this is not parquet")
    home = _home(installed)
    _fails(capsys, 6, f"Cannot read ledger segment {broken}", analyze_backlog, *home, TOPIC)
    _fails(capsys, 6, f"Cannot read ledger segment {broken}", find_messages, *home, TOPIC,
           "-s", "plain", "--key", "k0", "--output", str(Path(broken).parent / "plan"))  # fmt: skip
    _fails(capsys, 6, broken, apply_skip_plan, *home, TOPIC, "-s", "plain",
           "--ids", f"{ledger}:0")  # fmt: skip
    os.unlink(broken)
    _fails(capsys, 6, f"Cannot read ledger segment {broken}: the file is missing",
           analyze_backlog, *home, TOPIC)  # fmt: skip
    assert cursor_records(installed.config, TOPIC) == records


def test_python_worker_errors_come_back_as_their_class() -> None:
    text = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\ncore.errors.InvalidBatchIndexError: Invalid batchIndex: 9\n'
    )
    error = translate_spark_error(Exception(text))
    assert isinstance(error, errors.InvalidBatchIndexError)
    assert str(error) == "Invalid batchIndex: 9"


def test_a_job_exits_with_the_cli_exit_code_of_every_leaf() -> None:
    cli = pytest.importorskip("cursorops.cli.main")
    for leaf in errors.leaf_classes():

        def job(leaf: type[errors.CursorOpsError] = leaf) -> int:
            raise leaf("x")

        code = run_job(job, io.StringIO())
        assert code == cli.EXIT_CODES[leaf] == EXIT_CODES[leaf], leaf
    # The CLI and the jobs read one table.
    assert cli.EXIT_CODES is EXIT_CODES
    assert set(EXIT_CODES.values()) == {2, 3, 4, 5, 6}


def test_an_empty_match_list_of_the_right_topic_is_valid(tmp_path: Path) -> None:
    plan = tmp_path / "plan.parquet"
    pq.write_table(match_list_from_ids(TOPIC, "plain", []), plan)
    assert pq.read_table(plan).num_rows == 0
    assert isinstance(pq.read_table(plan).schema, pa.Schema)
