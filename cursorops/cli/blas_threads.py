"""numpy imported with OpenBLAS limited to one thread while it loads.

Starting a BLAS thread pool per core costs a short command about 50 ms, and no
command multiplies matrices. The variable is removed again, so processes the
command starts (Airflow, Spark) get the environment they were given; a value the
caller set is left as it is. :mod:`cursorops.cli.main` imports this module before anything
that imports numpy.
"""

from __future__ import annotations

import os

if "OPENBLAS_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
