"""The PySpark jobs, imported as ``cursorops.spark`` only.

In a checkout ``cursorops/spark`` links here, and an editable install puts the checkout's
root on ``sys.path``, where ``import spark_apps`` would load a second copy of every job
module. So a top-level ``spark_apps`` refuses to load, as a top-level ``core`` does.
A job run by its path (``spark-submit cursorops/spark/find_messages.py``) does not run
this file.
"""

if __name__ != "cursorops.spark":
    raise ImportError(
        f"{__name__!r} is cursorops.spark under another name; import cursorops.spark "
        "(docs/decisions/2026-12-07-the-core-link-stays-guarded.md)"
    )


def register(spark: object) -> None:
    """Make ``spark.read.format("cursorops")`` read a subscription's backlog on ``spark``
    (:mod:`cursorops.spark.backlog_source`)."""
    from cursorops.spark.backlog_source import register as register_source

    register_source(spark)  # type: ignore[arg-type]
