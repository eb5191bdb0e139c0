"""What one MCP server offers, as the official Python SDK (mcp 2.3.0) sees it: every page of its
tools, prompts, resources and resource templates, every resource read, and the prompts and tool
calls it is asked for. test/integration/aggregate-servers.test.ts runs it against an aggregated
route and against each server reached directly, and compares.

Usage: python list_server.py '<json>' where the JSON is
  {"http": URL, "token": T} | {"sse": URL} | {"stdio": {"command": C, "args": [...], "env": {...}}}
  plus "prompts": [{"name", "arguments"}] and "calls": [{"name", "arguments"}].
Prints one JSON object on stdout.
"""

import asyncio
import json
import sys
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def every_page(fetch: Any, member: str) -> list[Any]:
    """Every page of a list; a list the server does not offer (-32601) is empty."""
    items: list[Any] = []
    cursor = None
    while True:
        try:
            page = await fetch(cursor=cursor, cache_mode="bypass")
        except Exception as err:  # the SDK raises the JSON-RPC error
            if "-32601" in str(err) or "not found" in str(err).lower():
                return items
            raise
        items.extend(dump(item) for item in getattr(page, member))
        cursor = page.next_cursor
        if not cursor:
            return items


async def survey(client: Client, spec: dict[str, Any]) -> dict[str, Any]:
    tools = await every_page(client.list_tools, "tools")
    prompts = await every_page(client.list_prompts, "prompts")
    resources = await every_page(client.list_resources, "resources")
    templates = await every_page(client.list_resource_templates, "resource_templates")
    reads = [dump(await client.read_resource(r["uri"])) for r in resources]
    got = [dump(await client.get_prompt(p["name"], p.get("arguments") or {})) for p in spec.get("prompts", [])]
    calls = [dump(await client.call_tool(c["name"], c.get("arguments") or {})) for c in spec.get("calls", [])]
    return {"tools": tools, "prompts": prompts, "resources": resources, "templates": templates, "reads": reads, "got": got, "calls": calls}


async def main(spec: dict[str, Any]) -> None:
    if "http" in spec:
        headers = {"authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(spec["http"], http_client=http)) as client:
                result = await survey(client, spec)
    elif "sse" in spec:
        async with Client(sse_client(spec["sse"])) as client:
            result = await survey(client, spec)
    else:
        stdio = spec["stdio"]
        params = StdioServerParameters(command=stdio["command"], args=stdio["args"], env=stdio.get("env"))
        async with Client(params) as client:
            result = await survey(client, spec)
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
