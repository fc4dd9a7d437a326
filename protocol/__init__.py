"""Pulsar's binary protocol over the cursorops broker (``cursorops standalone``).

Three layers, each testable alone: :mod:`protocol.frames` (bytes to commands
and back, no I/O, over the field tables of :mod:`protocol.commands` and the
codec of :mod:`protocol.proto`), :mod:`protocol.sessions` (a connection's
producers and consumers over the Broker) and :mod:`protocol.server` (sockets,
timeouts, group commit); :mod:`protocol.standalone` runs it.
"""
