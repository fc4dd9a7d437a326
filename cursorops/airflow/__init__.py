"""Glue between Airflow and cursorops, shared by every DAG in ``dags/``.

Light on purpose: DAG files import it at parse time, so nothing here imports
``cursorops.core.broker``, pyspark or opens a store at import; the tasks do, when they run.

- :mod:`cursorops.airflow.environment`: the Config and the Airflow user → Pulsar role map, read
  inside tasks from the environment.
- :mod:`cursorops.airflow.outcomes`: every ``cursorops.core.errors`` leaf → fail (no retry) or
retry.
- :mod:`cursorops.airflow.matching`: the run conf of a skip by predicate, through pydantic.
- :mod:`cursorops.airflow.plan`: the plan record of a run (stored in cursorops's store); its
  preview is :mod:`cursorops.core.gating.approval_text`'s.
- :mod:`cursorops.airflow.gate`: the approval gates (four eyes, more for a quorum), which record
  what they showed and the answer Airflow resumes them with in cursorops's store.
- :mod:`cursorops.airflow.approval`: ``require_approvals``, which checks the answers the gates
  recorded against what they showed and the run's plan record.
- :mod:`cursorops.airflow.closing_record`: the closing record of a request in the audit log.
- :mod:`cursorops.airflow.steps`: the run's plan record (by its digest); the bodies of apply and
  close_request.
- :mod:`cursorops.airflow.gated_tail`: those tasks and the gates: a gated DAG's graph (or its tail).
"""

from __future__ import annotations
