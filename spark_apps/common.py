"""What every job's driver does: arguments, the topic's scan, errors.

The driver asks the broker for a :class:`~cursorops.core.domain.analysis.topic_scan.TopicScan`
(which segments hold a partition's entries, and each cursor's state, serialized); the
executors read the Parquet segments and decide everything by calling ``core``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from cursorops.core.domain import errors
from cursorops.core.domain.analysis.topic_scan import MESSAGE_SCHEMA, TopicScan
from cursorops.core.domain.config import DEFAULT_HOME, Config
from cursorops.core.domain.durations import ascii_integer
from cursorops.core.domain.errors import CursorOpsError, InvalidArgumentError, LedgerStoreError
from cursorops.core.domain.exit_codes import EXIT_CODES, EXIT_UNEXPECTED, exit_code
from cursorops.core.domain.ids.topic_name import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


__all__ = ["EXIT_CODES", "EXIT_UNEXPECTED", "exit_code"]


def spark_message_schema() -> StructType:
    """The ledger store's row schema as a Spark schema (no inference from file footers)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(MESSAGE_SCHEMA)


def read_messages(spark: SparkSession, scan: TopicScan, columns: Sequence[str]) -> DataFrame:
    """The listed segments of every partition of the scan, ``columns`` only.

    Only segments the metadata store lists are read, so a file a crashed append
    left behind is never seen.
    """
    return read_paths(spark, scan.paths, columns)


def read_paths(spark: SparkSession, paths: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """The segments at ``paths`` (listed by the metadata store), ``columns`` only."""
    schema = spark_message_schema()
    if not paths:
        return spark.createDataFrame([], schema).select(*columns)
    missing = [path for path in paths if "://" not in path and not os.path.exists(path)]
    if missing:
        raise LedgerStoreError(
            f"Cannot read ledger segment {missing[0]}: the file is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    return spark.read.schema(schema).parquet(*paths).select(*columns)


def executor_states(states: Mapping[tuple[str, str], bytes]) -> dict[tuple[str, str], bytes]:
    """The encoded cursor states as a plain dict, for a Spark function's closure.

    No broadcast: a Spark Connect session has no ``SparkContext``. The closure
    travels with the function, pickled once per task; classic PySpark turns a
    pickled function above ``spark.broadcast.UDFCompressionThreshold`` (1 MiB)
    into a broadcast by itself, and Connect sends it in the plan. Both modes run
    the same code and give the same answers.
    """
    return dict(states)


_FILE_IN_ERROR = re.compile(r"(?:file:|/)[^\s,'\"]*?\.parquet")
_PYTHON_ERROR = re.compile(r"core\.errors\.(\w+): (.*)")


def translate_spark_error(exc: Exception, scan: TopicScan | None = None) -> CursorOpsError:
    """A Spark failure as the error it stands for, naming the unreadable file if there is one.

    A ``core`` error raised inside a Python worker comes back as its own class;
    a failed Parquet read becomes LedgerStoreError naming the segment.
    """
    text = str(exc)
    raised = _PYTHON_ERROR.findall(text)
    if raised:
        name, message = raised[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, CursorOpsError):
            return cls(message.strip())
    known = set(scan.paths) if scan is not None else set()
    for match in _FILE_IN_ERROR.findall(text):
        path = match.removeprefix("file:")
        path = "/" + path.lstrip("/") if path.startswith("/") else path
        if not known or path in known:
            first_line = _reason(text)
            return LedgerStoreError(f"Cannot read ledger segment {path}: {first_line}")
    return LedgerStoreError(f"The Spark job failed: {_reason(text)}")


def _reason(text: str) -> str:
    """The innermost cause Spark reports, without the file path (named separately)."""
    causes = re.findall(r"Caused by: [\w.$]+: (.*)", text)
    for line in [*reversed(causes), *text.splitlines()]:
        line = _FILE_IN_ERROR.sub("", line).strip(" .:")
        if line and not line.startswith(("at ", "Traceback", "File ", "JVM stacktrace")):
            return line[:500]
    return "unknown error"


@contextmanager
def spark_errors(scan: TopicScan | None = None) -> Iterator[None]:
    """Translate failures of the Spark actions run inside the block."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except CursorOpsError:
        raise
    except (PySparkException, Py4JError) as exc:
        raise translate_spark_error(exc, scan) from exc


# -- the command line ------------------------------------------------------------------


def ascii_int(text: str) -> int:
    """An integer option (argparse ``type``):
    :func:`cursorops.core.domain.durations.ascii_integer`'s rule."""
    number = ascii_integer(text)
    if number is None:
        raise argparse.ArgumentTypeError(
            f"invalid integer {shown(text)}: use ASCII decimal digits 0-9"
        )
    return number


def base_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options every job of one topic takes: :func:`with_home_options`, and the topic."""
    parser = with_home_options(argparse.ArgumentParser(prog=prog, description=description))
    parser.add_argument("topic", help="persistent://tenant/namespace/topic")
    return parser


def with_home_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with the options every job takes: where the installation is, who asks,
    where Spark runs."""
    parser.add_argument(
        "--home", help=f"cursorops home (env CURSOROPS_HOME, default {DEFAULT_HOME})"
    )
    parser.add_argument(
        "--metadata-url",
        help="metadata store URL (env CURSOROPS_METADATA_URL, default: the SQLite file "
        "under the home)",
    )
    parser.add_argument(
        "--ledger-root",
        help="ledger store folder (env CURSOROPS_LEDGER_ROOT, default 'ledgers' under the home)",
    )
    parser.add_argument(
        "--role",
        default=os.environ.get("CURSOROPS_ROLE") or "admin",
        help="role the job acts as (env CURSOROPS_ROLE, default admin)",
    )
    parser.add_argument(
        "--master",
        help="Spark master (default: spark-submit's --master, else local[*])",
    )
    parser.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run on this Spark Connect server instead of starting Spark here "
        "(env CURSOROPS_SPARK_REMOTE; --master is then ignored)",
    )
    return parser


def config_from(args: argparse.Namespace) -> Config:
    """:meth:`Config.from_environ`, the flags given winning over the environment."""
    flags = {
        "CURSOROPS_HOME": args.home,
        "CURSOROPS_METADATA_URL": args.metadata_url,
        "CURSOROPS_LEDGER_ROOT": args.ledger_root,
    }
    return Config.from_environ({**os.environ, **{k: v for k, v in flags.items() if v}})


def remote_from(args: argparse.Namespace) -> str:
    """``--remote``, else the environment's Connect URL, checked before the job does anything;
    ``""`` (classic Spark) when neither names one."""
    from cursorops.spark.session import remote_url

    return remote_url(args.remote) or ""


def emit_json(document: Any, path: str | None, out: TextIO) -> None:
    """Write the job's answer: to ``path`` when given, else to ``out``."""
    text = json.dumps(document, indent=2, sort_keys=False)
    if path is None:
        out.write(text + "\n")
        out.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as sink:
            sink.write(text + "\n")
    except OSError as exc:
        raise InvalidArgumentError(f"Cannot write the output file {path}: {exc}") from exc


def run_job(job: Callable[[], int], err: TextIO | None = None) -> int:
    """Run a job body; a ``core`` error is one ``error: ...`` line and its family's exit code."""
    try:
        return job()
    except CursorOpsError as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {message}", file=err or sys.stderr)
        return exit_code(exc)
