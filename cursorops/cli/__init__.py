"""The ``cursorops`` command line.

:mod:`cursorops.cli.launcher` is the entry point (standard library only: it hands the
command to a running :mod:`cursorops.cli.daemon` when there is one); :mod:`cursorops.cli.main`
parses and runs the commands.
"""
