"""The SparkSession every job builds: local by default, unchanged on a cluster or on Connect.

Under ``spark-submit`` the master comes from ``--master``; run as a plain
Python program (or from the CLI) it comes from the ``master`` argument,
``local[*]`` by default. Spark's console progress bar stays on, so a long scan
shows its stages as they run.

Given a Spark Connect URL (``remote=``, or the environment's
:data:`REMOTE_ENV`), the job is a thin client of a long-lived Connect server
(``scripts/spark-connect-up.sh``): no JVM starts in the job's process, and the
server's warm session runs the same DataFrame code. Jobs use nothing that only
a classic session has (no ``SparkContext``), so both modes give the same answers.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from core.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SHUFFLE_PARTITIONS = 8
"""Few: the jobs shuffle one row per entry at most, grouped by topic partition."""

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

REMOTE_ENV = "CURSOROPS_SPARK_REMOTE"
"""Environment variable naming a Spark Connect server (``sc://127.0.0.1:15002``)."""

_SESSION_SETTINGS = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}
"""Settings a job's own session may carry (a Connect client can set only these)."""


def remote_url(remote: str | None = None) -> str | None:
    """The Connect URL to use: ``remote`` if given, else :data:`REMOTE_ENV`'s, else None.

    An empty string means classic Spark even when the environment names a server.
    """
    chosen = os.environ.get(REMOTE_ENV) if remote is None else remote
    chosen = (chosen or "").strip()
    if not chosen:
        return None
    if not chosen.startswith("sc://"):
        raise InvalidArgumentError(f"Invalid Spark Connect URL '{chosen}': expected sc://host:port")
    return chosen


def build_session(
    master: str | None = None,
    app_name: str = "cursorops",
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    extra: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Get or create the session.

    ``master`` None keeps what ``spark-submit --master`` set; a plain Python
    process gets spark-submit's own default, ``local[*]``.
    ``extra`` adds Spark settings (``spark.driver.memory`` only counts before the
    JVM starts, i.e. on the first session of the process).

    ``remote`` (default: :data:`REMOTE_ENV` from the environment; ``""`` forces
    classic) makes it a new Spark Connect session on that server instead;
    ``master`` is then the server's business and ignored, and only the
    ``spark.sql.*`` settings (of ``extra`` too) apply, to this session alone.
    """
    # The driver and executors talk over loopback unless the environment says otherwise.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The jobs exchange Arrow, never pandas; PySpark's warning about pandas 3 is noise here.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    url = remote_url(remote)
    settings = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        **_SESSION_SETTINGS,
    }
    if url is not None:
        settings.update((k, v) for k, v in (extra or {}).items() if k.startswith("spark.sql."))
        builder = SparkSession.builder.remote(url).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        # A session of its own on the server: its settings and temporary views are
        # this job's, and stopping it leaves other clients' sessions alone.
        return builder.create()
    settings.update(
        {"spark.ui.showConsoleProgress": "true", "spark.log.level": "WARN", **(extra or {})}
    )
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def session_scope(
    master: str | None,
    app_name: str,
    spark: SparkSession | None = None,
    remote: str | None = None,
) -> Iterator[SparkSession]:
    """``spark`` if given, else a session built here and stopped on exit.

    A session that was already active in the process (a notebook's, a test
    run's) is used and left running. A Connect session (``remote``, see
    :func:`build_session`) is always the job's own: stopping it closes the
    client and leaves the server, and its warm JVM, running.
    """
    if spark is not None:
        yield spark
        return
    if remote_url(remote) is not None:
        session = build_session(master, app_name, remote=remote)
        try:
            yield session
        finally:
            session.stop()
        return
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    session = build_session(master, app_name, remote="")
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
