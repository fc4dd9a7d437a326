"""The SparkSession every job builds: local by default, unchanged on a cluster.

Under ``spark-submit`` the master comes from ``--master``; run as a plain
Python program (or from the CLI) it comes from the ``master`` argument,
``local[*]`` by default. Spark's console progress bar stays on, so a long scan
shows its stages as they run.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SHUFFLE_PARTITIONS = 8
"""Few: the jobs shuffle one row per entry at most, grouped by topic partition."""

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def build_session(
    master: str | None = None,
    app_name: str = "cursorops",
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the session.

    ``master`` None keeps what ``spark-submit --master`` set; a plain Python
    process gets spark-submit's own default, ``local[*]``.
    ``extra`` adds Spark settings (``spark.driver.memory`` only counts before the
    JVM starts, i.e. on the first session of the process).
    """
    # The driver and executors talk over loopback unless the environment says otherwise.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The jobs exchange Arrow, never pandas; PySpark's warning about pandas 3 is noise here.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": "WARN",
        **(extra or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def session_scope(
    master: str | None, app_name: str, spark: SparkSession | None = None
) -> Iterator[SparkSession]:
    """``spark`` if given, else a session built here and stopped on exit.

    A session that was already active in the process (a notebook's, a test
    run's) is used and left running.
    """
    if spark is not None:
        yield spark
        return
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    session = build_session(master, app_name)
    try:
        yield session
    finally:
        if existing is None:
            session.stop()


def job_logger(name: str) -> logging.Logger:
    """A logger writing one line per step to stderr (the job's log)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to ``sys.stderr`` as it is when a line is logged (callers may swap it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass
