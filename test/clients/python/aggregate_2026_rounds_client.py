"""An MCP client written with the official Python SDK (mcp 2.3.0), speaking 2026-07-28 without a
session to an aggregated route of the gateway whose upstream is of a session-based revision
(server-everything), driven by test/e2e/python-sdk-aggregate-2026.test.ts. The upstream asks the
client for an elicitation and a sampling while serving a call: the gateway turns each into an
InputRequiredResult, which the SDK drives with its callbacks before the call completes. A long
call's progress reaches the SDK's progress callback. A listen watching one of the upstream's
resources hears its update.

Usage: aggregate_2026_rounds_client.py <mcp-url> <bearer token> <watched resource uri>
Each line on stdout is one JSON event.
"""

import asyncio
import json
import sys
import traceback
from typing import Any

import anyio
import httpx2
from mcp import Client, types
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
    emit("elicitation", message=getattr(params, "message", None))
    return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})


async def on_sampling(_context: Any, params: Any) -> Any:
    emit("sampling", max_tokens=getattr(params, "max_tokens", None))
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model", stop_reason="endTurn")


async def main(url: str, token: str, watched: str) -> None:
    progress: list[list[float | None]] = []

    async def on_progress(value: float, total: float | None, _message: str | None) -> None:
        progress.append([value, total])

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=on_elicitation, sampling_callback=on_sampling) as client:
            emit("connected", protocol_version=client.protocol_version)
            asked = await client.call_tool("everything__trigger-elicitation-request", {})
            emit("called", tool="elicitation", is_error=bool(asked.is_error), text=texts(asked))
            sampled = await client.call_tool("everything__trigger-sampling-request", {"prompt": "capital?", "maxTokens": 10})
            emit("called", tool="sampling", is_error=bool(sampled.is_error), text=texts(sampled))
            long = await client.call_tool("everything__trigger-long-running-operation", {"duration": 0.6, "steps": 3}, progress_callback=on_progress)
            emit("called", tool="long", is_error=bool(long.is_error), text=texts(long), progress=progress)
            async with client.listen(resource_subscriptions=[watched]) as sub:
                emit("listening", honored=sub.honored.model_dump(by_alias=True, exclude_none=True))
                await client.call_tool("everything__toggle-subscriber-updates", {})
                with anyio.fail_after(20):
                    async for event in sub:
                        emit("updated", kind=type(event).__name__, uri=str(getattr(event, "uri", "")))
                        break
                await client.call_tool("everything__toggle-subscriber-updates", {})
    emit("done")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    except BaseException as err:  # noqa: BLE001 - reported to the test, then a failing exit
        if isinstance(err, SystemExit):
            raise
        causes = [{"error": type(leaf).__name__, "message": str(leaf)} for leaf in leaves(err)]
        emit("crashed", error=type(err).__name__, causes=causes, trace=traceback.format_exc())
        sys.exit(1)
