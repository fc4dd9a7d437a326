"""Where the segments live: ``Config.ledger_root`` as a ``pyarrow.fs`` file system and a
base path.

Every read of a segment goes through :attr:`LedgerRoot.filesystem`, and a file's identity
(what the read caches key it by) is :meth:`LedgerRoot.identity`. Writes do not: they need
``fsync`` of the file and of its folder, which ``pyarrow.fs`` does not offer, so they use
the operating system's calls on :attr:`LedgerRoot.path`. Hence only local roots for now
(docs/decisions/2026-11-29-the-ledger-root-is-read-through-pyarrow-fs.md):

- a plain path: :class:`pyarrow.fs.LocalFileSystem` and the path made absolute;
- a ``file:`` URI (``file:///srv/ledgers``): the same, as ``FileSystem.from_uri`` reads it;
- any other scheme (``s3://``, ``gs://``, ``hdfs://``...): refused.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from cursorops.core.domain.errors import InvalidArgumentError

FileIdentity = tuple[str, int, int]
"""A segment file as the read caches key it: its path, size and modification time (ns).

No inode: a segment's name is unique to its write attempt and nothing writes into a
committed segment, so the path with its size and time names one content."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
"""An RFC 3986 scheme and its colon at the start of a root: a URI, not a path."""


@dataclass(frozen=True)
class LedgerRoot:
    """A resolved ledger root: the file system readers open segments through, and the
    absolute base path segment paths are joined to."""

    filesystem: pafs.FileSystem
    path: str
    """Absolute, local: writes go here with ``os`` calls."""

    def join(self, relative: str) -> str:
        """A segment's path under the root, as the metadata store records it."""
        return os.path.join(self.path, relative)

    def identity(self, path: str) -> FileIdentity:
        """The file's path, size and modification time, from the file system.

        Raises FileNotFoundError when nothing is there (as ``os.stat`` would).
        """
        info = self.filesystem.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        mtime = info.mtime_ns
        return path, int(info.size), -1 if mtime is None else int(mtime)


def open_ledger_root(root: str | LedgerRoot) -> LedgerRoot:
    """Resolve ``Config.ledger_root``; an unsupported or malformed root is refused with
    :class:`~cursorops.core.domain.errors.InvalidArgumentError` before anything is touched."""
    if isinstance(root, LedgerRoot):
        return root
    if not isinstance(root, str) or "\x00" in root:
        raise InvalidArgumentError(f"Invalid ledger root {root!r}: expected a path or file:// URI")
    scheme = _SCHEME.match(root)
    if scheme is None:
        return LedgerRoot(pafs.LocalFileSystem(), os.path.abspath(root))
    name = scheme.group()[:-1].lower()
    if name != "file":
        raise InvalidArgumentError(
            f"Unsupported ledger root {root!r}: only local roots (a path or a file:// URI) "
            f"are supported for now, because segment writes need fsync; a path that begins "
            f"with '{scheme.group()}' is written ./{root}"
        )
    try:
        filesystem, path = pafs.FileSystem.from_uri(root)
    except (pa.ArrowException, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid ledger root {root!r}: {exc}") from exc
    if not isinstance(filesystem, pafs.LocalFileSystem):
        raise InvalidArgumentError(f"Unsupported ledger root {root!r}: not a local file system")
    return LedgerRoot(filesystem, os.path.abspath(path))
