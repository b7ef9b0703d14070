"""`buzz huddle join` on a terminal: the live roster panel (issue 13 item 3)."""

from __future__ import annotations

from rich.console import Console

from buzz.cli.huddle_cmd import LiveRoster
from buzz.voice.room_view import RoomSnapshot, SeatView


def test_live_roster_shows_peers_roles_and_who_speaks() -> None:
    live = LiveRoster()
    snapshot = RoomSnapshot(
        "3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b",
        1,
        3,
        (
            SeatView(0, "aa" * 32, you=False, agent=True, speaking=True, name="Rulesbot [b]"),
            SeatView(1, "bb" * 32, you=True, agent=False, speaking=False),
            SeatView(2, "cc" * 32, you=False, agent=False, speaking=False),
        ),
    )
    live.update(snapshot)
    console = Console(record=True, width=120, color_system=None)
    console.print(live.renderable)
    text = console.export_text()
    assert "huddle 3f2b7c1e… · you are peer 1 · protocol v3" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") >= 4}
    assert "agent" in rows["0"] and "speaking" in rows["0"] and "aaaaaaaaaaaaaaaa…" in rows["0"]
    assert "you" in rows["1"] and "speaking" not in rows["1"]
    assert "member" in rows["2"] and "speaking" not in rows["2"]
    # the display name when known (markup in it shown as typed), "-" otherwise
    assert "Rulesbot [b]" in rows["0"] and "-" in rows["2"].split("│")[3]
