"""`buzz huddle join`: take part in a channel's huddle from the command line (huddle.md §10).

Headless by default: `--input file.wav` is the microphone (silence without it) and
`--record-dir` receives one WAV per remote peer plus `tts.wav` (agent replies spoken locally).
Your own speech is transcribed offline and published as kind 9 in the channel, p-tagged to the
agents present (role `bot`), when agents are present or `--transcribe` is given. Prints a JSON
report when it leaves, also when the huddle is ended while you are in it (`huddle leave --end`
by its starter, an archive, the TTL: `"ended": true`, exit 0; decision 126).

Failures follow the CLI's exit codes (one JSON line on stderr, no report on stdout): 1 a bad
argument (an `--input` that is not a 16-bit PCM WAV with audio is refused before connecting), 2
the relay cannot be reached, or the audio socket or relay connection closed before we left
(`network_error`, "connection lost: …"; a 1012 close says the relay restarted or drained,
decision 99), 3 access (key or tag, AUTH refused, and the relay's uncoded join errors of
huddle.md §4.2: `auth failed`, `not a member`, …), 4 any other refusal (coded errors such as
`room_full`), and `room_ended` for a huddle that had already ended when you joined.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
import wave
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp
import click
import orjson

from buzz.cli import interrupt
from buzz.cli.common import checked_relay_url
from buzz.cli.groups import CommandGroup
from buzz.cli.groups import report as report_failure
from buzz.cli.identity import IdentityError, auth_tags_for, parse_secret_key
from buzz.cli.output import Context, emit, fail
from buzz.client import RelayClient, RelayError
from buzz.client.errors import NetworkError, UserError
from buzz.client.lookups import channel_metadata
from buzz.client.session import CHANNEL_NOT_FOUND, JOIN_KIND
from buzz.client.values import channel_arg
from buzz.core.event import Event
from buzz.core.huddle_control import NOT_A_MEMBER
from buzz.core.huddle_wire import BARGE_IN_MIN_MS, CURRENT_PROTOCOL_VERSION
from buzz.core.keys import public_key


class KeySigner:
    """The CLI's signer for the voice client; adds the agent's NIP-OA tag to AUTH events."""

    def __init__(self, secret_key: str, auth_tags: Sequence[Sequence[str]] = ()) -> None:
        self._secret = secret_key
        self._auth_tags = [list(t) for t in auth_tags]
        self.pubkey = public_key(secret_key)

    def sign(self, kind: int, content: str, tags: Sequence[Sequence[str]]) -> Event:
        extra = self._auth_tags if kind == 22242 else []
        return Event.create(self._secret, kind, content, [*(list(t) for t in tags), *extra])


def _show_line(line: str) -> None:
    """Live huddle lines on stderr (stdout keeps the JSON report); a terminal gets a timestamp."""
    prefix = time.strftime("%H:%M:%S ") if sys.stderr.isatty() else ""
    sys.stderr.write(f"{prefix}{line}\n")
    sys.stderr.flush()


class LiveRoster:
    """The room on a terminal: a rich Live panel on stderr (roster, peer indices, who is
    speaking), redrawn from each `RoomSnapshot`. Used only when stderr is a TTY; otherwise the
    client's plain lines are shown (`_show_line`)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(stderr=True), refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveRoster:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    @property
    def renderable(self) -> object:
        """What the panel shows now (the last table)."""
        return self._live.renderable

    def update(self, snapshot: object) -> None:
        from rich.markup import escape
        from rich.table import Table

        from buzz.voice.room_view import RoomSnapshot

        assert isinstance(snapshot, RoomSnapshot)
        table = Table(
            title=f"huddle {snapshot.channel_id[:8]}… · you are peer {snapshot.peer_index}"
            f" · protocol v{snapshot.protocol_version}",
            title_justify="left",
        )
        table.add_column("peer", justify="right")
        table.add_column("who")
        table.add_column("name")
        table.add_column("pubkey")
        table.add_column("speaking")
        for seat in snapshot.seats:
            who = "you" if seat.you else ("agent" if seat.agent else "member")
            table.add_row(
                str(seat.peer_index),
                who,
                escape(seat.name) if seat.name else "-",
                f"{seat.pubkey[:16]}…",
                "[bold green]● speaking[/]" if seat.speaking else "",
            )
        self._live.update(table)


def _check_wav(path: Path) -> None:
    """Refuse (user_error, exit 1) an input that is not a 16-bit PCM WAV with samples."""
    try:
        with wave.open(str(path), "rb") as wav:
            if wav.getsampwidth() != 2:
                raise wave.Error(f"{8 * wav.getsampwidth()}-bit samples; only 16-bit PCM is supported")
            frames = wav.getnframes()
            if frames == 0:
                raise wave.Error("no audio frames")
            held = len(wav.readframes(frames)) // (wav.getsampwidth() * wav.getnchannels())
            if held < frames:
                raise wave.Error(f"truncated: the header says {frames} frames, the file holds {held}")
    except (wave.Error, EOFError, OSError) as exc:
        # EOFError and some wave errors carry no text: say what the reader could not find.
        reason = str(exc) or "not a RIFF/WAVE file, or truncated"
        fail(f"--input {path} is not a usable WAV file: {reason}", "user_error")


def _check_record_dir(path: Path) -> None:
    """Create `path` (with parents) and make sure it is a writable directory before anything
    connects; refuse (user_error, exit 1) naming it otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--record-dir {path} cannot be created: {exc.strerror or exc}", "user_error")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"--record-dir {path} is not writable", "user_error")


async def _fail_if_no_channel(nostr: RelayClient, signer: KeySigner, channel_id: str, exc: Exception) -> None:
    """A join refused as "not a member" names a missing channel as `not_found` (exit 1), as
    every other command does (`Session.explain_not_a_member`, decision 123): the relay says
    "not a member" for a channel that is missing, private or open-but-not-joined. A channel
    whose metadata I can read exists; otherwise a 9021 tells missing from private, and is
    refused in both cases, so the probe changes nothing."""
    error = getattr(exc, "error", None)
    if error is None or error.code is not None or error.message != NOT_A_MEMBER.message:
        return
    missing = False
    with contextlib.suppress(Exception):  # the probe is a courtesy: its failure keeps the refusal
        if await channel_metadata(nostr, channel_id) is not None:  # type: ignore[arg-type]
            return
        answer = await nostr.publish(signer.sign(JOIN_KIND, "", [["h", channel_id]]))
        missing = not answer.accepted and answer.message == CHANNEL_NOT_FOUND
    if missing:
        fail(f"channel not found: {channel_id}", "not_found")


def _join_refused_category(error: object) -> str:
    """huddle.md §4.3: clients branch on `code`. Uncoded errors are the admission checks
    (auth, relay membership, channel membership, an ended huddle): access, `auth_error`; a
    coded error or a protocol violation is a refusal, `error`."""
    return "auth_error" if error is not None and getattr(error, "code", None) is None else "error"


def _channel(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A channel id as the other commands take it (`channel_arg`: any case, lowercased)."""
    if value is None:
        return None
    try:
        return channel_arg(value)
    except UserError as exc:
        raise click.BadParameter(exc.message) from None


@click.group(cls=CommandGroup)
def huddle() -> None:
    """Voice huddles: start, join, leave, list and inspect a channel's audio room.

    \b
    Example:
      buzz huddle start --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
      buzz huddle list
    """


@huddle.command()
@click.option("--channel", required=True, callback=_channel, help="Huddle channel UUID.")
@click.option(
    "--parent", callback=_channel, default=None, help="Parent channel UUID (ephemeral huddle channels)."
)
@click.option(
    "--input",
    "input_wav",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="16-bit WAV file used as the microphone (default: silence).",
)
@click.option(
    "--record-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write peer-<index>.wav per remote peer (its packets as received) and tts.wav (spoken agent replies) here.",
)
@click.option(
    "--transcribe/--no-transcribe",
    default=None,
    help="Publish your transcripts always / never (default: while agents are present).",
)
@click.option(
    "--speak/--no-speak",
    "speak",
    default=True,
    show_default=True,
    help="Speak agent replies (into --record-dir/tts.wav when headless).",
)
@click.option(
    "--leave-after-input",
    is_flag=True,
    help="Leave once the --input file has been sent (when it spoke to agents: after their answer, at most 20 s).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Leave after this many seconds (> 0).",
)
@click.option("--protocol-version", type=int, default=CURRENT_PROTOCOL_VERSION, show_default=True)
@click.option(
    "--stt-engine",
    type=click.Choice(["whisper", "whisper-tiny", "pocketsphinx"]),
    default="whisper",
    show_default=True,
    help="Speech recogniser for your microphone (offline): whisper = tiny.en and base, the more "
    "confident wins; whisper-tiny = tiny.en alone (faster, less accurate).",
)
@click.option(
    "--stt-model",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Model directory for --stt-engine (e.g. a downloaded faster-whisper base.en or small).",
)
@click.option("--stt-language", default=None, help="Language code for multilingual models (e.g. de).")
@click.option(
    "--barge-in-ms",
    type=click.IntRange(20, 5000),
    default=BARGE_IN_MIN_MS,
    show_default=True,
    help="Speech needed to stop a spoken agent reply.",
)
@click.option("--quiet", is_flag=True, help="No live roster / speaking lines on stderr.")
@click.pass_obj
def join(
    ctx: Context,
    channel: str,
    parent: str | None,
    input_wav: Path | None,
    record_dir: Path | None,
    transcribe: bool | None,
    speak: bool,
    leave_after_input: bool,
    duration: float | None,
    protocol_version: int,
    stt_engine: str,
    stt_model: Path | None,
    stt_language: str | None,
    barge_in_ms: int,
    quiet: bool,
) -> None:
    """Join the huddle of CHANNEL until Ctrl-C, --duration or the end of --input.

    \b
    Example:
      buzz huddle join --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b \\
        --input hello.wav --record-dir ./huddle-out --leave-after-input
    """
    from buzz.voice.client import HuddleOptions
    from buzz.voice.engines import SttChoice

    checked_relay_url(ctx)
    try:
        secret = parse_secret_key(ctx.private_key)
        auth_tags = auth_tags_for(ctx.auth_tag, secret, ctx.auth_tag_source)
    except IdentityError as exc:
        fail(str(exc), exc.category)
    if input_wav is not None:
        _check_wav(input_wav)
    if record_dir is not None:
        _check_record_dir(record_dir)
    options = HuddleOptions(
        relay_url=ctx.relay_url,
        channel_id=channel,
        parent_channel_id=parent,
        protocol_version=protocol_version,
        input_wav=input_wav,
        record_dir=record_dir,
        transcribe=transcribe,
        speak_replies=speak,
        leave_after_input=leave_after_input,
        duration_s=duration,
        stt=SttChoice(stt_engine, stt_model, (stt_language or "").strip().lower() or None),
        barge_in_ms=barge_in_ms,
        display=None if quiet or sys.stderr.isatty() else _show_line,
    )
    if quiet or not sys.stderr.isatty():
        with interrupt.kept():  # the client takes SIGINT over to leave the room and report
            report = asyncio.run(_run(options, secret, auth_tags))
    else:
        with LiveRoster() as live, interrupt.kept():
            report = asyncio.run(_run(dataclasses.replace(options, view=live.update), secret, auth_tags))
    emit(ctx, report)


async def _run(options: object, secret: str, auth_tags: list[list[str]]) -> dict[str, object]:
    from buzz.voice.client import HuddleClient, HuddleOptions
    from buzz.voice.engines import build_recognizer
    from buzz.voice.models import IncompleteModelBundle
    from buzz.voice.session import JoinFailed
    from buzz.voice.whisper import SttUnavailable

    assert isinstance(options, HuddleOptions)
    signer = KeySigner(secret, auth_tags)
    try:  # load the recogniser before joining: a missing model is a one-line error, not a hang
        recognizer = await asyncio.to_thread(build_recognizer, options.stt)
    except (SttUnavailable, IncompleteModelBundle) as exc:
        fail(str(exc))
    client: HuddleClient | None = None
    try:
        async with RelayClient(options.relay_url, secret, auth_tags=auth_tags) as nostr:
            if options.parent_channel_id is not None:
                options = await _settled(nostr, signer, options)
            client = HuddleClient(options, signer, nostr, recognizer_factory=lambda: recognizer)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, client.stop)
            try:
                report = await client.run()
            except JoinFailed as exc:
                await _fail_if_no_channel(nostr, signer, options.channel_id, exc)
                raise
            if report.ended and options.display is not None:
                options.display("the huddle was ended")
    except JoinFailed as exc:
        error = exc.error
        fail(
            "huddle join refused",
            _join_refused_category(error),
            error_code=error.code if error else None,
            detail=str(exc),
            retry=exc.retry.value,
        )
    except NetworkError as exc:  # joined, then the relay went away (as `messages watch` reports it)
        report_failure(exc)
    except RelayError as exc:
        fail("relay refused the connection", "auth_error", detail=exc.message)
    except aiohttp.WSServerHandshakeError as exc:  # the audio socket's HTTP answer
        fail(
            "relay refused the audio socket",
            "auth_error" if exc.status in (401, 403) else "network_error",
            detail=f"HTTP {exc.status}",
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        fail("could not reach the relay", "network_error", detail=str(exc) or type(exc).__name__)
    return dataclasses.asdict(report)


async def _settled(nostr: RelayClient, signer: KeySigner, options: object) -> object:
    """The options with the race rule's winner as the room when our own start lost (decision 81)."""
    from buzz.voice.client import HuddleOptions
    from buzz.voice.huddle_flow import settle_join

    assert isinstance(options, HuddleOptions) and options.parent_channel_id is not None
    room = await settle_join(nostr, signer, options.channel_id, options.parent_channel_id)
    if room == options.channel_id:
        return options
    if options.display is not None:
        options.display(f"another huddle started here first: ended ours, joining {room}")
    return dataclasses.replace(options, channel_id=room)


async def _with_relay(ctx: Context, body: Callable[[RelayClient, KeySigner], Awaitable[object]]) -> object:
    """Run `body` on an authenticated connection; errors become one JSON line (exit 1)."""
    from buzz.voice.huddle_flow import HuddleFlowError

    checked_relay_url(ctx)
    try:
        secret = parse_secret_key(ctx.private_key)
        auth_tags = auth_tags_for(ctx.auth_tag, secret, ctx.auth_tag_source)
    except IdentityError as exc:
        fail(str(exc), exc.category)
    try:
        async with RelayClient(ctx.relay_url, secret, auth_tags=auth_tags) as client:
            return await body(client, KeySigner(secret, auth_tags))
    except (HuddleFlowError, ValueError) as exc:
        fail(str(exc))
    except RelayError as exc:
        fail("relay refused the connection", "auth_error", detail=exc.message)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        fail("could not reach the relay", "network_error", detail=str(exc) or type(exc).__name__)


@huddle.command()
@click.option("--channel", required=True, callback=_channel, help="Channel to start the huddle from.")
@click.option(
    "--agent", "agents", multiple=True, help="Agent pubkey (hex) to invite; repeatable, at most 20."
)
@click.option("--name", default=None, help="Name of the huddle channel.")
@click.pass_obj
def start(ctx: Context, channel: str, agents: tuple[str, ...], name: str | None) -> None:
    """Start a huddle from CHANNEL in its own ephemeral channel (README: Start a huddle).

    Prints {"huddle_channel_id", "parent_channel_id", "agents", "started_event_id",
    "guidelines_event_id", "superseded_huddle_channel_id", "started"}; then join with
    `buzz huddle join --channel <huddle> --parent <channel>`. With a huddle already live here
    ("started": false) "agents" are its bot members, or null when you are not in its (private)
    channel yet: joining lets you in.

    \b
    Example:
      buzz huddle start --channel 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --agent <agent pubkey hex>
      buzz huddle join --channel <huddle_channel_id> --parent 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    from buzz.voice.huddle_flow import start_huddle

    async def body(client: RelayClient, signer: KeySigner) -> object:
        return (await start_huddle(client, signer, channel, agents, name)).to_json()

    emit(ctx, interrupt.run(_with_relay(ctx, body)))


@huddle.command()
@click.option("--channel", required=True, callback=_channel, help="Huddle channel UUID.")
@click.option("--parent", callback=_channel, default=None, help="Parent channel (needed with --end).")
@click.option("--end", is_flag=True, help="End the huddle for everyone (its starter only): 48103, archive.")
@click.pass_obj
def leave(ctx: Context, channel: str, parent: str | None, end: bool) -> None:
    """Leave a huddle's channel (kind 9022), or end the huddle you started with --end.

    A running `huddle join` leaves the audio room on Ctrl-C (or --duration / --leave-after-input).

    \b
    Example:
      buzz huddle leave --channel 9c1a5b6d-7e8f-4a0b-83f2-b7c1e8a4d4e2
      buzz huddle leave --channel 9c1a5b6d-7e8f-4a0b-83f2-b7c1e8a4d4e2 --parent 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b --end
    """
    from buzz.voice.huddle_flow import end_huddle

    if end and parent is None:
        fail("--end needs --parent (the channel the huddle was started from)")

    async def body(client: RelayClient, signer: KeySigner) -> object:
        if end:
            assert parent is not None
            ended_now = await end_huddle(client, signer, channel, parent)
            return {"huddle_channel_id": channel, "ended": True, "already_ended": not ended_now}
        result = await client.publish(signer.sign(9022, "", [["h", channel]]))
        if not result.accepted:
            fail("leaving the huddle channel was refused", detail=result.message)
        return {"huddle_channel_id": channel, "left": True}

    emit(ctx, interrupt.run(_with_relay(ctx, body)))


@huddle.command(name="list")
@click.option("--all", "show_all", is_flag=True, help="Include ended huddles.")
@click.pass_obj
def list_(ctx: Context, show_all: bool) -> None:
    """Huddles in the channels you are a member of; live ones unless --all.

    Prints {"huddles": [{"huddle_channel_id", "parent_channel_id", "live", "started_by",
    "started_at", "ended_at", "duration_s", "participants"}]}.

    \b
    Example:
      buzz huddle list
      buzz huddle list --all
    """
    from buzz.voice.huddle_flow import huddles_in, my_channels

    async def body(client: RelayClient, signer: KeySigner) -> object:
        states = await huddles_in(client, await my_channels(client, signer.pubkey))
        now = int(time.time())
        shown = [s.to_json(now) for s in states.values() if show_all or s.live]
        return {"huddles": sorted(shown, key=lambda h: -(h["started_at"] or 0))}

    emit(ctx, interrupt.run(_with_relay(ctx, body)))


@huddle.command()
@click.option("--channel", required=True, callback=_channel, help="Huddle channel UUID.")
@click.option("--parent", callback=_channel, default=None, help="Parent channel (ephemeral huddles).")
@click.pass_obj
def status(ctx: Context, channel: str, parent: str | None) -> None:
    """One huddle from its lifecycle events: live, starter, duration, participants with names,
    and your own seat when a `buzz huddle join` of your key is in the room.

    Prints {"huddle_channel_id", "parent_channel_id", "live", "started_by", "started_at",
    "ended_at", "duration_s", "codec", "participants": [{"pubkey", "name", "peer_index"}],
    "you": {"pubkey", "in_room", "peer_index", "protocol_version", "joined_at"}}; not_found
    (exit 1) when no lifecycle event names it. Peer indices come from the running join's seat
    file (the relay tells them only on the audio socket): null when you are not joined, and for
    other participants when no join of yours is running.

    \b
    Example:
      buzz huddle status --channel 9c1a5b6d-7e8f-4a0b-83f2-b7c1e8a4d4e2 --parent 3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b
    """
    from buzz.voice.huddle_flow import huddles_in
    from buzz.voice.seat import CODEC, read_seat

    async def body(client: RelayClient, signer: KeySigner) -> object:
        states = await huddles_in(client, [parent or channel])
        state = states.get(channel)
        if state is None:
            fail("no huddle found for this channel", "not_found")
        out = state.to_json(int(time.time()))
        names: dict[str, str] = {}
        if state.participants:
            for profile in await client.query([{"kinds": [0], "authors": sorted(state.participants)}]):
                with contextlib.suppress(ValueError, AttributeError):
                    meta = orjson.loads(profile.content)
                    names[profile.pubkey] = str(meta.get("display_name") or meta.get("name") or "")
        seat = read_seat(ctx.relay_url, channel, signer.pubkey)
        indices: dict[str, int] = {}
        if seat is not None:
            for entry in seat.get("roster") or []:
                with contextlib.suppress(KeyError, TypeError):
                    indices[str(entry["pubkey"])] = int(entry["peer_index"])
        out["participants"] = [
            {"pubkey": p, "name": names.get(p) or None, "peer_index": indices.get(p)}
            for p in sorted(state.participants)
        ]
        out["codec"] = CODEC
        out["you"] = {
            "pubkey": signer.pubkey,
            "in_room": seat is not None,
            "peer_index": seat.get("peer_index") if seat else None,
            "protocol_version": seat.get("protocol_version") if seat else None,
            "joined_at": seat.get("joined_at") if seat else None,
        }
        return out

    emit(ctx, interrupt.run(_with_relay(ctx, body)))
