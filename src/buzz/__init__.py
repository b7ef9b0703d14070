"""buzz: a Nostr workspace relay for humans and agents."""

__version__ = "0.1.0"
