"""An MCP server built on the official Python SDK (mcp 2.3.0, MCPServer), which speaks the
2026-07-28 wire: server/discover, subscriptions/listen, InputRequiredResult rounds, the request
headers checked against the body. test/e2e/python-sdk-server-2026.test.ts runs it behind the
gateway and compares. Two tools let a test see what the server itself got: `meet` answers only
once two calls of it are in flight at once, and `seen` lists the ids of the listens it was sent
and of the requests it was told were cancelled. Usage: python wire_2026_server.py <port> (Streamable HTTP), or
python wire_2026_server.py stdio, or python wire_2026_server.py sse <port> (the legacy HTTP+SSE transport)
"""

import json
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

_listens: list[dict] = []
_cancelled: list = []


async def record(ctx, call_next):
    """Notes each listen's id (as this server was sent it) and each cancellation's requestId."""
    params = dict(ctx.params or {})
    if ctx.method == "subscriptions/listen":
        _listens.append({"id": ctx.request_id, "notifications": params.get("notifications")})
    elif ctx.method == "notifications/cancelled":
        _cancelled.append(params.get("requestId"))
    return await call_next(ctx)


server = MCPServer("mag-python-2026", version="1.0.0", middleware=[record])


@server.resource("file:///public/readme.txt")
def readme() -> str:
    return "public readme"


@server.resource("file:///secret/key.txt")
def key() -> str:
    return "secret key"


@server.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return text


@server.tool()
async def greet(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name (an InputRequiredResult), then greets it."""
    answer = (ctx.input_responses or {}).get("name")
    content = getattr(answer, "content", None) or {}
    if ctx.request_state == "asked" and content.get("name"):
        return f"Hello, {content['name']}"
    ask = ElicitRequest(
        params=ElicitRequestFormParams(
            message="What is your name?",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
    )
    return InputRequiredResult(input_requests={"name": ask}, request_state="asked")


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tells the subscribers of `uri` that it changed."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool()
def seen() -> str:
    """The listens this server was sent (their ids as it got them) and the request ids it was told were cancelled, as JSON."""
    return json.dumps({"listens": _listens, "cancelled": _cancelled})


class _Meeting:
    def __init__(self) -> None:
        self.arrived = 0
        self.complete = anyio.Event()


_meeting = _Meeting()


@server.tool()
async def meet(text: str) -> str:
    """Returns its text once two calls of it are in flight at once (each pair meets; 60 s at most)."""
    global _meeting
    meeting = _meeting
    meeting.arrived += 1
    if meeting.arrived == 2:
        _meeting = _Meeting()
        meeting.complete.set()
    with anyio.fail_after(60):
        await meeting.complete.wait()
    return text


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    elif sys.argv[1] == "sse":
        uvicorn.run(server.sse_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
