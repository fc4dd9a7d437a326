"""Spark jobs as Airflow tasks: one ``SparkSubmitOperator`` per job of ``spark_apps/``.

``spark_default`` decides where the job runs (``local[*]`` on one machine,
``spark://host:7077`` on a cluster). The traps this module avoids:

- the hook runs the bare name ``spark-submit`` (provider 6.3.4 takes no path),
  so the job's PATH gets the venv's bin and pyspark's bin, and ``SPARK_HOME``;
- the driver must bind 127.0.0.1 on a laptop or CI box (``SPARK_LOCAL_IP`` and
  the driver host settings), or it resolves the host name and may hang;
- executors must run this interpreter (``PYSPARK_PYTHON``), which has ``core``;
- a connection URI such as ``spark://local[2]`` silently becomes master
  ``yarn``: give ``spark_default`` in JSON form, ``{"conn_type": "spark",
  "host": "local[*]"}``.

Computing the environment finds pyspark's folder without importing pyspark, so
parsing a DAG stays cheap.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "spark_apps"
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
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    if spark_home:
        env["SPARK_HOME"] = spark_home
    return env


def xcom(task_id: str, key: str) -> str:
    """A Jinja template for one field of a task's returned dict."""
    return "{{ ti.xcom_pull(task_ids='" + task_id + "')['" + key + "'] }}"


def spark_job(task_id: str, app: str, args: Sequence[str], **kwargs: Any) -> Any:
    """A SparkSubmitOperator running ``spark_apps/<app>.py`` with ``args`` (templated)."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    kwargs.setdefault("retries", 1)
    return SparkSubmitOperator(
        task_id=task_id,
        application=str(APPS / f"{app}.py"),
        application_args=list(args),
        conn_id="spark_default",
        conf=dict(SPARK_CONF),
        env_vars=spark_env(),
        name=f"cursorops-{app}",
        **kwargs,
    )


def spark_job_mapped(task_id: str, app: str, args: Any, **kwargs: Any) -> Any:
    """One run of ``spark_apps/<app>.py`` per argument list in ``args`` (an XComArg)."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    kwargs.setdefault("retries", 1)
    return SparkSubmitOperator.partial(
        task_id=task_id,
        application=str(APPS / f"{app}.py"),
        conn_id="spark_default",
        conf=dict(SPARK_CONF),
        env_vars=spark_env(),
        name=f"cursorops-{app}",
        max_active_tis_per_dagrun=1,
        **kwargs,
    ).expand(application_args=args)
