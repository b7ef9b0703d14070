"""The harness identity: agent key, NIP-OA tag and owner (agents.md §4.2 item 2, §1.3).

`resolve_identity(config)` parses the agent secret (hex or nsec), verifies `BUZZ_AUTH_TAG`
against the agent's own pubkey (engram.md §14.6; no clause evaluated) and takes the owner from
it, else from `--agent-owner`. Errors are `ConfigError`s: exit 3 for a missing/invalid key or
tag, exit 1 when the tag's owner and `--agent-owner` disagree or the owner is malformed.
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.agent.config import EXIT_AUTH, ConfigError, HarnessConfig, given_as
from buzz.client.errors import WorkspaceError
from buzz.client.identity import parse_secret_key, self_attested_hint
from buzz.core import nip19
from buzz.core.keys import public_key
from buzz.core.nip_oa import InvalidAuthTag, normalize_auth_tag_input, parse_auth_tag, verify_auth_tag


@dataclass(frozen=True)
class AgentIdentity:
    """`secret` (64 hex, never logged), `pubkey` A, the verified `auth_tag` (or None) and the
    owner O (or None: owner commands, siblings, memory and metrics are then off)."""

    secret: str
    pubkey: str
    auth_tag: list[str] | None
    owner: str | None

    def __repr__(self) -> str:  # never show the secret (agents.md §1.1 item 3)
        return f"AgentIdentity(pubkey={self.pubkey!r}, owner={self.owner!r})"


def _secret(value: str | None) -> str:
    """The agent secret (64 hex) with the client's messages (one text for every face)."""
    try:
        return parse_secret_key(value)
    except WorkspaceError as exc:
        raise ConfigError(exc.message, EXIT_AUTH, exc.category) from None


def _pubkey(value: str, what: str) -> str:
    try:
        return nip19.parse_key_text(value, "npub")
    except ValueError:
        raise ConfigError(f"{what} must be 64 hex characters or npub1…") from None


def resolve_identity(config: HarnessConfig) -> AgentIdentity:
    """Startup step 2 of agents.md §4.2. Raises ConfigError (exit 3 or 1)."""
    secret = _secret(config.private_key)
    pubkey = public_key(secret)
    tag: list[str] | None = None
    owner: str | None = None
    if config.auth_tag is not None and config.auth_tag.strip():
        try:
            parsed = parse_auth_tag(normalize_auth_tag_input(config.auth_tag))
            owner = verify_auth_tag(parsed.to_list(), pubkey)
        except InvalidAuthTag as exc:
            where = given_as(config, "auth_tag")
            hint = self_attested_hint(config.auth_tag, pubkey, where)
            raise ConfigError(f"invalid {where}: {exc.reason}{hint}", EXIT_AUTH) from None
        tag = parsed.to_list()
    if config.agent_owner is not None and config.agent_owner.strip():
        configured = _pubkey(config.agent_owner, "--agent-owner")
        if owner is not None and configured != owner:
            raise ConfigError(f"--agent-owner differs from the owner named by {given_as(config, 'auth_tag')}")
        owner = configured
    if owner == pubkey:
        raise ConfigError("the owner must differ from the agent key")
    return AgentIdentity(secret, pubkey, tag, owner)
