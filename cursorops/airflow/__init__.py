"""cursorops as an Airflow provider, shared by every DAG in ``dags/``.

Installed with the wheel (``cursorops[airflow]``): the ``apache_airflow_provider`` entry
point (:mod:`cursorops.airflow.provider`) makes ``airflow providers list`` show cursorops
and its ``cursorops`` connection type; the ``airflow.plugins`` entry point loads the plugin.

Light on purpose: DAG files import it at parse time, so nothing here imports
``cursorops.core.services.broker``, pyspark or opens a store at import; the tasks do, when they run.

- :mod:`cursorops.airflow.hooks`: :class:`~cursorops.airflow.hooks.CursorOpsHook`, a task's
  Broker (from the ``cursorops_default`` connection) and the run's Pulsar role.
- :mod:`cursorops.airflow.operators`: the approval gate (:mod:`~.operators.gate`: four eyes,
  more for a quorum, recording what it showed and the answer it is resumed with) and the
  Spark job (:mod:`~.operators.spark`: on Spark Connect, or spark-submitted).
- :mod:`cursorops.airflow.plugins`: the plugin (the REST app and the Cursors pages), and
  :mod:`~.rest_app`: the REST app behind Airflow's login, as the plugin mounts it.
- The task bodies: :mod:`~.steps` (the run's plan record, apply and close_request),
  :mod:`~.gated_tail` (those tasks and the gates: a gated DAG's graph), :mod:`~.approval`
  (``require_approvals``), :mod:`~.closing_record`, :mod:`~.backlog_audit`,
  :mod:`~.matching` (the run conf of a skip by predicate), :mod:`~.plan` (the plan record
  of a run), :mod:`~.notify`, :mod:`~.chart`.
- Their helpers: :mod:`~.environment` (the Airflow user → Pulsar role map),
  :mod:`~.outcomes` (every ``cursorops.core.domain.errors`` leaf → fail or retry), :mod:`~.runs`
  (a run's folder), :mod:`~.termination`.
- :mod:`~.local_airflow`: a local Airflow for the demo, the tests and the benchmarks, and
  :mod:`~.bundle`: where its launcher and the DAGs are (the checkout's, or the wheel's).
"""

from __future__ import annotations
