"""Where a workflow run's Spark job writes: one scratch folder per run, under the home.

``<cursorops home>/runs/<dag id>/<run id made safe>-<digest>/``. The digest is the first
16 hex digits of the SHA-256 of the DAG id and the run id, so two run ids that read the
same once made safe (``a:b`` and ``a_b``) still get two folders. No argument names the
folder: the job and the task that reads its answer each derive it from the run's
identity. A job writes nothing outside it. A folder whose real path leaves the scratch
root (a symbolic link) is refused, so a write there cannot reach anything else.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError

MATCH_LIST = "matches.parquet"
"""The match list find_messages writes for the run (Spark's folder of Parquet parts)."""
SUMMARY = "summary.json"
"""The JSON summary find_messages writes for the run; it names the request's digest."""
TOPICS = "topics.json"
"""The topics the backlog audit's first task listed for the run's Spark job."""
AUDIT = "audit.json"
"""The backlog audit's answer, which the run's Spark job writes."""
FILES = frozenset({MATCH_LIST, SUMMARY, TOPICS, AUDIT})
"""Every file a run's scratch folder may hold."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_KEPT = 80
"""Characters of the safe run id kept in the folder's name (the digest tells runs apart)."""


def scratch_root(config: Config) -> Path:
    """``<home>/runs``: every run's scratch folder is inside it."""
    return Path(config.home) / "runs"


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip(".")[:_KEPT] or "_"


def run_scratch(config: Config, dag_id: str, run_id: str) -> Path:
    """The run's scratch folder (not created, not checked)."""
    for what, value in (("dag id", dag_id), ("run id", run_id)):
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(f"Invalid {what}: must be a non-empty text")
    digest = hashlib.sha256(f"{dag_id}\0{run_id}".encode()).hexdigest()[:16]
    return scratch_root(config) / _safe(dag_id) / f"{_safe(run_id)}-{digest}"


def checked_scratch(config: Config, dag_id: str, run_id: str, *, create: bool = False) -> Path:
    """The run's scratch folder (created when ``create``), refused when its real path is not
    inside the real scratch root."""
    folder = run_scratch(config, dag_id, run_id)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(scratch_root(config))
    real = os.path.realpath(folder)
    if os.path.commonpath([root, real]) != root or real == root:
        raise InvalidArgumentError(
            f"Refused: the scratch folder of run {run_id!r} resolves to {real}, outside "
            f"{root}; nothing written"
        )
    return folder


def scratch_file(config: Config, dag_id: str, run_id: str, name: str) -> Path:
    """A file of the run's scratch folder (one of :data:`FILES`); any other name is
    refused, and so is a file whose real path leaves the folder."""
    if name not in FILES:
        raise InvalidArgumentError(f"Refused: {name!r} is no file of a run's scratch folder")
    folder = checked_scratch(config, dag_id, run_id)
    path = folder / name
    if os.path.realpath(path) != os.path.join(os.path.realpath(folder), name):
        raise InvalidArgumentError(
            f"Refused: {path} is a link out of the run's scratch folder; nothing written"
        )
    return path
