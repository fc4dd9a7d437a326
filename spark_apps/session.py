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

A server that requires a token (``scripts/spark-connect-up.sh`` always does) gets it
from the URL's ``;token=`` or from ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, sent by
:mod:`.connect_channel`; errors show the URL with ``token=***``.

Every job attaches to one server-side session per server URL
(:func:`shared_session_id`) and leaves it open: Spark keeps a Python worker
pool per session, so a session per job would start (and keep) a new pool of
Python workers, importing ``core`` again, for every job.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO, cast

from cursorops.core.domain.errors import InvalidArgumentError, LedgerStoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SHUFFLE_PARTITIONS = 8
"""Few: the jobs shuffle one row per entry at most, grouped by topic partition."""

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

REMOTE_ENV = "CURSOROPS_SPARK_REMOTE"
"""Environment variable naming a Spark Connect server (``sc://127.0.0.1:15002``)."""

JOB_TAG_ENV = "CURSOROPS_SPARK_JOB_TAG"
"""Environment variable with a tag for every operation a Connect job of this process starts,
so that it alone can be interrupted (``interruptTag``) in the session jobs share."""

_SESSION_SETTINGS = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # A scan names its segment files one by one; above this many paths Spark lists
    # them with a job of one task per path, which cost a 320-segment scan 30 s of its
    # 90. Stat-ing listed files on the driver takes milliseconds.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}
"""Settings a job's own session may carry (a Connect client can set only these)."""


_TOKEN_PARAM = re.compile(r"(;token=)[^;]*")


def redacted(url: str) -> str:
    """``url`` with its token's value (``;token=...``, see :mod:`.connect_channel`) replaced
    by ``***``: what logs and error messages may show."""
    return _TOKEN_PARAM.sub(r"\1***", url)


def remote_url(remote: str | None = None) -> str | None:
    """The Connect URL to use: ``remote`` if given, else :data:`REMOTE_ENV`'s, else None.

    An empty string means classic Spark even when the environment names a server.
    """
    chosen = os.environ.get(REMOTE_ENV) if remote is None else remote
    chosen = (chosen or "").strip()
    if not chosen:
        return None
    if not chosen.startswith("sc://"):
        raise InvalidArgumentError(
            f"Invalid Spark Connect URL '{redacted(chosen)}': expected sc://host:port"
        )
    return chosen


def shared_session_id(url: str) -> str:
    """The server-side session every cursorops job on ``url`` attaches to (a fixed UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cursorops-spark-connect:{url}"))


def _with_session_id(url: str) -> str:
    """``url`` with ``session_id`` set to :func:`shared_session_id`, unless it names one."""
    base, _, params = url.partition(";")
    if any(p.split("=", 1)[0] == "session_id" for p in params.split(";") if p):
        return url
    chosen = shared_session_id(base.rstrip("/"))
    return f"{base.rstrip('/')}/;" + ";".join(
        [*filter(None, params.split(";")), f"session_id={chosen}"]
    )


CONNECT_PORT = 15002
"""Spark Connect's port when the URL names none."""


def check_reachable(url: str, timeout_s: float = 10.0) -> None:
    """One error line at once when nothing listens at the Connect URL: pyspark's client
    would retry for minutes and end in a traceback."""
    netloc = url.removeprefix("sc://").split(";", 1)[0].split("/", 1)[0]
    host, colon, port = netloc.rpartition(":")
    if not colon:
        host, port = netloc, str(CONNECT_PORT)
    if not host or not port.isdigit():
        raise InvalidArgumentError(
            f"Invalid Spark Connect URL '{redacted(url)}': expected sc://host:port"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise LedgerStoreError(
            f"Cannot reach the Spark Connect server at {host}:{port} ({reason}): "
            "the ledgers cannot be scanned"
        ) from None


def _connect_session(url: str, app_name: str, settings: dict[str, str]) -> SparkSession:
    """A client of the shared session on ``url``; of a session of its own if that one was
    closed (a server-side idle timeout, or another client released it)."""
    check_reachable(url)
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from cursorops.spark.connect_channel import TokenChannelBuilder

    def create(target: str) -> SparkSession:
        # What pyspark's builder.remote() marks before it creates a Connect session: the
        # DataFrame functions (F.col, ...) then build Connect expressions, not the JVM's.
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        builder = ConnectSession.builder.channelBuilder(TokenChannelBuilder(target))
        builder = builder.appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        # A Connect session serves as one: pyspark's builder.remote() casts it the same way.
        return cast("SparkSession", builder.create())

    try:
        session = create(_with_session_id(url))
        # Reaches the session even when every option is already set as asked.
        session.conf.get("spark.sql.session.timeZone")
    except PySparkException as exc:
        if "SESSION_CLOSED" not in str(exc):
            raise
        # The failed client is the process's active session: close it, or later calls use it.
        failed = ConnectSession.getActiveSession()
        if failed is not None:
            failed.release_session_on_close = False
            failed.stop()
        return _tagged(create(url))
    # Stopping this client must not close the session the next job attaches to.
    session.release_session_on_close = False  # type: ignore[attr-defined]
    return _tagged(session)


def _tagged(session: SparkSession) -> SparkSession:
    """``session`` with :data:`JOB_TAG_ENV`'s tag on the operations it starts, if set."""
    tag = os.environ.get(JOB_TAG_ENV, "").strip()
    if tag:
        session.addTag(tag)
    return session


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
    classic) makes it a client of the shared Spark Connect session on that
    server instead (see the module's docstring); ``master`` is then the server's
    business and ignored, and only the ``spark.sql.*`` settings (of ``extra``
    too) apply. Every job sets the same ones, so jobs sharing the session agree.
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
        return _connect_session(url, app_name, settings)
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


_users_lock = threading.Lock()
_users = 0
"""Jobs of this process inside :func:`session_scope` on the local session right now."""
_owned = False
"""Whether the first of them built the process's session (so the last one stops it)."""


@contextmanager
def session_scope(
    master: str | None,
    app_name: str,
    spark: SparkSession | None = None,
    remote: str | None = None,
) -> Iterator[SparkSession]:
    """``spark`` if given, else a session built here and stopped on exit.

    A session that was already active in the process (a notebook's, a test
    run's) is used and left running. A Connect client (``remote``, see
    :func:`build_session`) is always the job's own: stopping it closes the
    client and leaves the server, its warm JVM and the shared session running.
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

    global _users, _owned
    with _users_lock:
        if _users == 0:
            # The active session is per thread; a server runs jobs on its worker threads,
            # where the process's session (a test run's, a notebook's) is not active but
            # is the one getOrCreate returns: it is used and left running too.
            existing = SparkSession.getActiveSession() or SparkSession._instantiatedSession
            _owned = existing is None
        session = build_session(master, app_name, remote="")
        _users += 1
    try:
        yield session
    finally:
        with _users_lock:
            _users -= 1
            # One session per process: jobs on several threads share it, and the last
            # to finish stops it (when none was running before the first began).
            if _users == 0 and _owned:
                session.stop()


_hosted = False
"""Whether jobs run inside a host that logs (:func:`hosted_logging`)."""


@contextmanager
def hosted_logging() -> Iterator[None]:
    """Run jobs in this process with their lines handed to the host's logging (an Airflow
    task on Spark Connect) at their own level, instead of written to stderr, which Airflow
    records as errors."""
    global _hosted
    _hosted = True
    try:
        yield
    finally:
        _hosted = False


def job_logger(name: str) -> logging.Logger:
    """A logger writing one line per step: to stderr (the job's log), or, inside
    :func:`hosted_logging`, to the host's handlers at the line's level."""
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    for handler in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(handler)
    if _hosted:
        logger.propagate = True
    else:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        logger.addHandler(handler)
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
