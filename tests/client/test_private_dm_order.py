"""One order for a private conversation (issue 29 item 6, for NIP-17 messages): an answer sent in
the same second as what it answers comes after it, whatever the two random ids are."""

from __future__ import annotations

from buzz.client.private_dms import open_wraps
from buzz.core import nip59
from buzz.core.keys import generate_secret_key, public_key

ALICE, BOB = generate_secret_key(), generate_secret_key()
A, B = public_key(ALICE), public_key(BOB)


def test_an_answer_in_the_same_second_follows_what_it_answers() -> None:
    now = 1_800_000_000
    for n in range(12):  # both id orders come up among a dozen pairs
        hello = nip59.make_rumor(ALICE, [B], f"hello {n}", created_at=now)
        answer = nip59.make_rumor(BOB, [A], f"answer {n}", [["e", hello.id]], created_at=now)
        again = nip59.make_rumor(ALICE, [B], f"and again {n}", [["e", answer.id]], created_at=now)
        wraps = [
            nip59.wrap_message(sender, rumor, [A])[0]
            for sender, rumor in ((ALICE, again), (BOB, answer), (ALICE, hello))
        ]
        opened, failed = open_wraps(ALICE, wraps)
        assert failed == 0
        assert [o.rumor.id for o in opened] == [hello.id, answer.id, again.id]
        later = nip59.make_rumor(BOB, [A], f"later {n}", created_at=now - 1)
        opened, _ = open_wraps(ALICE, [*wraps, nip59.wrap_message(BOB, later, [A])[0]])
        assert opened[0].rumor.id == later.id  # an older second still comes first
