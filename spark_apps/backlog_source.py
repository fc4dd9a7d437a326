"""The backlog as a Spark data source named ``cursorops``.

    import cursorops.spark
    cursorops.spark.register(spark)
    backlog = (
        spark.read.format("cursorops")
        .option("topic", "persistent://acme/orders/payments")
        .option("subscription", "billing")
        .load()
    )

One row per unacknowledged message of the subscription
(:data:`~cursorops.core.domain.analysis.backlog_rows.BACKLOG_SCHEMA`), read from the
installation the environment names (``CURSOROPS_HOME``, ``CURSOROPS_METADATA_URL``,
``CURSOROPS_LEDGER_ROOT``; the options ``home``, ``metadata_url`` and ``ledger_root`` win
over them, as the jobs' flags do), as the role the ``role`` option names (else ``CURSOROPS_ROLE``,
else ``admin``, as the jobs do). The content columns are null unless that role may peek.

The relation is taken once, where Spark plans the read (its Python planner, on the driver
side), by :meth:`BacklogTable.relation
<cursorops.core.services.broker.backlog_table.BacklogTable.relation>`: every task reads the
snapshot taken there. The ``snapshot`` option pins one: the read fails, rather than
answer from another state, unless the relation taken has that id (the id ``cursorops
backlog query`` and the REST answer print). One input partition per topic partition.
Filters on ``partition``, ``topic_partition``, ``key`` and ``publish_time`` are applied
there (``spark.sql.python.filterPushdown.enabled``): a partition they rule
out is not sent to any task, and Spark evaluates every filter again all the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from cursorops.core.domain.analysis.backlog_rows import BACKLOG_SCHEMA
from cursorops.core.domain.errors import ConflictError, InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

NAME = "cursorops"
INSTALLATION_OPTIONS = {
    "home": "CURSOROPS_HOME",
    "metadata_url": "CURSOROPS_METADATA_URL",
    "ledger_root": "CURSOROPS_LEDGER_ROOT",
}
PUSHED_COLUMNS = ("partition", "topic_partition", "key", "publish_time")
"""The columns whose filters the source applies where it plans."""
_COMPARE = {
    EqualTo: pc.equal,
    GreaterThan: pc.greater,
    GreaterThanOrEqual: pc.greater_equal,
    LessThan: pc.less,
    LessThanOrEqual: pc.less_equal,
}


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("cursorops")`` the backlog on this session, its pushed
    filters on."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(BacklogSource)


@dataclass(frozen=True)
class BacklogPartition(InputPartition):
    """One topic partition's rows at the snapshot, as Arrow IPC bytes."""

    topic_partition: str
    rows: bytes


class BacklogSource(DataSource):
    """``spark.read.format("cursorops")``: options ``topic``, ``subscription``, ``role``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(BACKLOG_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = dict(self.options)
        topic, subscription = options.get("topic"), options.get("subscription")
        if not topic or not subscription:
            raise InvalidArgumentError(
                'the cursorops source reads one subscription: .option("topic", ...) and '
                '.option("subscription", ...)'
            )
        role = options.get("role") or os.environ.get("CURSOROPS_ROLE") or "admin"
        pinned = options.get("snapshot") or None
        reader = BacklogReader(str(topic), str(subscription), str(role), pinned)
        reader.installation = {
            variable: str(options[option])
            for option, variable in INSTALLATION_OPTIONS.items()
            if options.get(option)
        }
        return reader


class BacklogReader(DataSourceReader):
    """Takes the relation once, where Spark plans; hands each task one partition of it."""

    def __init__(self, topic: str, subscription: str, role: str, pinned: str | None) -> None:
        self.topic = topic
        self.subscription = subscription
        self.role = role
        self.pinned = pinned
        self.pushed: list[Filter] = []
        self.installation: dict[str, str] = {}
        """The options naming the installation, as the environment's variables."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802
        for item in filters:
            if _pushable(item):
                self.pushed.append(item)
        # Spark checks every row again: a pushed filter only spares what it rules out.
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        from cursorops.core.domain.config import Config
        from cursorops.core.services.broker import Broker

        with Broker(Config.from_environ({**os.environ, **self.installation})) as broker:
            relation = broker.backlog.relation(self.role, self.topic, self.subscription)
        if self.pinned is not None and relation.snapshot.id != self.pinned:
            raise ConflictError(
                f"the backlog of {self.subscription!r} on {self.topic} is at snapshot "
                f"{relation.snapshot.id} now, not {self.pinned}: it changed since"
            )
        table = relation.table
        for item in self.pushed:
            table = table.filter(_mask(table, item))
        names = table.column("topic_partition")
        parts = []
        for name in sorted(set(names.to_pylist())):
            rows = table.filter(pc.equal(names, name))
            parts.append(BacklogPartition(name, _ipc(rows)))
        return parts or [BacklogPartition("", _ipc(BACKLOG_SCHEMA.empty_table()))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BacklogPartition)
        with pa.ipc.open_stream(partition.rows) as stream:
            yield from stream


def _pushable(item: Filter) -> bool:
    column: tuple[str, ...] = getattr(item, "attribute", ())
    if len(column) != 1 or column[0] not in PUSHED_COLUMNS:
        return False
    return type(item) in _COMPARE or isinstance(item, In)


def _mask(table: pa.Table, item: Filter) -> pa.ChunkedArray:
    attribute: tuple[str, ...] = getattr(item, "attribute")  # noqa: B009
    value: Any = getattr(item, "value")  # noqa: B009
    column = table.column(attribute[0])
    if isinstance(item, In):
        mask = pc.is_in(column, value_set=pa.array(list(value), type=column.type))
    else:
        mask = _COMPARE[type(item)](column, pa.scalar(value, type=column.type))
    return pc.fill_null(mask, False)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, BACKLOG_SCHEMA) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
