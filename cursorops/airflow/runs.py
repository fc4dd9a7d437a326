"""Where a run's files go: ``<cursorops home>/airflow-runs/<dag_id>/<run_id>/``.

A task's own outputs for people go there (the backlog chart, the radar's report). What a
Spark job reads and writes for a run goes to the run's scratch folder instead
(:mod:`cursorops.spark.run_scratch`), which both sides derive from the run's identity.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cursorops.core.domain.config import Config

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """``text`` with every character but letters, digits, ``.``, ``_``, ``-`` as ``_``."""
    return _UNSAFE.sub("_", text).strip(".") or "_"


def run_folder(config: Config, dag_run: Any) -> Path:
    """The run's folder, created."""
    folder = (
        Path(config.home) / "airflow-runs" / safe_name(dag_run.dag_id) / safe_name(dag_run.run_id)
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder
