"""Spark jobs as Airflow tasks: one task per job of ``spark_apps/``, on Connect or spark-submit.

Each task is a :class:`SparkJobOperator`, a ``SparkSubmitOperator`` that
decides when it runs (never when the DAG is parsed) where the job goes:

- on a long-lived Spark Connect server (``scripts/spark-connect-up.sh``) when
  the ``spark_connect_default`` connection exists (conn type ``spark_connect``,
  host and port of the server, its token as the password), or else when the
  worker's environment sets ``CURSOROPS_SPARK_REMOTE=sc://host:port/;token=...``:
  the job's ``main`` runs in the task's own process as a thin client, with
  ``--remote``, and no JVM starts;
- otherwise through ``spark-submit`` as before, where ``spark_default``
  decides where the job runs (``local[*]`` on one machine, ``spark://host:7077``
  on a cluster).

Either way the job gets the same arguments and gives the same answer; a job's
exit code for bad input, a missing topic or a refused role fails the task at
once, any other failure lets Airflow retry. The traps the spark-submit path avoids:

- the hook runs the bare name ``spark-submit`` (provider 6.3.4 takes no path),
  so the job's PATH gets the venv's bin and pyspark's bin, and ``SPARK_HOME``;
- the driver must bind 127.0.0.1 on a laptop or CI box (``SPARK_LOCAL_IP`` and
  the driver host settings), or it resolves the host name and may hang;
- executors must run this interpreter (``PYSPARK_PYTHON``), which has ``core``;
- a connection URI such as ``spark://local[2]`` silently becomes master
  ``yarn``: give ``spark_default`` in JSON form, ``{"conn_type": "spark",
  "host": "local[*]"}``.

Computing the environment finds pyspark's folder without importing pyspark, so
parsing a DAG stays cheap; the connection is looked up only in ``execute``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from cursorops.airflow.termination import Termination

PACKAGE = Path(__file__).resolve().parents[2]
ROOT = PACKAGE.parent
"""The folder holding the ``cursorops`` package (the checkout, or site-packages)."""
APPS = PACKAGE / "spark"
"""``cursorops.spark``: the jobs of ``spark_apps/``."""
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def spark_env() -> dict[str, str]:
    """The environment ``spark-submit`` needs, added to the worker's own."""
    python = sys.executable
    spec = importlib.util.find_spec("pyspark")
    spark_home = str(Path(spec.origin).parent) if spec and spec.origin else ""
    path = [os.path.dirname(python)] + ([f"{spark_home}/bin"] if spark_home else [])
    env = {
        "PATH": os.pathsep.join([*path, os.environ.get("PATH", "/usr/bin:/bin")]),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    if spark_home:
        env["SPARK_HOME"] = spark_home
    return env


CONNECT_CONN_ID = "spark_connect_default"
"""The connection naming the Spark Connect server; absent: spark-submit."""


def connect_url() -> str | None:
    """The Spark Connect server's URL: from ``spark_connect_default``, else from the
    environment's ``CURSOROPS_SPARK_REMOTE``; None when neither is set.

    Called when a task runs, never at parse time (a connection lookup there is
    a database or API call per parse).
    """
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from airflow.providers.common.compat.sdk import AirflowNotFoundException

    from cursorops.spark.session import REMOTE_ENV

    try:
        return str(SparkConnectHook(CONNECT_CONN_ID).get_connection_url())
    except AirflowNotFoundException:
        return os.environ.get(REMOTE_ENV, "").strip() or None


def job_main(app: str) -> Callable[[list[str]], int]:
    """``cursorops.spark.<app>.main``."""
    module = importlib.import_module(f"cursorops.spark.{Path(app).stem}")
    main: Callable[[list[str]], int] = module.main
    return main


def permanent_exit_codes() -> frozenset[int]:
    """Exit codes every leaf of which fails a task without retry (cursorops.airflow.outcomes):
    a job's exit code is all a task learns of its error."""
    from cursorops.airflow.outcomes import OUTCOMES, Outcome
    from cursorops.core.domain.exit_codes import EXIT_CODES

    outcomes: dict[int, set[Outcome]] = {}
    for leaf, code in EXIT_CODES.items():
        outcomes.setdefault(code, set()).add(OUTCOMES[leaf])
    return frozenset(code for code, seen in outcomes.items() if seen == {Outcome.FAIL})


def run_on_connect(app: str, args: Sequence[str], remote: str) -> None:
    """Run ``spark_apps/<app>.py`` with ``args`` in this process on the Connect server ``remote``.

    What a task does on Connect, and what the benchmark's Spark Connect column
    times. A bad-input, not-found or not-authorized exit fails without retry
    (running again gives the same answer); any other failure may be retried.
    """
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from cursorops.spark.session import hosted_logging, redacted

    with hosted_logging():
        code = job_main(app)([*args, "--remote", remote])
    if code == 0:
        return
    where = redacted(remote)
    message = f"spark_apps/{Path(app).stem}.py exited with {code} on {where}: see the log above"
    if code in permanent_exit_codes():
        raise AirflowFailException(message)
    raise AirflowException(message)


def interrupt_connect_job(tag: str) -> None:
    """Interrupt the operations this process's Connect client started under ``tag``
    (:data:`cursorops.spark.session.JOB_TAG_ENV`); those of other jobs sharing the server-side
    session go on."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.getActiveSession()
    if session is not None:
        session.interruptTag(tag)


class SparkJobOperator(SparkSubmitOperator):
    """A job of ``spark_apps/``: on the Spark Connect server when one is configured, else
    spark-submitted (see the module's docstring)."""

    _connect_tag: str | None = None
    _termination: Termination | None = None

    def execute(self, context: Any) -> None:
        remote = connect_url()
        if remote is None:
            super().execute(context)
            return
        from cursorops.spark.session import JOB_TAG_ENV, redacted

        self.log.info("Running %s on Spark Connect %s", self.application, redacted(remote))
        self._termination = Termination()
        with self._termination.running():
            self._connect_tag = f"cursorops-{uuid.uuid4().hex}"
            os.environ[JOB_TAG_ENV] = self._connect_tag
            args = [str(arg) for arg in self.application_args or []]
            run_on_connect(self.application, args, remote)

    def on_kill(self) -> None:
        """SIGTERM to the task (Airflow stopping, a timeout, a task marked failed).

        A spark-submitted job is a subprocess, which SparkSubmitOperator stops. A job on
        Connect runs in this process, where Airflow's SIGTERM handler only calls this and
        lets the task go on: its operations on the server are interrupted, and the task
        ends here, so a stop of Airflow does not wait for the job to finish.
        """
        if self._termination is None:
            super().on_kill()
            return
        if self._termination.ended:
            return
        from airflow.sdk.exceptions import AirflowException

        if self._connect_tag is not None:
            try:
                interrupt_connect_job(self._connect_tag)
            except Exception as exc:  # the task ends below whatever the server answers
                self.log.warning("Could not interrupt the job on Spark Connect: %s", exc)
        # Raised until the job has ended, even when a raise is lost
        # (cursorops/airflow/termination.py).
        self._termination.stop(
            AirflowException(f"{self.task_id} terminated while its job ran on Spark Connect")
        )


def spark_job(task_id: str, app: str, args: Sequence[str], **kwargs: Any) -> Any:
    """A :class:`SparkJobOperator` running ``spark_apps/<app>.py`` with ``args`` (templated)."""
    kwargs.setdefault("retries", 1)
    return SparkJobOperator(
        task_id=task_id,
        application=str(APPS / f"{app}.py"),
        application_args=list(args),
        conn_id="spark_default",
        conf=dict(SPARK_CONF),
        env_vars=spark_env(),
        name=f"cursorops-{app}",
        **kwargs,
    )
