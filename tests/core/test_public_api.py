"""The public surface of ``core`` is deliberate: adding or removing a name is a decision."""

from __future__ import annotations

import subprocess
import sys

import cursorops.core


def test_all_is_pinned() -> None:
    assert sorted(cursorops.core.__all__) == [
        "AckTarget",
        "Advertised",
        "BacklogAnalysis",
        "Broker",
        "BrokerRecord",
        "Config",
        "CursorOpsError",
        "CursorState",
        "EARLIEST",
        "Fence",
        "LedgerLayout",
        "MessageBatch",
        "MessageId",
        "PartitionAnalysis",
        "Position",
        "RangeSet",
        "SkipOutcome",
        "SkipPlan",
        "SubscriptionStats",
        "SubscriptionType",
        "TopicAnalysis",
        "TopicName",
        "TopicScan",
        "TopicStats",
        "exit_code",
    ]
    for name in cursorops.core.__all__:
        assert getattr(cursorops.core, name) is not None


def test_core_imports_neither_airflow_nor_spark() -> None:
    code = (
        "import sys, cursorops.core, cursorops.core.services.broker, "
        "cursorops.core.services.reading.dispatch, "
        "cursorops.core.domain.acks.skip, "
        "cursorops.core.domain.analysis.backlog\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
