"""The ``cursorops`` command line.

:mod:`cli.launcher` is the entry point (standard library only: it hands the
command to a running :mod:`cli.daemon` when there is one); :mod:`cli.main`
parses and runs the commands.
"""
