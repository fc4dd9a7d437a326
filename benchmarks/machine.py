"""What the benchmarks ran on: CPU, cores, RAM, OS, Python, package versions, storage.

Everything is read from the running machine (``/proc/cpuinfo``, ``/proc/meminfo``,
``/proc/mounts``, ``/etc/os-release``, installed package metadata), never assumed.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PACKAGES = ("cursorops", "pyroaring", "pyarrow", "numpy", "SQLAlchemy", "pydantic")
"""The packages whose versions decide the figures."""

_REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Machine:
    cpu_model: str
    logical_cores: int
    usable_cores: int
    """Cores this process may run on (its CPU affinity)."""
    ram_bytes: int
    os_name: str
    kernel: str
    python: str
    sqlite: str
    packages: tuple[tuple[str, str], ...]
    commit: str | None
    """Short hash of ``HEAD`` of the checkout measured, when it is a git checkout."""
    uncommitted: tuple[str, ...]
    """Files of ``core/`` that differ from ``HEAD``: the code measured is not exactly the commit."""

    def line(self) -> str:
        """One line: CPU, cores, RAM, OS, Python, SQLite and package versions."""
        versions = ", ".join(f"{name} {version}" for name, version in self.packages)
        cores = f"{self.logical_cores} cores"
        if self.usable_cores != self.logical_cores:
            cores += f" ({self.usable_cores} usable)"
        commit = f", commit {self.commit}" if self.commit else ""
        if self.commit and self.uncommitted:
            commit += f" with uncommitted changes to {', '.join(self.uncommitted)}"
        return (
            f"{self.cpu_model}, {cores}, {self.ram_bytes / 2**30:.1f} GiB RAM, "
            f"{self.os_name} (Linux {self.kernel}), Python {self.python}, "
            f"SQLite {self.sqlite}, {versions}{commit}"
        )


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def _ram_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(_REPO), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def _uncommitted() -> tuple[str, ...]:
    status = _git("status", "--porcelain", "--", "core")
    if not status:
        return ()
    return tuple(sorted(line[3:].strip() for line in status.splitlines() if line.strip()))


def describe() -> Machine:
    """The machine this process runs on, and the commit of the code it runs.

    Call it when a benchmark starts, right after its imports: the commit and
    the uncommitted files are those of the code that was loaded.
    """
    logical = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = logical
    return Machine(
        cpu_model=_cpu_model(),
        logical_cores=logical,
        usable_cores=usable,
        ram_bytes=_ram_bytes(),
        os_name=_os_name(),
        kernel=platform.release(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        sqlite=sqlite3.sqlite_version,
        packages=tuple((name, _version(name)) for name in PACKAGES),
        commit=(_git("rev-parse", "--short", "HEAD") or "").strip() or None,
        uncommitted=_uncommitted(),
    )


def storage(path: str | Path) -> str:
    """The file system holding ``path``, as ``"ext4 on /dev/vda"`` (from ``/proc/mounts``).

    Durable writes (SQLite commits, Parquet fsyncs) cost what this device costs.
    """
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown file system"
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        device, mount_point, fs_type = fields[0], fields[1], fields[2]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) > best[0]):
            best = (len(mount_point), f"{fs_type} on {device}")
    return best[1] if best else "unknown file system"


if __name__ == "__main__":
    print(describe().line())
