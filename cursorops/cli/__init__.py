"""The ``cursorops`` command line.

:mod:`cursorops.cli.main` parses and runs the commands; :mod:`cursorops.cli.home` (standard
library only) finds, or starts, the standalone that serves a home on its private socket.
"""
