"""`buzz relay serve` tells the truth (issue 10 item 3) and `buzz` tells its version and how to
get a missing extra (item 2): real processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from buzz.core import nip19
from buzz.relay.operator.relay_key import KEY_FILE
from tests.operator.support import admin, buzz, free_port, served
from tests.support.deadline import scaled


async def test_banner_names_the_bound_url_data_dir_store_workspace_and_pubkey(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with served(data, env={"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true"}) as relay:
        banner = "\n".join(relay.banner)
        await relay.stop()
    from buzz.core.keys import public_key

    pubkey = public_key((data / KEY_FILE).read_text().strip())
    assert f"listening on ws://127.0.0.1:{relay.port}" in relay.banner[0]
    assert f"http://127.0.0.1:{relay.port}/" in banner
    assert f"data dir:     {data.resolve()}" in banner
    assert f"store:        SQLite {(data / 'relay.sqlite3').resolve()}" in banner
    assert "fan-out:      in-process" in banner
    assert "workspace:    closed: members only (BUZZ_REQUIRE_RELAY_MEMBERSHIP=true)" in banner
    assert f"relay pubkey: {pubkey} ({nip19.npub(pubkey)})" in banner
    assert f"connect:      buzz --relay ws://127.0.0.1:{relay.port}" in banner
    assert "localhost:3000" not in banner  # never the built-in RELAY_URL default
    assert relay.banner[10] == (
        f"  RELAY_URL:    unset; AUTH and NIP-98 name the host the client dialled, here ws://127.0.0.1:{relay.port}"
        " (set RELAY_URL to the public wss:// URL behind a proxy)"
    )
    assert relay.banner[11] == (
        f"  browser:      http://127.0.0.1:{relay.port}/ (the web workspace: open it and sign in with your key)"
    )


async def test_banner_names_a_configured_relay_url(tmp_path: Path) -> None:
    async with served(tmp_path / "data", env={"RELAY_URL": "wss://chat.example.com"}) as relay:
        await relay.stop()
    # wss:// (behind a TLS proxy): the bound ws:// address cannot authenticate, so the banner
    # names RELAY_URL to connect with (issue 24 item 6; tests/operator/test_relay_url.py)
    assert (
        relay.banner[9]
        == "  connect:      buzz --relay wss://chat.example.com ... (clients must AUTH, NIP-42)"
    )
    assert relay.banner[10] == (
        "  RELAY_URL:    wss://chat.example.com: AUTH and NIP-98 name its scheme (wss://, https://), so "
        f"clients connect through your TLS proxy; one that dials {relay.url} directly fails AUTH"
    )


async def test_banner_shows_a_workspace_closed_by_buzz_admin(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with served(data) as relay:
        assert any("workspace:    open" in line for line in relay.banner)
        await relay.stop()
    admin(data, "workspace", "close")
    async with served(data) as relay:
        assert any("closed: members only (buzz admin workspace close)" in line for line in relay.banner)
        await relay.stop()


async def test_a_second_relay_on_the_same_data_dir_is_refused_with_the_holder_pid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with served(data) as relay:
        done = buzz("relay", "serve", "--bind", "127.0.0.1:0", "--data-dir", str(data))
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"pid {relay.proc.pid}" in json.loads(lines[0])["message"]
        assert await relay.stop() == 0
    async with served(data) as again:  # released on exit: the next start works
        await again.stop()


def _listening(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:`port`, or None when the port is taken."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    sock.listen()
    return sock


def _taken_ports(count: int) -> list[socket.socket]:
    """Listening sockets on `count` neighbouring ports p, p + 1, ... (p chosen by the system)."""
    for _ in range(50):
        first = _listening(0)
        assert first is not None
        held = [first]
        for offset in range(1, count):
            more = _listening(first.getsockname()[1] + offset)
            if more is None:
                break
            held.append(more)
        if len(held) == count:
            return held
        for sock in held:
            sock.close()
    raise AssertionError(f"no {count} neighbouring free ports on 127.0.0.1")


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Errno" not in lines[0], result.stderr
    error = json.loads(lines[0])
    assert (error["error"], error["retryable"]) == ("usage_error", False), error
    return str(error["message"])


def test_a_port_in_use_is_one_line_naming_it_and_a_port_checked_free(tmp_path: Path) -> None:
    """The two ports just above the taken one are taken too: the example skips them, so it is
    a port the relay bind-tested. Whether it is still free afterwards is not this test's to
    say: another test (or the metrics run's own port 0) may take it a moment later."""
    held = _taken_ports(3)
    try:
        port = held[0].getsockname()[1]
        done = buzz("relay", "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"))
        metrics = buzz(
            "relay", "serve", "--bind", "127.0.0.1:0", "--metrics-bind", f"127.0.0.1:{port}",
            "--data-dir", str(tmp_path / "other"),
        )  # fmt: skip
    finally:
        for sock in held:
            sock.close()
    for result, flag in ((done, "--bind"), (metrics, "--metrics-bind")):
        message = _refusal(result)
        prefix = (
            f"port {port} on 127.0.0.1 is already in use (another relay or program listens there); "
            f"choose another with {flag} 127.0.0.1:<port>, e.g. {flag} 127.0.0.1:"
        )
        assert message.startswith(prefix) and message.endswith(" (free just now)"), message
        suggested = int(message[len(prefix) :].split(" ", 1)[0])
        assert port + 2 < suggested <= port + 20, message  # port + 1 and + 2 were taken: skipped
    assert not (tmp_path / "data").exists()  # refused before the data dir and its store are made


def _hold_last_port() -> socket.socket | None:
    """A socket listening on 65535, waiting while someone else holds it: another run of this
    very test beside this one (two suites on one box) holds it for a moment and then lets it go,
    and a relay started in that gap would serve there instead of refusing. None when it stays
    taken for the whole wait: a program that keeps it is as good as our holder."""
    deadline = time.monotonic() + scaled(10)
    while (holder := _listening(65535)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return holder


def test_a_port_in_use_with_nothing_free_above_it_gets_no_example(tmp_path: Path) -> None:
    """65535 has no port above it: the message says so instead of naming one."""
    holder = _hold_last_port()
    try:
        message = _refusal(buzz("relay", "serve", "--bind", "127.0.0.1:65535", "--data-dir", str(tmp_path)))
    finally:
        if holder is not None:
            holder.close()
    assert message == (
        "port 65535 on 127.0.0.1 is already in use (another relay or program listens there); "
        "choose another with --bind 127.0.0.1:<port> (no free port found just above it)"
    )


def test_bind_with_an_invalid_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for bind in ("127.0.0.1:70000", "127.0.0.1:http", "nohost"):
        done = buzz("relay", "serve", "--bind", bind, "--data-dir", str(tmp_path))
        assert done.returncode == 2, (bind, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "--bind" in json.loads(lines[0])["message"], done.stderr
    assert not (tmp_path / "relay.sqlite3").exists()


def test_an_empty_bind_or_one_with_two_colons_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`--bind ''` served on the default address; `host:port:x` reached the resolver as the host
    `host:port` and came back as a raw errno with exit 1 (issue 24 item 8)."""
    for bind, says in (
        ("", "--bind must be host:port, got ''"),
        (
            "127.0.0.1:3000:5",
            "--bind must be host:port with one colon (an IPv6 address in brackets, [::1]:3000), "
            "got '127.0.0.1:3000:5'",
        ),
    ):
        assert _refusal(buzz("relay", "serve", "--bind", bind, "--data-dir", str(tmp_path))) == says
    assert not (tmp_path / "relay.sqlite3").exists()


def test_a_bind_host_that_does_not_resolve_is_one_line_and_exit_2(tmp_path: Path) -> None:
    message = _refusal(
        buzz("relay", "serve", "--bind", "nosuchhost.invalid:3934", "--data-dir", str(tmp_path))
    )
    assert message.startswith("cannot listen on nosuchhost.invalid: no address of that name (")
    assert message.endswith("); choose one with --bind, e.g. --bind 127.0.0.1:3934 (this machine only)")


def test_a_refusal_names_the_flag_or_the_variable_that_was_used(tmp_path: Path) -> None:
    """The operator typed --db, not BUZZ_DATABASE_URL: the message names what was typed."""
    data = ("--bind", "127.0.0.1:0", "--data-dir", str(tmp_path))
    for args, env, says in (
        (("--db", "mysql://x"), {}, "--db must start with"),
        ((), {"BUZZ_DATABASE_URL": "mysql://x"}, "BUZZ_DATABASE_URL must start with"),
        ((), {"DATABASE_URL": "mysql://x"}, "DATABASE_URL must start with"),
        (("--redis-url", "http://x"), {}, "--redis-url must be a redis:// URL"),
        ((), {"REDIS_URL": "http://x"}, "REDIS_URL must be a redis:// URL"),
        (("--redis-url", "redis://127.0.0.1:6379"), {}, "--redis-url needs PostgreSQL (--db postgresql://"),
        (("--metrics-bind", "nope"), {}, "--metrics-bind must be host:port, got 'nope'"),
        ((), {"BUZZ_METRICS_BIND": "nope"}, "BUZZ_METRICS_BIND must be host:port, got 'nope'"),
        (("--log-level", "LOUD"), {}, "--log-level: unknown log level 'LOUD'"),
        ((), {"BUZZ_LOG_LEVEL": "LOUD"}, "BUZZ_LOG_LEVEL: unknown log level 'LOUD'"),
    ):
        message = _refusal(buzz("relay", "serve", *data, *args, env=env))
        assert message.startswith(says), (args, env, message)
    assert not (tmp_path / "relay.sqlite3").exists()  # refused before anything was opened
    message = _refusal(
        buzz("relay", "serve", "--data-dir", str(tmp_path), env={"BUZZ_BIND_ADDR": "192.0.2.1:3934"})
    )
    assert message == (
        "cannot listen on 192.0.2.1: it is not an address of this machine; choose one with BUZZ_BIND_ADDR, "
        "e.g. BUZZ_BIND_ADDR=127.0.0.1:3934 (this machine only) or BUZZ_BIND_ADDR=0.0.0.0:3934 (all)"
    )


def test_a_bind_address_of_another_machine_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails, nothing is sent."""
    message = _refusal(buzz("relay", "serve", "--bind", "192.0.2.1:3934", "--data-dir", str(tmp_path)))
    assert message == (
        "cannot listen on 192.0.2.1: it is not an address of this machine; choose one with --bind, "
        "e.g. --bind 127.0.0.1:3934 (this machine only) or --bind 0.0.0.0:3934 (all)"
    )


def test_a_data_dir_that_cannot_be_one_is_one_line_naming_it(tmp_path: Path) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("not a directory")
    for data_dir, says in (
        (afile, f"cannot use {afile} as a directory: it is a file (check --data-dir)"),
        (afile / "data", f"cannot use {afile / 'data'}: not a directory (check --data-dir)"),
    ):
        done = buzz("relay", "serve", "--bind", "127.0.0.1:0", "--data-dir", str(data_dir))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert json.loads(lines[0]) == {"error": "user_error", "message": says, "retryable": False}
    assert afile.read_text() == "not a directory"


def test_a_database_nobody_answers_is_a_network_error_as_in_buzz_admin(tmp_path: Path) -> None:
    """The same unreachable server is exit 2 `network_error` whichever command dialled it."""
    done = buzz(
        "relay", "serve", "--bind", "127.0.0.1:0", "--db", f"postgresql://127.0.0.1:{free_port()}/buzz"
    )
    (line,) = done.stderr.strip().splitlines()
    error = json.loads(line)
    assert (done.returncode, error["error"], error["retryable"]) == (2, "network_error", True), line
    assert error["message"].startswith("cannot connect to PostgreSQL"), line


def test_version() -> None:
    from importlib.metadata import version

    done = buzz("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"buzz {version('buzz')}"


def test_a_missing_extra_is_one_line_saying_how_to_install_it() -> None:
    """As if numpy (voice extra) and mcp (agent extra) were not installed."""
    for blocked, argv, extra in (
        ("numpy", ["huddle", "join", "--channel", "00000000-0000-4000-8000-000000000000"], "voice"),
        ("mcp", ["mcp"], "agent"),
    ):
        code = (
            f"import sys; sys.modules[{blocked!r}] = None; sys.argv = ['buzz', *{argv!r}];"
            " from buzz.cli.main import main; main()"
        )
        env_key = {"BUZZ_PRIVATE_KEY": "1" * 64}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**_env(), **env_key},
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        message = json.loads(lines[0])["message"]
        assert repr(blocked) in message and f".[{extra}]" in message and "make run" in message


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}


def test_make_run_on_a_taken_port_names_its_own_setting(tmp_path) -> None:
    """`make run` passes BIND to --bind: the refusal names --bind, and make adds the line in its
    own terms, so a newcomer who typed `make run` is not left to translate."""
    root = Path(__file__).resolve().parents[2]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                "make",
                "-s",
                "-o",
                ".venv/.runtime",
                "run",
                f"BIND=127.0.0.1:{port}",
                f"DATA={tmp_path / 'data'}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert json.loads(lines[0])["error"] == "usage_error" and f"port {port}" in lines[0]
    assert lines[1].startswith("with make: make run BIND=")
    assert not (tmp_path / "data").exists()
