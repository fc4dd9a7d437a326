"""No task of any DAG takes an argument from an XCom, which any Airflow user with edit
rights may rewrite through the REST API: each task reads what it needs from cursorops's
store or the run's scratch folder by its own run's identity, and a Spark job's
arguments are that identity, rendered by Airflow from the run itself."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
RUN_TEMPLATE = re.compile(r"\{\{.*?\}\}")
ALLOWED = {"{{ dag_run.dag_id }}", "{{ dag_run.run_id }}", "{{ dag_run.triggering_user_name }}"}


def load_dag(dag_id: str):
    """The DAG of ``dags/<dag_id>.py``, built by calling its ``@dag`` function."""
    spec = importlib.util.spec_from_file_location(f"_dag_{dag_id}", DAGS / f"{dag_id}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, dag_id)()


@pytest.mark.parametrize("dag_id", sorted(p.stem for p in DAGS.glob("cursorops_*.py")))
def test_no_task_takes_an_argument_from_an_xcom(dag_id: str):
    from airflow.sdk import XComArg

    dag = load_dag(dag_id)
    for task in dag.tasks:
        assert not getattr(task, "op_args", None), task.task_id
        assert not getattr(task, "op_kwargs", None), task.task_id
        for arg in getattr(task, "application_args", None) or []:
            assert isinstance(arg, str) and not isinstance(arg, XComArg), (task.task_id, arg)
            assert set(RUN_TEMPLATE.findall(arg)) <= ALLOWED, (task.task_id, arg)
            assert "{{" in arg or not arg.startswith(("--output", "--summary", "--topics")), arg
