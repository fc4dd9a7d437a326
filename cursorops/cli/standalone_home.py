"""One standalone per home: ``cursorops standalone`` in the foreground or the background,
and its ``stop`` and ``status``.

Whatever else it serves, a standalone holds its home's lock (:func:`cursorops.cli.home.lock_path`)
for its whole life and serves the admin REST app on the home's private socket. A
foreground standalone started on a home a background one serves stops that one and takes
over; on a home another foreground one serves it refuses, naming that one's pid. A
background standalone that finds the home served (another starter won the race) exits at
once with :data:`cursorops.cli.home.EXIT_SERVED_ELSEWHERE`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from cursorops.cli import home as home_module
from cursorops.core.domain.errors import AlreadyExistsError, StandaloneError

if TYPE_CHECKING:
    from cursorops.core.domain.config import Config
    from cursorops.wire.standalone import StandaloneSettings

TAKEOVER_TIMEOUT_S = 60.0
"""How long a foreground start waits for the background standalone it stopped to let go."""
RACE_S = 0.3
"""How long a background start retries a lock another process holds: long enough to
outlast a ``status`` probe's instant hold, short enough to leave at once when another
standalone holds it."""


def serve(
    home: str,
    metadata_url: str | None,
    config: Config,
    settings: StandaloneSettings,
    *,
    background: bool,
) -> bool:
    """Serve the home until stopped; False when a background start found it served already."""
    from cursorops.wire import standalone as standalone_module

    home_module.private_folder()
    sock = home_module.socket_path(home, metadata_url)
    lock = home_module.lock_path(sock)
    fd = _claim_background(lock) if background else _claim_foreground(lock, home, metadata_url)
    if fd is None:
        found = home_module.holder(lock) or {}
        print(
            f"cursorops standalone {os.getpid()}: {home} is served by pid {found.get('pid')}",
            flush=True,
        )
        return False
    try:
        home_module.write_holder(fd, background=background)
        if background:
            _set_title(f"cursorops standalone {home}")
            print(
                f"cursorops standalone {os.getpid()} serving {home} in the background", flush=True
            )
        standalone_module.run(config, dataclasses.replace(settings, admin_socket=str(sock)))
    finally:
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        # Removed while still held: a starter waiting on this file sees it is gone.
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        os.close(fd)
    return True


def _claim_background(lock: os.PathLike[str]) -> int | None:
    deadline = time.monotonic() + RACE_S
    while True:
        fd = home_module.take_lock(lock)  # type: ignore[arg-type]
        if fd is not None or time.monotonic() > deadline:
            return fd
        time.sleep(0.02)


def _claim_foreground(lock: Any, home: str, metadata_url: str | None) -> int:
    deadline = time.monotonic() + TAKEOVER_TIMEOUT_S
    while True:
        fd = home_module.take_lock(lock)
        if fd is not None:
            return fd
        found = home_module.holder(lock)
        if found is not None and found.get("background") is False:
            raise AlreadyExistsError(
                f"cursorops standalone (pid {found.get('pid')}) already serves {home}: "
                "stop it first (cursorops standalone stop)"
            )
        if found is not None and found.get("background"):
            print(
                f"stopping the background standalone (pid {found.get('pid')}) of {home}",
                file=sys.stderr,
                flush=True,
            )
            home_module.stop(home, metadata_url)
        if time.monotonic() > deadline:
            raise StandaloneError(
                f"{home} stayed locked by pid {(found or {}).get('pid')} for "
                f"{TAKEOVER_TIMEOUT_S:.0f} s"
            )
        time.sleep(0.02)


def _set_title(title: str) -> None:
    """Name this process in ``ps``: its command line, and its 15-character ``comm``."""
    # Keep the environment as it is in /proc/PID/environ: only the command line changes.
    os.environ["SPT_NOENV"] = "1"
    import setproctitle

    setproctitle.setproctitle(title)


# -- stop and status ------------------------------------------------------------------


def stop(home: str, metadata_url: str | None) -> tuple[dict[str, Any], list[str]]:
    sock = home_module.socket_path(home, metadata_url)
    pid = home_module.stop(home, metadata_url)
    if pid is None:
        return (
            {"stopped": False, "socket": str(sock)},
            [f"No cursorops standalone serves {home}"],
        )
    return (
        {"stopped": True, "pid": pid, "socket": str(sock)},
        [f"Stopped cursorops standalone {pid}"],
    )


def status(home: str, metadata_url: str | None) -> tuple[dict[str, Any], list[str]]:
    from cursorops.cli import output

    sock = home_module.socket_path(home, metadata_url)
    found = home_module.status(home, metadata_url)
    if found is None:
        return (
            {"running": False, "socket": str(sock)},
            [f"No cursorops standalone serves {home}"],
        )
    idle = found.get("idleTimeoutMs")
    started = found.get("startedMs")
    mode = (
        f"background (stops after {idle // 1000} s without a request)"
        if found.get("background") and isinstance(idle, int)
        else "background"
        if found.get("background")
        else "foreground"
    )
    return (
        {"running": True, **found},
        [
            f"pid:            {found.get('pid')}",
            f"home:           {found.get('home')}",
            f"metadata store: {found.get('metadataUrl')}",
            f"socket:         {found.get('socket')}",
            f"mode:           {mode}",
            f"started:        {output.format_time(started if isinstance(started, int) else None)}",
            f"requests:       {found.get('served')} served",
        ],
    )
