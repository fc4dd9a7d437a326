"""The ``cursorops`` command: pulsar-admin and pulsar-client habits over the broker.

Global options come before the command (``-o`` is also accepted after it)::

    cursorops [--home PATH] [--role ROLE] [--metadata-url URL] [-o text|json] COMMAND ...

Every admin command is a declared operation (:mod:`cursorops.operations`): it runs as a
request to a broker's admin REST, the home's own standalone (started in the background
when none serves the home) or ``--admin-url`` (:mod:`cursorops.cli.commands`). The few
commands that are not admin operations (``standalone``, ``demo``, ``db migrate``) run
here, on the home. This module is the only place that reads the CLI's environment
variables (``CURSOROPS_HOME``, ``CURSOROPS_ROLE``, ``CURSOROPS_METADATA_URL``, ...).

Every :class:`~cursorops.core.domain.errors.CursorOpsError` becomes one line on stderr,
``error: <message>``, and the exit code of its family (:mod:`cursorops.core.domain.exit_codes`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn, TextIO

from cursorops.cli import commands as commands_module
from cursorops.cli import output, values
from cursorops.core.domain.errors import CursorOpsError
from cursorops.core.domain.exit_codes import EXIT_CODES, EXIT_UNEXPECTED, exit_code
from cursorops.core.domain.legible import legible

if TYPE_CHECKING:
    from cursorops.cli.transport import Transport
    from cursorops.core.domain.config import Config
    from cursorops.operations.declaration import Operation

DEFAULT_HOME = "~/.cursorops"
DEFAULT_ROLE = "admin"
__all__ = ["EXIT_CODES", "EXIT_UNEXPECTED", "exit_code", "main"]

OUTPUTS = ("text", "json", "csv", "table")
"""``-o``: text and json for every command; the others for the commands that declare them
(:attr:`~cursorops.operations.declaration.Operation.formats`)."""
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE, what a shell reports for a Unix tool whose reader went away (``| head``)."""


@dataclass
class Result:
    """What a command answers: one JSON document, and the same for people as lines."""

    document: object
    lines: list[str] = field(default_factory=list)
    exit_code: int = 0


class Context:
    """The caller's role and output mode, and a broker opened on first use."""

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.role: str = args.role or os.environ.get("CURSOROPS_ROLE") or DEFAULT_ROLE
        self.json: bool = args.output == "json"
        self.out = out
        self.home: str = args.home
        self.metadata_url: str | None = args.metadata_url or None

    def config(self) -> Config:
        from cursorops.core.domain.config import Config

        # The flags win over the environment they default from; the rest
        # (CURSOROPS_LEDGER_ROOT) comes from the environment as is.
        return Config.from_environ(
            {
                **os.environ,
                "CURSOROPS_HOME": self.home,
                "CURSOROPS_METADATA_URL": self.metadata_url or "",
            }
        )


Handler = Callable[[Context, argparse.Namespace], Result]


# -- gated operations ------------------------------------------------------------


class _Version(argparse.Action):
    """``--version``: prints ``cursorops <version>`` and exits, as pulsar-admin's does; the
    installed metadata is read only then, not on every command."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import cursorops

        print(f"cursorops {cursorops.__version__}")
        parser.exit()


# -- client --------------------------------------------------------------------


def demo(ctx: Context, args: argparse.Namespace) -> Result:
    from cursorops.cli import demo as demo_module

    config = ctx.config()
    if args.protocol:
        from cursorops.cli import protocol_demo

        summary = protocol_demo.run(config, ctx.role, say=None if ctx.json else ctx.out)
        return Result(summary, [], 0 if summary["ok"] else EXIT_UNEXPECTED)
    cap = config.max_partitions_per_topic
    summary = demo_module.run(
        config,
        ctx.role,
        partitions=values.positive(args.partitions, "--partitions", cap),
        say=None if ctx.json else ctx.out,
    )
    return Result(summary, [], 0 if summary["ok"] else EXIT_UNEXPECTED)


# -- standalone ----------------------------------------------------------------


def standalone(ctx: Context, args: argparse.Namespace) -> Result:
    from cursorops.cli import standalone_home

    # status and stop only talk to the home's socket: they import no broker.
    if args.standalone_action == "stop":
        return Result(*standalone_home.stop(ctx.home, ctx.metadata_url))
    if args.standalone_action == "status":
        return Result(*standalone_home.status(ctx.home, ctx.metadata_url))

    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.wire import standalone as standalone_module
    from cursorops.wire.tls import TlsSettings

    if args.idle_timeout is not None and not args.background:
        raise InvalidArgumentError("--idle-timeout is for a --background standalone")
    idle_ms = values.positive(
        values.parse_duration_ms(args.idle_timeout or "1h", "--idle-timeout"), "--idle-timeout"
    )
    tls = None
    if args.tls_cert_file or args.tls_key_file:
        if not (args.tls_cert_file and args.tls_key_file):
            raise InvalidArgumentError("TLS needs both --tls-cert-file and --tls-key-file")
        tls = TlsSettings(
            args.tls_cert_file,
            args.tls_key_file,
            args.tls_trust_certs_file,
            args.tls_require_client_cert,
        )
    elif args.tls_trust_certs_file or args.tls_require_client_cert:
        raise InvalidArgumentError(
            "TLS client certificates need --tls-cert-file and --tls-key-file"
        )
    settings = standalone_module.StandaloneSettings(
        bind=args.bind,
        broker_port=None if args.background else values.port(args.broker_port, "--broker-port"),
        web_port=None
        if args.no_web or args.background
        else values.port(args.web_port, "--web-port"),
        role=ctx.role,
        log_level=args.log_level,
        auth_token_secret=args.auth_token_secret,
        auth_basic_file=args.auth_basic_file,
        auth_tls=args.auth_tls,
        anonymous_role=args.anonymous_role or None,
        tls=tls,
        broker_port_tls=values.port(args.broker_port_tls, "--broker-port-tls"),
        web_port_tls=values.port(args.web_port_tls, "--web-port-tls"),
        advertised_listeners=args.advertised_listeners,
        keepalive_s=values.positive(args.keepalive, "--keepalive"),
        idle_timeout_s=idle_ms / 1000 if args.background else None,
    )
    standalone_module.check(settings)
    config = ctx.config()
    if not standalone_home.serve(
        ctx.home, ctx.metadata_url, config, settings, background=args.background
    ):
        return Result({"stopped": True, "servedElsewhere": True}, [])
    return Result({"stopped": True}, ["cursorops standalone stopped"])


# -- the metadata store's schema ------------------------------------------------


def db_migrate(ctx: Context, args: argparse.Namespace) -> Result:
    from cursorops.core.services.broker import Broker

    done = Broker.migrate_metadata(ctx.config())
    line = (
        f"Migrated the metadata store {done.url} from {done.before or 'no revision'} "
        f"to {done.after}"
        if done.migrated
        else f"The metadata store {done.url} is up to date (revision {done.after})"
    )
    return Result(
        {
            "metadataStore": done.url,
            "from": done.before,
            "to": done.after,
            "migrated": done.migrated,
        },
        [line],
    )


# -- parser --------------------------------------------------------------------


_ROLE_HELP = (
    "role the command acts as (env CURSOROPS_ROLE, default 'admin'). 'admin' is a "
    "superuser of the embedded default installation. The role is asserted, not "
    "authenticated: whoever can run this command against a home can claim any role."
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error names what the user typed legibly: a control
    character in a stray argument is spelled out, not printed (subcommands' parsers are
    of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        shown = legible(message).encode("utf-8", "backslashreplace").decode("utf-8")
        self.exit(2, f"{self.prog}: error: {shown}\n")


def build_parser() -> argparse.ArgumentParser:
    env = os.environ
    parser: argparse.ArgumentParser = _Parser(
        prog="cursorops",
        description="Operate Pulsar subscription cursors: skip by message id, exact backlog.",
        epilog="Exit codes: 0 ok, 1 unexpected, 2 invalid input (or usage), 3 not found, "
        "4 conflict, 5 not authorized, 6 store failure.",
    )
    parser.add_argument("--version", action=_Version, help="print the version")
    parser.add_argument(
        "--home",
        default=env.get("CURSOROPS_HOME") or DEFAULT_HOME,
        help="installation folder (env CURSOROPS_HOME, default ~/.cursorops): "
        "SQLite metadata and Parquet ledgers",
    )
    # No default here: an explicit --role is refused with --admin-url (Context resolves it).
    parser.add_argument("--role", default=None, help=_ROLE_HELP)
    parser.add_argument(
        "--admin-url",
        default=env.get("CURSOROPS_ADMIN_URL") or None,
        help="talk to a deployment instead of a home: the URL its /admin/v2 paths live under, "
        "e.g. http://127.0.0.1:28080/cursorops (env CURSOROPS_ADMIN_URL); every command then "
        "runs through its REST API as the logged-in user",
    )
    parser.add_argument(
        "--auth-token",
        default=env.get("CURSOROPS_AUTH_TOKEN") or None,
        help="the deployment's API token (env CURSOROPS_AUTH_TOKEN), with --admin-url",
    )
    parser.add_argument(
        "--login",
        metavar="USER",
        help="log in as USER (password from CURSOROPS_PASSWORD or the terminal), with --admin-url",
    )
    parser.add_argument(
        "--metadata-url",
        default=env.get("CURSOROPS_METADATA_URL") or None,
        help="SQLAlchemy URL of the metadata store, e.g. postgresql+psycopg://... "
        "(env CURSOROPS_METADATA_URL; default SQLite under the home)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="text",
        help="text for people, json for scripts (one JSON document on stdout); csv and "
        "table for a command that answers rows (backlog query)",
    )
    # The global options are also accepted after the command (and shown in its --help);
    # SUPPRESS keeps the global value, or its default, when absent there.
    common: argparse.ArgumentParser = _Parser(add_help=False)
    shared = common.add_argument_group("global options (also accepted before the command)")
    shared.add_argument("--home", default=argparse.SUPPRESS, help="installation folder")
    shared.add_argument("--role", default=argparse.SUPPRESS, help="the Pulsar role to act as")
    shared.add_argument("--admin-url", default=argparse.SUPPRESS, help="a deployment's admin URL")
    shared.add_argument("--auth-token", default=argparse.SUPPRESS, help="its API token")
    shared.add_argument("--login", metavar="USER", default=argparse.SUPPRESS, help="log in as USER")
    shared.add_argument(
        "--metadata-url", default=argparse.SUPPRESS, help="the metadata store's SQLAlchemy URL"
    )
    shared.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default=argparse.SUPPRESS,
        help="text or json (csv, table: backlog query)",
    )

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    tenants = commands.add_parser(
        "tenants", parents=[common], help="create, list and delete tenants"
    ).add_subparsers(dest="action", metavar="ACTION", required=True)
    namespaces = commands.add_parser(
        "namespaces", parents=[common], help="create namespaces, grant permissions"
    )
    ns = namespaces.add_subparsers(dest="action", metavar="ACTION", required=True)
    topics = commands.add_parser(
        "topics", parents=[common], help="topics and subscriptions (pulsar-admin topics)"
    )
    tp = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = commands.add_parser(
        "demo",
        parents=[common],
        help="walk through a poison-pill and a delayed-message skip on a fresh topic "
        "(creates tenant demo: needs a superuser role such as the default admin)",
    )
    p.add_argument(
        "--partitions", type=values.ascii_int, default=4, help="partitions of the demo topic"
    )
    p.add_argument(
        "--protocol",
        action="store_true",
        help="a real pulsar-client app's poison pill, through cursorops standalone and a local "
        "Airflow (started and stopped): the app nacks it, alice asks for the skip, her own "
        "approval is refused, bob approves, the app moves on",
    )
    p.set_defaults(handler=demo)

    p = commands.add_parser(
        "standalone",
        parents=[common],
        help="serve Pulsar's binary protocol and the admin REST paths on this home "
        "(as pulsar standalone; Ctrl-C stops it)",
    )
    p.add_argument(
        "--broker-port",
        type=values.ascii_int,
        default=6650,
        help="binary protocol port (default 6650; 0 = any free port)",
    )
    p.add_argument(
        "--web-port",
        type=values.ascii_int,
        default=8080,
        help="admin REST port, /admin/v2/... (default 8080; 0 = any free port)",
    )
    p.add_argument("--no-web", action="store_true", help="serve the binary protocol only")
    p.add_argument(
        "--keepalive",
        type=values.ascii_int,
        default=30,
        metavar="SECONDS",
        help="ping a connection silent this long, close it after twice as long (default 30)",
    )
    p.add_argument(
        "--auth-token-secret",
        metavar="KEY",
        help="turn on Pulsar's token authentication: the HS256 secret key "
        "(data:;base64,..., file:///path or a path); a client's role is its token's subject",
    )
    p.add_argument(
        "--auth-basic-file",
        metavar="PATH",
        help="turn on Pulsar's basic authentication: an htpasswd file of bcrypt hashes "
        "(htpasswd -B); a client's role is its user name",
    )
    p.add_argument(
        "--auth-tls",
        action="store_true",
        help="turn on Pulsar's TLS authentication: a client's role is its certificate's "
        "common name (needs --tls-trust-certs-file)",
    )
    p.add_argument(
        "--anonymous-role",
        metavar="ROLE",
        help="with authentication on, the role of a client on a loopback address that "
        "offers no credentials (default: such a client is refused)",
    )
    p.add_argument(
        "--tls-cert-file",
        metavar="PATH",
        help="serve TLS too (pulsar+ssl:// and https://): the server's certificate chain (PEM)",
    )
    p.add_argument("--tls-key-file", metavar="PATH", help="the server certificate's key (PEM)")
    p.add_argument(
        "--tls-trust-certs-file",
        metavar="PATH",
        help="CA certificates (PEM) a client certificate must chain to; a client may then "
        "present one, and an untrusted one is refused",
    )
    p.add_argument(
        "--tls-require-client-cert",
        action="store_true",
        help="refuse TLS clients without a trusted certificate",
    )
    p.add_argument(
        "--broker-port-tls",
        type=values.ascii_int,
        default=6651,
        help="binary protocol port over TLS (default 6651; 0 = any free port)",
    )
    p.add_argument(
        "--web-port-tls",
        type=values.ascii_int,
        default=8443,
        help="admin REST port over TLS (default 8443; 0 = any free port)",
    )
    p.add_argument(
        "--advertised-listeners",
        metavar="LISTENERS",
        help="Pulsar's advertisedListeners: name:pulsar://host:port,name:pulsar+ssl://host:port"
        ",...; a lookup naming a listener gets its URLs, one naming none the first's",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log lines on stderr (default info; debug shows every command)",
    )
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--background",
        action="store_true",
        help="serve only the home's private admin socket, until stopped or idle (what a "
        "command starts when no standalone serves its home)",
    )
    p.add_argument(
        "--idle-timeout",
        metavar="DURATION",
        help="with --background: stop after this long without a request (default 1h)",
    )
    p.set_defaults(handler=standalone, standalone_action=None)
    sa = p.add_subparsers(dest="standalone_action", metavar="ACTION")
    sa.add_parser(
        "stop", parents=[common], help="stop the standalone serving this home (either kind)"
    )
    sa.add_parser(
        "status",
        parents=[common],
        help="the standalone serving this home: pid, store, socket, kind, requests served",
    )

    db = commands.add_parser("db", parents=[common], help="the metadata store's schema")
    dbs = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = dbs.add_parser(
        "migrate",
        parents=[common],
        help="upgrade the metadata store's schema to this release (idempotent; a home "
        "migrates itself, a PostgreSQL store waits for this)",
    )
    p.set_defaults(handler=db_migrate)

    audit = commands.add_parser(
        "audit",
        parents=[common],
        help="the backlog audit's records and poison-pill radar, and the applied skips",
    )
    au = audit.add_subparsers(dest="action", metavar="ACTION", required=True)
    commands_module.add_commands(
        commands, {"tenants": tenants, "namespaces": ns, "topics": tp, "audit": au}, common
    )
    return parser


def report_error(message: str) -> None:
    """One line on stderr, whatever the message holds (newlines, undecodable bytes)."""
    line = legible(" ".join(message.split()))
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")
    print(f"error: {line}", file=sys.stderr)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one ``error:`` line and an exit code, never a traceback.

    Exit codes: 0 ok, 2 invalid input or usage, 3 not found, 4 conflict, 5 not
    authorized, 6 store failure, 1 unexpected (a bug: one line too; set
    ``CURSOROPS_TRACEBACK=1`` to see the traceback), 130 interrupted, 141 the
    reader of the output went away (``| head``), silently, as Unix tools do.
    """
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the command ``args`` (from :func:`build_parser`) parsed; its exit code."""
    ctx = Context(args, sys.stdout)
    operation = getattr(args, "operation", None)
    if operation is not None:
        handler: Handler = _through_rest(operation)
    elif getattr(args, "admin_url", None):
        handler = _on_the_home_only
    else:
        handler = args.handler
    try:
        _check_output(args.output, operation)
        result = handler(ctx, args)
        if ctx.json:
            output.emit_json(result.document, ctx.out)
        else:
            for line in result.lines:
                print(legible(line), file=ctx.out)
        ctx.out.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except CursorOpsError as exc:
        report_error(str(exc) or type(exc).__name__)
        return exit_code(exc)
    except KeyboardInterrupt:
        report_error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("CURSOROPS_TRACEBACK"):
            raise
        report_error(f"unexpected {type(exc).__name__}: {exc}")
        return EXIT_UNEXPECTED
    return result.exit_code


def _check_output(output: str, operation: Operation | None) -> None:
    """Refuse an output mode the command does not print, before anything is sent."""
    if output in ("text", "json") or (operation is not None and output in operation.formats):
        return
    from cursorops.core.domain.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"-o {output} is for a command that answers rows (backlog query); this one prints "
        "text or json"
    )


def _on_the_home_only(ctx: Context, args: argparse.Namespace) -> Result:
    from cursorops.core.domain.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"'{args.command}' runs on this machine's home, not through --admin-url: every admin "
        "command does (cursorops --help lists them)"
    )


def _through_rest(operation: Operation) -> Handler:
    """The declared operation, sent to the admin REST of ``--admin-url`` as the logged-in
    user, or of the home's own standalone (started when none serves it) as ``--role``."""

    def handler(ctx: Context, args: argparse.Namespace) -> Result:
        from cursorops.core.domain.errors import StandaloneError

        try:
            document, lines = commands_module.run(operation, args, _transport(ctx, args))
        except StandaloneError:
            if args.admin_url:
                raise
            # The home's standalone stopped (its idle timeout) between finding it and
            # connecting: nothing was sent; find or start one again, once.
            document, lines = commands_module.run(operation, args, _transport(ctx, args))
        return Result(document, lines)

    return handler


def _transport(ctx: Context, args: argparse.Namespace) -> Transport:
    from cursorops.cli.transport import Transport

    if args.admin_url:
        from cursorops.cli.login import token_for
        from cursorops.core.domain.errors import InvalidArgumentError

        if args.role is not None:
            raise InvalidArgumentError(
                "--role is for the embedded home; with --admin-url you act as the logged-in user"
            )
        token = token_for(args)
        return Transport(url=args.admin_url, headers={"Authorization": f"Bearer {token}"})
    from cursorops.cli.values import utf8_text

    role = utf8_text(ctx.role, "--role")  # argv's undecodable bytes cannot travel in a header
    return home_transport(ctx.home, ctx.metadata_url, role)


def home_transport(home: str, metadata_url: str | None, role: str) -> Transport:
    """The admin REST of the standalone serving ``home`` (started when none does), over its
    private socket, as ``role``."""
    from cursorops.cli import home as home_module
    from cursorops.cli.transport import Transport
    from cursorops.core.domain.admin_socket import ROLE_HEADER
    from cursorops.core.domain.header_text import header_value

    # A person at a terminal is told why the first command on a home takes seconds; a
    # script's stderr keeps only errors.
    notice = _to_stderr if sys.stderr.isatty() else None
    socket = home_module.serving_socket(home, metadata_url, notice=notice)
    return Transport(socket_path=str(socket), headers={ROLE_HEADER: header_value(role)})


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
