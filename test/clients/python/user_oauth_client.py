"""An MCP client written with the official Python SDK (mcp 2.3.0) on a user_oauth route of the
gateway, driven by test/e2e/python-sdk-user-oauth.test.ts.

The gateway access token is the test's (an app the user approved); what this client meets is the
gateway asking for the user's own account at the upstream: a URL elicitation (error -32042 with the
link, or an elicitation request of URL mode, whichever the negotiated revision uses). The client
does what an application does with it: shows the link (an event on stdout; the test opens it in
Chromium) and, once the user says they are done (a line on stdin), tries again.

Usage: user_oauth_client.py <mcp-url> <bearer token>
Each line on stdout is one JSON event.
"""

import asyncio
import json
import sys
import traceback
from typing import Any

import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

URL_ELICITATION_REQUIRED = -32042
ATTEMPTS = 3


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def leaves(err: BaseException) -> list[BaseException]:
    """The exceptions inside anyio's task-group wrappers."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for inner in err.exceptions for leaf in leaves(inner)]
    return [err]


async def user_done() -> None:
    """The user came back from the browser (the test writes a line)."""
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def on_elicitation(_context: Any, params: Any) -> Any:
    """An elicitation request (the 2026 form): the link is shown, then accepted once the user is done."""
    from mcp import types

    emit("elicitation", via="request", mode=getattr(params, "mode", None), url=getattr(params, "url", None))
    await user_done()
    return types.ElicitResult(action="accept")


async def attempt(url: str, token: str) -> bool:
    """One session: true when whoami answered."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=on_elicitation) as client:
            emit("connected", protocol_version=client.protocol_version)
            result = await client.call_tool("whoami", {})
            emit("called", is_error=bool(result.is_error), text=[c.text for c in result.content if getattr(c, "type", "") == "text"])
            return not result.is_error


async def main(url: str, token: str) -> None:
    for _ in range(ATTEMPTS):
        try:
            if await attempt(url, token):
                emit("done")
                return
        except BaseException as err:  # noqa: BLE001 - a -32042 is the expected first answer
            required = [leaf for leaf in leaves(err) if isinstance(leaf, MCPError) and leaf.code == URL_ELICITATION_REQUIRED]
            if not required:
                raise
            data = required[0].error.data or {}
            emit("elicitation", via="error", code=required[0].code, urls=[e.get("url") for e in data.get("elicitations", [])])
            await user_done()
    emit("gave_up")
    sys.exit(1)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except BaseException as err:  # noqa: BLE001 - reported to the test, then a failing exit
        if isinstance(err, SystemExit):
            raise
        causes = [{"error": type(leaf).__name__, "message": str(leaf)} for leaf in leaves(err)]
        emit("crashed", error=type(err).__name__, causes=causes, trace=traceback.format_exc())
        sys.exit(1)
