"""`buzz relay serve`: run the relay on one port (WebSocket, NIP-11, HTTP bridge)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, NoReturn

import click
import orjson

from buzz.cli.groups import CommandGroup
from buzz.cli.output import EXIT_CODES, fail
from buzz.relay import banner
from buzz.relay.config import ConfigError, RelayConfig, parse_bind
from buzz.relay.operator import oplog
from buzz.relay.operator.oplog import LOG_FORMATS
from buzz.store.base import StoreError, StoreUnreachable


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the relay's event loop: uvloop when installed (a faster drop-in loop), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


@click.group(cls=CommandGroup)
def relay() -> None:
    """Run and inspect the relay.

    \b
    Example:
      buzz relay serve --bind 127.0.0.1:3000 --data-dir ./buzz-data
    """


@relay.command()
@click.option(
    "--bind", default=None, help="host:port to listen on [env BUZZ_BIND_ADDR; default 127.0.0.1:3000]"
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for the SQLite file and relay key [env BUZZ_DATA_DIR; default ./buzz-data]",
)
@click.option("--db", default=None, help="postgresql://… to use PostgreSQL [env BUZZ_DATABASE_URL]")
@click.option(
    "--redis-url",
    default=None,
    help="redis://… to run as one of several replicas; needs --db postgresql://… "
    "[env BUZZ_REDIS_URL or REDIS_URL; unset: single process]",
)
@click.option(
    "--metrics-bind",
    envvar="BUZZ_METRICS_BIND",
    default=None,
    help="host:port for GET /metrics (Prometheus), a listener of its own [env BUZZ_METRICS_BIND; unset: off]",
)
@click.option(
    "--log-level",
    envvar="BUZZ_LOG_LEVEL",
    default="INFO",
    show_default=True,
    help="DEBUG, INFO, WARNING or ERROR [env BUZZ_LOG_LEVEL]",
)
@click.option(
    "--log-format",
    envvar="BUZZ_LOG_FORMAT",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    help="json: one JSON object per line, for log shippers [env BUZZ_LOG_FORMAT]",
)
def serve(
    bind: str | None,
    data_dir: Path | None,
    db: str | None,
    redis_url: str | None,
    metrics_bind: str | None,
    log_level: str,
    log_format: str,
) -> None:
    """Start the relay and serve until SIGINT/SIGTERM.

    An invalid value (a --bind port beyond 65535, a non-hex key, …) or a port already in use is
    one JSON line on stderr and exit 2, and so is a database server that does not answer
    (`network_error`); a data dir another relay holds or that cannot be one, exit 1.

    \b
    Example:
      buzz relay serve --bind 127.0.0.1:3000 --data-dir ./buzz-data
    \b
    Several replicas, one PostgreSQL and one Redis (README: Run several replicas):
      buzz relay serve --bind 127.0.0.1:3001 --db postgresql://localhost/buzz --redis-url redis://127.0.0.1:6379/0
    \b
    Huddles across replicas: the same with BUZZ_MESH=on on every replica.
    """
    overrides: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": db,
        "redis_url": redis_url,
        "metrics_bind": metrics_bind,
    }
    # A refusal names what the operator typed: the flag, or the variable click read it from.
    flags = {
        "data_dir": "--data-dir",
        "database_url": "--db",
        "redis_url": "--redis-url",
        "metrics_bind": _given("metrics_bind", "--metrics-bind", "BUZZ_METRICS_BIND"),
        "host": "--bind",
        "port": "--bind",
    }
    try:
        try:
            oplog.configure(log_level, log_format)
        except ValueError as exc:
            raise ConfigError(f"{_given('log_level', '--log-level', 'BUZZ_LOG_LEVEL')}: {exc}") from None
        if bind is not None:  # `--bind ''` is a bad address, not "the default"
            overrides["host"], overrides["port"] = parse_bind(bind, "--bind")
        config = RelayConfig.from_env(flags=flags, **overrides)
    except ConfigError as exc:
        _refuse(str(exc))

    from buzz.relay.server import serve as run_server

    def announce(relay_obj, url: str) -> None:
        for text in banner.lines(relay_obj, url):
            print(text, flush=True)

    taken = port_taken(config.host, config.port)
    if taken is not None:  # before the data dir and its store are made: a refusal leaves nothing
        _refuse(port_in_use(taken, config))
    try:
        run_loop(run_server(config, announce))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            _refuse(port_in_use(exc, config))
        if exc.errno == errno.EADDRNOTAVAIL:
            _refuse(address_not_here(config))
        if isinstance(exc, socket.gaierror):  # a --bind host name that does not resolve
            _refuse(address_unknown(config, exc))
        fail(os_error_text(exc))
    except StoreUnreachable as exc:  # the database server does not answer: as `buzz admin --db`
        fail(str(exc), "network_error")
    except StoreError as exc:  # data dir locked, database missing or refusing us
        fail(str(exc))


def _given(param: str, flag: str, variable: str) -> str:
    """`variable` when click read `param` from the environment, else `flag`."""
    ctx = click.get_current_context(silent=True)
    from_env = ctx is not None and ctx.get_parameter_source(param) is click.core.ParameterSource.ENVIRONMENT
    return variable if from_env else flag


def _setting(where: str, value: str) -> str:
    """How to give `value` the way the operator gave it: `--bind 127.0.0.1:3000` for a flag,
    `BUZZ_BIND_ADDR=127.0.0.1:3000` for a variable."""
    return f"{where} {value}" if where.startswith("--") else f"{where}={value}"


def address_unknown(config: RelayConfig, exc: socket.gaierror) -> str:
    """The usage error for a listen host that does not resolve (getaddrinfo failed)."""
    where = config.named("host", "--bind")
    return (
        f"cannot listen on {config.host}: no address of that name ({exc.strerror or exc}); choose "
        f"one with {where}, e.g. {_setting(where, f'127.0.0.1:{config.port}')} (this machine only)"
    )


def address_not_here(config: RelayConfig) -> str:
    """The usage error for a listen host that is no address of this machine (EADDRNOTAVAIL)."""
    where = config.named("host", "--bind")
    return (
        f"cannot listen on {config.host}: it is not an address of this machine; choose one with "
        f"{where}, e.g. {_setting(where, f'127.0.0.1:{config.port}')} (this machine only) or "
        f"{_setting(where, f'0.0.0.0:{config.port}')} (all)"
    )


def os_error_text(exc: OSError) -> str:
    """An OSError as a sentence: what failed on which path (`[Errno 17] File exists: 'x'` becomes
    `cannot use x: file exists`); the path is most often --data-dir or a file inside it."""
    if exc.filename is None or not exc.strerror:
        return str(exc)
    if exc.errno == errno.EEXIST:  # a directory was to be made where a file is
        return f"cannot use {exc.filename} as a directory: it is a file (check --data-dir)"
    return f"cannot use {exc.filename}: {exc.strerror[:1].lower()}{exc.strerror[1:]} (check --data-dir)"


PORT_SCAN = 20  # ports above a taken one that are bind-tested for the suggestion: fast, bounded


def port_in_use(exc: OSError, config: RelayConfig) -> str:
    """The user error for a taken port: which one, and the flag that picks another (the
    metrics listener has its own). asyncio names the address in the message: ('host', port).
    The example port is one `free_port_after` bound a moment ago; when none of the next
    PORT_SCAN binds, the message says so and gives no example."""
    found = re.search(r"\('?\[?([^',\]]*)\]?'?, (\d+)", str(exc))
    host, port = (found.group(1), int(found.group(2))) if found else (config.host, config.port)
    flag = config.named("host", "--bind")
    if config.metrics_bind is not None and port != config.port:
        flag = config.named("metrics_bind", "--metrics-bind")
    shown = f"[{host}]" if ":" in host else host
    taken = f"port {port} on {host} is already in use (another relay or program listens there)"
    free = free_port_after(host, port)
    if free is None:
        return f"{taken}; choose another with {_setting(flag, f'{shown}:<port>')} (no free port found just above it)"
    return (
        f"{taken}; choose another with {_setting(flag, f'{shown}:<port>')}, "
        f"e.g. {_setting(flag, f'{shown}:{free}')} (free just now)"
    )


def free_port_after(host: str, port: int, scan: int = PORT_SCAN) -> int | None:
    """The first of the `scan` ports above `port` (never past 65535) that `host` can listen on
    now, tested as the relay binds (every address `host` resolves to, SO_REUSEADDR); None when
    none can or `host` does not resolve. Free when tested: another program may still take it."""
    try:
        infos = socket.getaddrinfo(host or None, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return None
    addresses = {(family, sockaddr) for family, _, _, _, sockaddr in infos}
    for candidate in range(port + 1, min(port + scan, 65535) + 1):
        if addresses and all(_listens(family, sockaddr, candidate) for family, sockaddr in addresses):
            return candidate
    return None


def port_taken(host: str, port: int) -> OSError | None:
    """EADDRINUSE when another program listens on `host`:`port` now (tested as the relay binds),
    else None; any other failure is left to the relay's own bind, which words it."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return None
    for family, _, _, _, sockaddr in infos:
        try:
            _bound(family, sockaddr).close()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return OSError(exc.errno, f"[Errno {exc.errno}] address ({sockaddr[0]!r}, {port}) in use")
    return None


def _bound(family: int, sockaddr: tuple[Any, ...]) -> socket.socket:
    """A socket bound to `sockaddr` as the relay binds (SO_REUSEADDR; v6 and v4 bound apart, as
    asyncio's create_server); the caller closes it. Raises the bind's OSError."""
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        probe.bind(sockaddr)
    except BaseException:
        probe.close()
        raise
    return probe


def _listens(family: int, sockaddr: tuple[Any, ...], port: int) -> bool:
    """Whether a socket can listen on `sockaddr` with `port` now; it is closed at once."""
    try:
        with _bound(family, (sockaddr[0], port, *sockaddr[2:])) as probe:
            probe.listen(1)
    except OSError:
        return False
    return True


def _refuse(message: str) -> NoReturn:
    """A usage refusal: `fail`'s one JSON line as `usage_error`, exit 2 as click does for a bad
    option; other failures of `serve` go through `fail`."""
    sys.stderr.write(
        orjson.dumps({"error": "usage_error", "message": message, "retryable": False}).decode() + "\n"
    )
    raise SystemExit(EXIT_CODES["usage_error"])
