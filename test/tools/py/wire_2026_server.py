"""An MCP server built on the official Python SDK (mcp 2.3.0, MCPServer), which speaks the
2026-07-28 wire: server/discover, subscriptions/listen, InputRequiredResult rounds, the request
headers checked against the body. test/e2e/python-sdk-server-2026.test.ts runs it behind the
gateway and compares. Usage: python wire_2026_server.py <port> (Streamable HTTP), or
python wire_2026_server.py stdio, or python wire_2026_server.py sse <port> (the legacy HTTP+SSE transport)
"""

import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

server = MCPServer("mag-python-2026", version="1.0.0")


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


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    elif sys.argv[1] == "sse":
        uvicorn.run(server.sse_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
