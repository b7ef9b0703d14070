"""The client half of ACP that the harness plays toward each agent subprocess (agents.md §4.1).

`HarnessClient` answers what an agent may ask of its client:

- `session/update` notifications are handed to a callback (activity, usage); they are never
  posted to channels;
- `session/request_permission` is answered automatically per `--permission-mode` (§4.10 item 7,
  the `PERMISSION_CHOICE` table);
- `fs/*` and `terminal/*` are not advertised and answer JSON-RPC −32601. The package's router
  treats a *missing* terminal handler as optional and would answer `null`, so every one of
  them is defined here and raises "method not found" explicitly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from acp import RequestError
from acp.schema import AllowedOutcome, DeniedOutcome, PermissionOption, RequestPermissionResponse

log = logging.getLogger(__name__)

# Permission modes that allow (§4.10 item 7); every other mode rejects.
ALLOWING_MODES = frozenset({"bypass-permissions", "dont-ask", "auto"})
# Option kinds in order of preference: (allowing?, kinds…).
PERMISSION_CHOICE: dict[bool, tuple[str, ...]] = {
    True: ("allow_once", "allow_always"),
    False: ("reject_once", "reject_always"),
}

UpdateCallback = Callable[[str, dict[str, Any]], None]


def choose_permission(mode: str, options: Sequence[PermissionOption]) -> RequestPermissionResponse:
    """The automatic answer to a permission request: the first option whose kind is preferred
    by the mode, else `{"outcome": {"outcome": "cancelled"}}`."""
    for kind in PERMISSION_CHOICE[mode in ALLOWING_MODES]:
        for option in options:
            if option.kind == kind:
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


class HarnessClient:
    """ACP `Client` implementation for one subprocess. `on_update(session_id, update_dict)`
    receives every `session/update` (camelCase JSON of the update)."""

    def __init__(self, permission_mode: str, on_update: UpdateCallback) -> None:
        self.permission_mode = permission_mode
        self.on_update = on_update

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        answer = choose_permission(self.permission_mode, options)
        log.info("permission request in session %s answered %s", session_id, answer.outcome.outcome)
        return answer

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        data = (
            update.model_dump(mode="json", by_alias=True, exclude_none=True)
            if hasattr(update, "model_dump")
            else dict(update)
        )
        self.on_update(session_id, data)

    # -- not advertised: JSON-RPC −32601 (§4.1 table) ----------------------------------------
    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("fs/write_text_file")

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("fs/read_text_file")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("terminal/kill")

    async def create_elicitation(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_found("elicitation/create")

    async def complete_elicitation(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise _not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None
