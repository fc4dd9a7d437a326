"""Ports on 127.0.0.1: a free one for a server to take, and whether one listens."""

from __future__ import annotations

import socket


def free_port(span: int = 1) -> int:
    """A port ``p`` such that ``p .. p+span-1`` are free on 127.0.0.1 right now (another
    process may take it before the server does: a server that can, takes port 0)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + span > 65535:
            continue
        try:
            for offset in range(1, span):
                with socket.socket() as more:
                    more.bind(("0.0.0.0", port + offset))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port range found")


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0
