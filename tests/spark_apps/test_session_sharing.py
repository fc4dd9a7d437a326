"""Jobs on several threads of one process share its Spark session: one finishing does
not stop the session another still uses, and the last stops the session they built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """
import threading
from pyspark.sql import SparkSession
from cursorops.spark.session import session_scope

entered = threading.Barrier(2)
first_done = threading.Event()
counts = []

def first():
    with session_scope("local[1]", "first") as spark:
        entered.wait()
        counts.append(spark.range(2).count())
    first_done.set()

def second():
    with session_scope("local[1]", "second") as spark:
        entered.wait()
        first_done.wait()
        counts.append(spark.range(5).count())

threads = [threading.Thread(target=first), threading.Thread(target=second)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(counts), SparkSession._instantiatedSession is None)
"""


def test_the_last_job_stops_the_session_the_first_built() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[2, 5] True"
