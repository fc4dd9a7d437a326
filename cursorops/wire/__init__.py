"""Pulsar's binary protocol over the cursorops broker (``cursorops standalone``).

Three layers, each testable alone: :mod:`cursorops.wire.frames` (bytes to commands
and back, no I/O, over the field tables of :mod:`cursorops.wire.commands` and the
codec of :mod:`cursorops.wire.proto`), :mod:`cursorops.wire.sessions` (a connection's
producers and consumers over the Broker) and :mod:`cursorops.wire.server` (sockets,
timeouts, group commit); :mod:`cursorops.wire.standalone` runs it.
"""
