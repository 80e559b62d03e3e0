"""A small MCP server (official Python SDK, low-level Server) for warden's
request-mediation tests: it reads resource URIs the way servers behind a
decoding framework do, completes a resource template's argument, and asks
its client to sample with whatever `includeContext` a tool is given.

Resources: `vault://box/readme` (listed) and the templates
`vault://box/{name}` and `vault://{+path}`; a read percent-decodes the URI until it no longer
changes (`urllib.parse.unquote`, as a framework that decodes the path and
a handler that decodes it again do), lower-cases scheme and host, and
normalises the path (`posixpath.normpath`): so `vault://box/%6Bey`,
`vault://box/%256Bey`, `VAULT://BOX/key` and `vault://box/pub/%2e%2e/key`
all read the secret `vault://box/key`.

Completion (ref/resource `vault://box/{name}`, argument `name`): the names
in NAMES that start with the value.

Tool `sample(include_context)`: sends `sampling/createMessage` with that
`includeContext` and answers with what the client sent back.

With `--ask-while-listing`, `tools/list` first asks the client for roots,
a sample and an elicitation (as a server may while `warden mcp status`
lists it).

    python mediation_server.py [--marker M]    serve MCP over stdio
"""

import argparse
import posixpath
import urllib.parse
import warnings

warnings.simplefilter("ignore")  # sampling is "deprecated as of 2026-07-28"

import anyio  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.types import SamplingMessage, TextContent  # noqa: E402

SECRETS = {"box/key": "THE VAULT KEY", "box/keyring": "THE VAULT KEYRING", "box/readme": "readme text"}
NAMES = ["key", "keyring", "readme"]


def resolve(uri: str) -> str:
    """What this server opens for `uri`: `host/path`, decoded and normalised."""
    while True:
        decoded = urllib.parse.unquote(uri)
        if decoded == uri:
            break
        uri = decoded
    scheme, _, rest = uri.partition("://")
    host, _, path = rest.partition("/")
    if scheme.lower() != "vault":
        raise MCPError(-32002, f"Resource not found: {uri}")
    return posixpath.normpath(f"{host.lower()}/{path}")


ASK_WHILE_LISTING = False


async def ask_everything(ctx):
    """Asks the client for roots, a sample and an answer while it is being listed."""
    asked = []
    for name, ask in [
        ("roots", lambda: ctx.session.list_roots()),
        ("sampling", lambda: ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))], max_tokens=10,
            related_request_id=ctx.request_id)),
        ("elicitation", lambda: ctx.session.elicit_form(
            "your name?", {"type": "object", "properties": {"name": {"type": "string"}}},
            related_request_id=ctx.request_id)),
    ]:
        try:
            asked.append((name, await ask()))
        except Exception as e:  # refused: what this server sees
            asked.append((name, str(e)))
    return asked


async def list_tools(ctx, params):
    if ASK_WHILE_LISTING:
        await ask_everything(ctx)
    return {"tools": [{
        "name": "sample", "description": "Asks the client to sample",
        "inputSchema": {"type": "object", "properties": {"include_context": {"type": "string"}}},
    }]}


async def call_tool(ctx, params):
    args = params.arguments or {}
    if params.name != "sample":
        raise MCPError(-32602, f"Unknown tool: {params.name}")
    res = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text="summarise"))],
        max_tokens=50, include_context=args.get("include_context"), related_request_id=ctx.request_id)
    content = res.content
    return {"content": [{"type": "text", "text": f"sampled: {getattr(content, 'text', content)}"}]}


async def list_resources(ctx, params):
    return {"resources": [{"uri": "vault://box/readme", "name": "readme"}]}


async def list_templates(ctx, params):
    return {"resourceTemplates": [{"uriTemplate": "vault://box/{name}", "name": "vault entry"},
                                  {"uriTemplate": "vault://{+path}", "name": "anything in the vault"}]}


async def read_resource(ctx, params):
    uri = str(params.uri)
    opened = resolve(uri)
    if opened in SECRETS:
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": SECRETS[opened]}]}
    raise MCPError(-32002, f"Resource not found: {uri}")


async def complete(ctx, params):
    value = params.argument.value
    options = [n for n in NAMES if n.startswith(value)]
    return {"completion": {"values": options, "total": len(options), "hasMore": False}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--marker", help="ignored: lets a test find this process")
    ap.add_argument("--ask-while-listing", action="store_true",
                    help="ask the client for roots, sampling and elicitation during tools/list")
    global ASK_WHILE_LISTING
    ASK_WHILE_LISTING = ap.parse_args().ask_while_listing
    server = Server(
        "warden-mediation-test", version="1.0.0",
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=list_resources, on_list_resource_templates=list_templates,
        on_read_resource=read_resource, on_completion=complete,
    )
    from mcp.server.stdio import stdio_server

    async def run():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())
    anyio.run(run)


if __name__ == "__main__":
    main()
