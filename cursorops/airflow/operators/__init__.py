"""Operators of the cursorops provider: the approval gate and the Spark job.

Import them from their modules (:mod:`cursorops.airflow.operators.gate`,
:mod:`cursorops.airflow.operators.spark`): each pulls in a different Airflow provider.
"""
