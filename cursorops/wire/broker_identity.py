"""A standalone's identity on its home, and how a restart knows its earlier life.

Every consumer a standalone registers in the metadata store has an id that
starts with the standalone's broker id. Several standalones may share one
home and one store, so the id cannot be the home's: each live standalone
holds one *slot*, a file ``brokers/<broker id>.lock`` under the home, locked
(``flock``) for as long as the process lives. The kernel drops the lock when
the process ends, however it ends (``kill -9`` included).

A starting standalone takes the first slot nobody holds: that slot's earlier
process is gone, so the consumers registered under its id are dead ones, and
the new process, which is that broker's next life, releases them before it
serves. With no free slot it makes a new one. A slot another live process
holds is never taken: its consumers are alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

SLOTS = "brokers"
"""The folder of the slots, under the home."""


@dataclass
class BrokerIdentity:
    broker_id: str
    fd: int
    """The slot's open file, locked while this process lives."""
    earlier_life: bool
    """True: the slot was an earlier process's, whose consumers may still be registered."""

    @property
    def consumer_prefix(self) -> str:
        """What every consumer id of this broker starts with."""
        return f"{self.broker_id}/"

    def close(self) -> None:
        """Give the slot up (the file stays, for the next life to take)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _locked(path: Path) -> int | None:
    """The open, locked file; None when another live process holds its lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def claim(home: Path) -> BrokerIdentity:
    """Take a free slot of the home (an earlier life) or a new one; held until exit."""
    folder = home / SLOTS
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("*.lock")):
        fd = _locked(path)
        if fd is not None:
            return BrokerIdentity(path.stem, fd, earlier_life=True)
    while True:
        # A process scanning the slots at this moment may lock the new file first.
        broker_id = uuid.uuid4().hex[:12]
        fd = _locked(folder / f"{broker_id}.lock")
        if fd is not None:
            return BrokerIdentity(broker_id, fd, earlier_life=False)
