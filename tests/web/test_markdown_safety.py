"""Browser: Markdown rendering under the usual XSS corpus (issue 26, item 1): nothing a
message, a name or a profile carries becomes active content, and the CSP reports nothing."""

from __future__ import annotations

import orjson

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

EVIL_NAME = "<img src=x onerror=window.__pwned=40>"
CORPUS = [
    '<img src=x onerror="window.__pwned=1">',
    '<svg onload="window.__pwned=2"><circle r="10"/></svg>',
    "[click me](javascript:window.__pwned=3)",
    "[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![pic](javascript:window.__pwned=5)",
    "![svg pic](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    '<a href="javascript:window.__pwned=7">raw link</a>',
    "[nested <img src=x onerror=window.__pwned=8>](https://example.com/nested)",
    "**<script>window.__pwned=9</script>**",
    '<details open ontoggle="window.__pwned=10"><summary>x</summary></details>',
    "[entity](&#106;avascript:window.__pwned=11)",
    "[angle](<javascript:window.__pwned=12>)",
    "<javascript:window.__pwned=13>",
    "```html\n<script>window.__pwned=14</script>\n```",
    '<iframe src="javascript:window.__pwned=15"></iframe>',
    "<style>body{display:none}</style>",
    '[title](https://example.com/t "x\\" onmouseover=\\"window.__pwned=17")',
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned=18>",
    "| a | <img src=x onerror=window.__pwned=19> |\n|---|---|\n| 1 | 2 |",
    ":tada: @<img src=x onerror=window.__pwned=20>",
    '<form action="https://evil.example/"><input name="x"><button>go</button></form>',
    "`<b onmouseover=window.__pwned=22>code</b>`",
    "[vb](vbscript:msgbox(23))",
    "[ref][1]\n\n[1]: javascript:window.__pwned=24",
    "[space]( javascript:window.__pwned=25)",
    "[tab](java\tscript:window.__pwned=26)",
    '<object data="javascript:window.__pwned=27"></object>',
    '<a href="https://example.com/ok" onclick="window.__pwned=28">ok</a>',
    "[![img in link](https://images.example/x.png)](javascript:window.__pwned=29)",
    "www.example.com/auto and mail@example.com",
    '<base href="https://evil.example/">',
    '<link rel="stylesheet" href="https://evil.example/x.css">',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=33">',
    '<img src="https://images.example/track.png">',
    "![remote](https://images.example/remote.png)",
    "<scr<script>ipt>window.__pwned=36</script>",
    "[x](javascript&colon;window.__pwned=37)",
    "<div style=\"background:url('https://images.example/bg.png')\">styled</div>",
    "~~~\n</code></pre><img src=x onerror=window.__pwned=39>\n~~~",
    f"@{EVIL_NAME} hello",
    "nostr:npub1 not a key, <b>bold?</b> and the last one",
]


async def test_the_xss_corpus_renders_inert(sqlite_relay: RunningRelay, alice: Identity) -> None:
    require_browser()
    mallory, evil = Identity.new(), Identity.new()
    async with sqlite_relay.client(alice) as client:
        channel = await create_channel(client, alice, "corpus")
        await add_member(client, alice, channel, mallory.pubkey)
        await add_member(client, alice, channel, evil.pubkey)
    profile = {
        "name": "<b onmouseover=window.__pwned=41>Mallory</b>",
        "picture": "javascript:window.__pwned=42",
    }
    async with sqlite_relay.client(evil) as client:
        assert (
            await client.publish(Event.create(evil.secret, 0, orjson.dumps({"name": EVIL_NAME}).decode()))
        ).accepted
    async with sqlite_relay.client(mallory) as client:
        assert (
            await client.publish(Event.create(mallory.secret, 0, orjson.dumps(profile).decode()))
        ).accepted
        for text in CORPUS:
            tags = [["h", channel]] + ([["p", evil.pubkey]] if EVIL_NAME in text else [])
            result = await client.publish(Event.create(mallory.secret, 9, text, tags))
            assert result.accepted, result.message
    report = await run_scenario(
        "xss",
        {
            "url": sqlite_relay.http_url + "/",
            "secret": alice.secret,
            "count": len(CORPUS),
            "last": "the last one",
        },
    )
    assert_all_passed(
        report,
        [
            "every message of the corpus shows",
            "no element or attribute from a message is active",
            "links keep only http(s) and mailto targets and open without an opener",
            "firing every event on every element runs nothing",
            "no remote image was fetched and the CSP reported nothing",
        ],
    )
