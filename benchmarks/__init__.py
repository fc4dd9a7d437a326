"""Benchmarks: scripts that measure cursorops and write ``docs/benchmarks.md``.

Not tests. Each module has a ``main(argv)`` runnable as ``python -m benchmarks.NAME``
(``--quick`` for a smoke-sized run that writes nothing); ``python -m
benchmarks.run_all`` runs them all. Every figure written comes from a
measurement of that run: medians of several runs, the run count stated, and
the machine described by :mod:`benchmarks.machine`.

- :mod:`benchmarks.cursor_acks`: acknowledgements in memory and durable,
  snapshot size, persist and recover times for millions of holes.
- :mod:`benchmarks.read_path`: messages per second through a Shared
  subscription's consumer.
- :mod:`benchmarks.skip_ids`: PIP-423 skip of 100,000 ids over 8 partitions.
- :mod:`benchmarks.report`: timing helpers and :func:`~benchmarks.report.write_section`,
  the one writer of ``docs/benchmarks.md``.
"""

from __future__ import annotations
