"""What Airflow learns about cursorops from its ``apache_airflow_provider`` entry point.

Installing the wheel is enough: ``airflow providers list`` shows ``cursorops``, the
connection form offers the ``cursorops`` type (:class:`cursorops.airflow.hooks.CursorOpsHook`)
with its fields, and the plugin comes in through the ``airflow.plugins`` entry point
(:mod:`cursorops.airflow.plugins.cursorops`). The plugin is not listed here as well:
Airflow registers a plugin name once and reports a second registration as an import error.

Importing this module imports no Airflow, so listing providers stays cheap.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

PACKAGE = "cursorops"
HOOK = "cursorops.airflow.hooks.cursorops.CursorOpsHook"
CONN_TYPE = "cursorops"


def _version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # a checkout on PYTHONPATH, never installed
        return "0+unknown"


def get_provider_info() -> dict[str, Any]:
    """The provider info Airflow's ProvidersManager reads (``provider_info.schema.json``)."""
    text = {"type": ["string", "null"]}
    return {
        "package-name": PACKAGE,
        "name": "cursorops",
        "description": "Pulsar subscription cursors: gated skips, redrives and resets "
        "approved by a second person, exact backlog audits on Spark.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": "cursorops",
                "external-doc-url": "https://pulsar.apache.org/docs/concepts-messaging/",
                "tags": ["service"],
            }
        ],
        "hooks": [
            {
                "integration-name": "cursorops",
                "python-modules": ["cursorops.airflow.hooks.cursorops"],
            }
        ],
        "operators": [
            {
                "integration-name": "cursorops",
                "python-modules": [
                    "cursorops.airflow.operators.gate",
                    "cursorops.airflow.operators.spark",
                ],
            }
        ],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": HOOK,
                "hook-name": "cursorops",
                "conn-fields": {
                    "home": {
                        "label": "cursorops home",
                        "description": "The home folder (CURSOROPS_HOME); empty: the "
                        "worker's CURSOROPS_HOME or ~/.cursorops",
                        "schema": text,
                    },
                    "metadata_url": {
                        "label": "Metadata URL",
                        "description": "SQLAlchemy URL of the metadata store; empty: SQLite "
                        "in the home",
                        "schema": {**text, "format": "password"},
                    },
                    "ledger_root": {
                        "label": "Ledger root",
                        "description": "Where the ledgers live; empty: ledgers/ in the home",
                        "schema": text,
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "password", "port"],
                    "relabeling": {},
                    "placeholders": {},
                },
            }
        ],
    }
