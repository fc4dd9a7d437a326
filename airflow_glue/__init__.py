"""Glue between Airflow and cursorops, shared by every DAG in ``dags/``.

Light on purpose: DAG files import it at parse time, so nothing here imports
``core.broker``, pyspark or opens a store at import; the tasks do, when they run.

- :mod:`airflow_glue.environment`: the Config and the Airflow user → Pulsar role map, read
  inside tasks from the environment.
- :mod:`airflow_glue.outcomes`: every ``core.errors`` leaf → fail (no retry) or retry.
- :mod:`airflow_glue.matching`: the run conf of a skip by predicate, through pydantic.
- :mod:`airflow_glue.plan`: the plan record of a run (stored in cursorops's store) and its preview.
- :mod:`airflow_glue.inert`: text someone else wrote, made inert for the approver's Markdown.
- :mod:`airflow_glue.gate`: the approval gates (four eyes, more for a quorum), which record
  what they showed and the answer Airflow resumes them with in cursorops's store.
- :mod:`airflow_glue.approval`: ``require_approvals``, which checks the answers the gates
  recorded against what they showed and the run's plan record.
- :mod:`airflow_glue.closing_record`: the closing record of a request in the audit log.
- :mod:`airflow_glue.steps`: the run's plan record (by its digest); the bodies of apply and
  close_request.
- :mod:`airflow_glue.gated_tail`: those tasks and the gates: a gated DAG's graph (or its tail).
"""

from __future__ import annotations
