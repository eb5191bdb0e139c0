"""An MCP client written with the official Python SDK (mcp 2.3.0), driven by
test/e2e/python-sdk-client.test.ts against the demo gateway.

Everything OAuth is the SDK's own `OAuthClientProvider`: discovery (401 ->
RFC 9728 metadata -> RFC 8414 metadata), dynamic client registration, PKCE,
the token exchange and the step-up on 403 insufficient_scope. The two browser
steps are the application's, as the SDK leaves them: the redirect handler
prints the authorization URL (the test opens it in Chromium, approves the
consent page and signs in), and the callback handler is a loopback HTTP
server that receives the browser's redirect (RFC 8252 §7.3).

Usage: oauth_client.py <mcp-url>

Each line on stdout is one JSON event; the test reads them in order.
`GET /abandon` on the callback server makes a pending authorization fail
(the test's way of saying the browser never came back).
"""

import asyncio
import json
import sys
import traceback
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory; the test reads what it holds through events."""

    def __init__(self, client_info: OAuthClientInformationFull | None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        emit("tokens", scope=tokens.scope, token_type=tokens.token_type)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info
        emit("registered", client_id=client_info.client_id, scope=client_info.scope)


class LoopbackCallback:
    """Receives the authorization response on http://127.0.0.1:<port>/callback."""

    def __init__(self) -> None:
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.pending: asyncio.Future[AuthorizationCodeResult] | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode("latin-1")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        target = request_line.split(" ")[1] if request_line.count(" ") >= 2 else "/"
        url = urlparse(target)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        pending = self.pending
        if url.path == "/callback" and pending is not None and not pending.done():
            if "code" in query:
                pending.set_result(AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss")))
            else:
                pending.set_exception(OAuthFlowError(f"authorization refused: {query.get('error')}"))
        elif url.path == "/abandon" and pending is not None and not pending.done():
            pending.set_exception(OAuthFlowError("the browser never came back to the redirect URI"))
        body = b"<!doctype html><p>Signed in. You can close this window.</p>"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    async def redirect_handler(self, authorization_url: str) -> None:
        self.pending = asyncio.get_running_loop().create_future()
        emit("authorize", url=authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.pending is not None
        result = await self.pending
        emit("callback", has_code=bool(result.code), iss=result.iss)
        return result


async def call(client: Client, name: str, arguments: dict[str, Any]) -> None:
    try:
        result = await client.call_tool(name, arguments)
        emit("called", name=name, is_error=bool(result.is_error), text=[c.text for c in result.content if getattr(c, "type", "") == "text"])
    except Exception as err:  # the test asserts which error, so every one is reported
        code = getattr(getattr(err, "error", None), "code", None)
        emit("call_failed", name=name, error=type(err).__name__, message=str(err), code=code)


async def main(url: str) -> None:
    callback = LoopbackCallback()
    await callback.start()
    # The SDK registers itself (RFC 7591), with the scope of the first challenge.
    storage = MemoryStorage(None)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="Python SDK test client",
            redirect_uris=[callback.redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=callback.redirect_handler,
        callback_handler=callback.callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            emit("connected", protocol_version=client.session.protocol_version)
            tools = await client.list_tools()
            emit("tools", names=sorted(tool.name for tool in tools.tools), cache_scope=getattr(tools, "cache_scope", None))
            await call(client, "add", {"a": 2, "b": 3})
            # add_note needs mcp:write: 403 insufficient_scope -> the SDK authorizes again for the wider scope.
            await call(client, "add_note", {"text": "from python"})
            # shell is denied by policy: a 403 whose body is a JSON-RPC error, which the SDK raises as
            # the call's error; no challenge, so no authorization.
            await call(client, "shell", {"command": "id"})
            # The session goes on after a denial.
            await call(client, "echo", {"message": "still here"})
    emit("done", scope=storage.tokens.scope if storage.tokens else None)


def leaves(err: BaseException) -> list[BaseException]:
    """The exceptions inside anyio's task-group wrappers."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for inner in err.exceptions for leaf in leaves(inner)]
    return [err]


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1]))
    except BaseException as err:  # noqa: BLE001 - reported to the test, then a failing exit
        causes = [{"error": type(leaf).__name__, "message": str(leaf)} for leaf in leaves(err)]
        emit("crashed", error=type(err).__name__, causes=causes, trace=traceback.format_exc())
        sys.exit(1)
