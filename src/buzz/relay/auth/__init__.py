"""Who may: channel access, relay admission (NIP-42, NIP-AA), a connection's session and
the live sessions, and taking access back (revocation, the ban watch)."""
