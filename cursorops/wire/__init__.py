"""Pulsar's binary protocol over the cursorops broker (``cursorops standalone``).

Layers, each testable alone, none importing one above it:

- the codec: :mod:`cursorops.wire.frames` (bytes to commands and back, no I/O, over
  the field tables of :mod:`cursorops.wire.commands` and the codec of
  :mod:`cursorops.wire.proto`; entries in :mod:`cursorops.wire.entries`);
- :mod:`cursorops.wire.sessions`: a connection's producers and consumers over the
  Broker, on the store thread;
- :mod:`cursorops.wire.service`: what every connection shares (the store thread,
  group commit, each topic's producers and waiting consumers);
- :mod:`cursorops.wire.session`: one connection's protocol state machine, frames in
  and frames out, no socket, with the command handlers of
  :mod:`cursorops.wire.handlers` (producers, consumers, lookups, admin);
- :mod:`cursorops.wire.server`: the asyncio server (sockets, keep-alive, closing);
  :mod:`cursorops.wire.standalone` runs it.
"""
