"""cursorops: operate Pulsar subscription cursors safely.

The one import root of the distribution. Its layers are its subpackages:

- ``cursorops.core``: domain values, the store and the services (the ``Broker``);
- ``cursorops.wire``: Pulsar's binary protocol and ``cursorops standalone``;
- ``cursorops.rest``: Pulsar's admin REST paths and the Cursors pages;
- ``cursorops.cli``: the command line;
- ``cursorops.airflow``: the Airflow integration (gates, tasks, the plugin's parts);
- ``cursorops.spark``: the PySpark jobs.

In a checkout ``cursorops/core`` and ``cursorops/spark`` are links to the design's
top-level ``core/`` and ``spark_apps/`` folders; the wheel holds them as real folders.
Those folders refuse to load under their own names (``import core``): with the checkout
on ``sys.path`` that would be a second copy of every module, so the check is in their
own ``__init__``, which ``import core`` runs and this file does not.
"""


def __getattr__(name: str) -> object:
    """``__version__``, read from the installed metadata on first use: every command imports
    this package, and only ``--version`` needs it."""
    if name != "__version__":
        raise AttributeError(f"module 'cursorops' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("cursorops")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        value = "0.0.0+checkout"
    globals()["__version__"] = value
    return value
