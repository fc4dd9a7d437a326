"""Where the DAGs and the local Airflow's launcher are, in a checkout and in an installed wheel.

The checkout keeps them at its top, ``dags/`` and ``scripts/``; ``cursorops/airflow/dags``
links to the first, ``cursorops/airflow/scripts`` holds links to the launcher's files in the
second, and the wheel carries both as folders of this package (their files, not links). So
one path, resolved, names the real folder either way. The launcher
(``scripts/airflow-env.sh``) tells the two apart itself: a checkout also serves its
``plugins/`` and puts itself on PYTHONPATH; an installed wheel needs neither (its
``airflow.plugins`` entry point registers the plugin).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cursorops.core.domain.errors import InvalidArgumentError

_HERE = Path(__file__).parent
INSTALL_HINT = "pip install 'cursorops[airflow]'"


def dags_folder() -> Path:
    """The folder of the cursorops DAGs (``dags/`` of a checkout)."""
    return _folder("dags", "cursorops_skip_messages.py")


def scripts_folder() -> Path:
    """The folder of ``airflow-up.sh``, ``airflow-env.sh`` and ``airflow-down.sh``."""
    return _folder("scripts", "airflow-up.sh")


def launcher_environment() -> dict[str, str]:
    """What the launcher must be told: the environment Airflow runs from, ``VENV`` when
    the caller names one (as the launcher itself reads it), else this interpreter's (its
    ``bin/airflow``), not a ``.venv`` next to the scripts."""
    return {"VENV": os.environ.get("VENV") or sys.prefix}


def _folder(name: str, member: str) -> Path:
    """The real folder of ``member`` (the link's target in a checkout)."""
    path = (_HERE / name / member).resolve()
    folder = path.parent
    if not path.is_file():
        raise InvalidArgumentError(
            f"no {member} in {folder}: this cursorops installation carries no Airflow {name} "
            f"({INSTALL_HINT} from a wheel, or run from a checkout)"
        )
    return folder
