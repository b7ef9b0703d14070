"""`buzz files`: upload and get (media.md §13): a thin shell over `buzz.client.files`.

Exit codes are the usual table (`buzz.cli.output.EXIT_CODES`): a refused file (413, 415) or a
missing blob is 1, no answer or 429 is 2, 401/403 is 3, anything else the relay refuses (507)
and bytes that do not hash to the blob's name are 4.
"""

from __future__ import annotations

import click

from buzz.cli.common import run
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.models import as_json


@click.group(cls=CommandGroup)
def files() -> None:
    """Files on the relay: upload one, or get one by URL or hash.

    \b
    Example:
      buzz files upload --file report.pdf
      buzz files get --url http://127.0.0.1:3000/media/<sha256>.pdf --output report.pdf
    """


@files.command()
@click.option("--file", "path", required=True, help="The file to upload.")
@click.pass_obj
def upload(ctx: Context, path: str) -> None:
    """Upload a file and print its blob descriptor: {"url", "sha256", "size", "type", "uploaded"}
    (images also "dim", "blurhash", "thumb"). Attach it to a message with its imeta tag, or use
    `buzz messages send --file` which does both.

    \b
    Example:
      buzz files upload --file shot.png
    """
    run(ctx, lambda ws: ws.files.upload(path))


@files.command()
@click.option("--url", default=None, help="The blob's URL (…/media/<sha256>[.<ext>]).")
@click.option("--sha256", "sha256", default=None, help="The blob's SHA-256 (64 hex).")
@click.option("--output", default=None, help="Where to write it (default ./<sha256>.<ext>); - for stdout.")
@click.pass_obj
def get(ctx: Context, url: str | None, sha256: str | None, output: str | None) -> None:
    """Download a file you may read and check its hash. Prints {"path", "sha256", "size",
    "type"}; with --output - the raw bytes go to stdout instead (and nothing else does).

    \b
    Example:
      buzz files get --url http://127.0.0.1:3000/media/<sha256>.png
      buzz files get --sha256 <sha256> --output - | wc -c
    """

    async def body(ws: object) -> dict[str, object]:
        return as_json(await ws.files.get(url, sha256, output))  # type: ignore[attr-defined, no-any-return]

    run(ctx, body, (lambda _: None) if output == "-" else None)
