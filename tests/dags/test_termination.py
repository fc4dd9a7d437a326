"""A Spark task on Connect ends on SIGTERM even when the raise of its first one is lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cursorops.airflow.termination import Termination

REPO = Path(__file__).resolve().parents[2]

# As in a task: the SIGTERM handler raises through Termination.stop. The first SIGTERM
# is handled inside a weakref callback, where Python prints "Exception ignored" and
# drops the raise, as it did inside SQLAlchemy's callback while a task imported pyspark.
TASK = """
import os, signal, sys, time, weakref
from cursorops.airflow.termination import Termination

termination = Termination()
signal.signal(signal.SIGTERM, lambda *_: termination.stop(RuntimeError("terminated")))

class Target:
    pass

def collected(_ref):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100_000):  # the handler runs here, and its raise is dropped
        pass

try:
    with termination.running():
        target = Target()
        ref = weakref.ref(target, collected)
        del target
        print("raise lost, work goes on", flush=True)
        while True:
            time.sleep(0.05)
except RuntimeError as error:
    print("ended:", error, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.5)
print("a SIGTERM after the end raised nothing", flush=True)
"""


def test_the_task_ends_although_the_first_raise_was_lost() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", TASK],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(f"the work went on after its SIGTERM's raise was lost: {stuck.stderr!r}")
    assert "Exception ignored" in done.stderr, "the first raise was lost, as in the task"
    assert done.stdout.splitlines() == [
        "raise lost, work goes on",
        "ended: terminated",
        "a SIGTERM after the end raised nothing",
    ]
    assert done.returncode == 0


def test_stop_raises_only_while_the_work_runs() -> None:
    termination = Termination()
    with pytest.raises(ValueError), termination.running():
        raise ValueError("the work failed on its own")
    assert termination.ended
    termination.stop(RuntimeError("too late"))  # nothing raised
