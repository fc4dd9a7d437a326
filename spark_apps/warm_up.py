"""Warm a fresh Spark Connect server up before the first real job reaches it.

A new server's first job pays for everything once: the JVM loads and compiles
the Parquet reader and writer and the Arrow paths, and Spark forks the shared
session's Python workers, which import ``core`` and the jobs' modules. On two
loaded cores that was most of a minute, paid by whichever Airflow task came
first. The launchers (``scripts/airflow-env.sh``) run this once the server
listens, while Airflow is still starting: a tiny Parquet file written and read
back through a ``mapInArrow`` and an ``applyInArrow`` that import what the jobs
import, on the shared session every job attaches to
(:func:`spark_apps.session.shared_session_id`).

Run::

    python -m spark_apps.warm_up --remote sc://127.0.0.1:15002
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa

from spark_apps.session import job_logger, session_scope


def touch_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """What a ``find_messages`` worker imports, then the batches unchanged."""
    import spark_apps.find_messages  # noqa: F401

    yield from batches


def touch_group(table: pa.Table) -> pa.Table:
    """What an ``analyze_backlog`` / ``audit_backlog`` worker imports, then the group."""
    import spark_apps.audit_backlog  # noqa: F401

    return table


def warm_up(remote: str) -> float:
    """One small round trip of every kind the jobs make; seconds taken."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    with (
        session_scope(None, "cursorops-warm-up", None, remote) as spark,
        tempfile.TemporaryDirectory(prefix="cursorops-warm-up-") as folder,
    ):
        rows = spark.range(0, 64, numPartitions=2).withColumn("partition", F.col("id") % 4)
        rows.write.mode("overwrite").parquet(folder)
        read = spark.read.parquet(folder)
        read.mapInArrow(touch_batches, read.schema).count()

        def group(table):  # type: ignore[no-untyped-def]
            return touch_group(table)

        read.groupBy("partition").applyInArrow(group, read.schema).collect()
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="warm_up", description=__doc__.splitlines()[0])
    parser.add_argument("--remote", required=True, metavar="sc://HOST:PORT")
    args = parser.parse_args(argv)
    seconds = warm_up(args.remote)
    job_logger("cursorops.warm_up").info("Spark Connect server warmed up in %.1fs", seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
