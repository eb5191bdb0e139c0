"""An MCP client written with the official Python SDK (mcp 2.3.0) on an aggregated route of the
gateway, driven by test/e2e/python-sdk-aggregate-2026.test.ts. It connects as the SDK does by
default (mode 'auto': a server/discover probe, then 2026-07-28 without a session when the server
serves it), lists the route's tools, calls one by its shown name, lets the SDK drive an
InputRequiredResult round (its elicitation callback answers), and listens for tool list changes
while it asks an upstream to change its tools.

Usage: aggregate_2026_client.py <mcp-url> <bearer token>
Each line on stdout is one JSON event.
"""

import asyncio
import json
import sys
import traceback
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def leaves(err: BaseException) -> list[BaseException]:
    """The exceptions inside anyio's task-group wrappers."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for inner in err.exceptions for leaf in leaves(inner)]
    return [err]


def texts(result: Any) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


async def on_elicitation(_context: Any, params: Any) -> Any:
    """The upstream's question, asked through an InputRequiredResult: answered with a name."""
    from mcp import types

    emit("elicitation", message=getattr(params, "message", None))
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def main(url: str, token: str) -> None:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=on_elicitation) as client:
            emit("connected", protocol_version=client.protocol_version)
            tools = await client.list_tools()
            emit("tools", names=[t.name for t in tools.tools])
            echo = await client.call_tool("modern__echo", {})
            emit("called", tool="modern__echo", is_error=bool(echo.is_error), text=texts(echo))
            asked = await client.call_tool("modern__test_input_required_result_elicitation", {})
            emit("called", tool="modern__test_input_required_result_elicitation", is_error=bool(asked.is_error), text=texts(asked))
            async with client.listen(tools_list_changed=True) as sub:
                emit("listening", honored=sub.honored.model_dump(by_alias=True, exclude_none=True))
                await client.call_tool("modern__test_trigger_tool_change", {})
                with anyio.fail_after(20):
                    async for event in sub:
                        emit("changed", kind=type(event).__name__)
                        break
    emit("done")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except BaseException as err:  # noqa: BLE001 - reported to the test, then a failing exit
        if isinstance(err, SystemExit):
            raise
        causes = [{"error": type(leaf).__name__, "message": str(leaf)} for leaf in leaves(err)]
        emit("crashed", error=type(err).__name__, causes=causes, trace=traceback.format_exc())
        sys.exit(1)
