#!/usr/bin/env python3
"""(Copied from warden's interop research, /work/scratch/interop; used by tests/conformance_server.rs.)
MCP server with the fixtures `conformance server` (npm @modelcontextprotocol/conformance
0.1.16) looks for: test_* tools, test:// resources, test_* prompts, completion, logging,
subscribe, SSE resumability. Written from the requirement text each scenario prints
(`conformance server --scenario S` shows it on failure); uses the low-level server of
PyPI `mcp` 2.3 and answers with plain dicts so the wire form is exactly what is written
here (no model re-serialisation).

  conformance_fixture_server.py                          # stdio
  conformance_fixture_server.py --http --port 3401       # streamable HTTP at /mcp, 127.0.0.1
      [--host H] [--no-dns-rebinding-protection] [--retry-ms 500] [--require-bearer TOKEN]
      [--modern-asks input_required|request]
Under 2026-07-28 (a client that probes server/discover, e.g. rmcp's Auto lifecycle) results carry
resultType/ttlMs/cacheScope, and elicitation/sampling tools answer `input_required` (SEP-2322)
unless --modern-asks request; under the handshake versions they send elicitation/create and
sampling/createMessage to the client as usual.
"""

import argparse
import anyio
import asyncio
import base64
import json
import sys
import warnings

warnings.simplefilter("ignore")  # logging/sampling are "deprecated as of 2026-07-28"

from mcp.server.caching import CacheHint  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.types import SamplingMessage, TextContent  # noqa: E402

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
# 44-byte RIFF/WAVE header with 2 bytes of silence
WAV = base64.b64encode(
    b"RIFF" + (38).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    + b"data" + (2).to_bytes(4, "little") + b"\0\0"
).decode()

NOARGS = {"type": "object", "properties": {}}


def text(t):
    return {"type": "text", "text": t}


TOOLS = [
    {"name": "test_simple_text", "description": "Returns simple text", "inputSchema": NOARGS},
    {"name": "test_image_content", "description": "Returns a PNG image", "inputSchema": NOARGS},
    {"name": "test_audio_content", "description": "Returns a WAV clip", "inputSchema": NOARGS},
    {"name": "test_embedded_resource", "description": "Returns an embedded resource", "inputSchema": NOARGS},
    {"name": "test_multiple_content_types", "description": "Returns text, image and resource", "inputSchema": NOARGS},
    {"name": "test_tool_with_logging", "description": "Sends 3 info log messages", "inputSchema": NOARGS},
    {"name": "test_tool_with_progress", "description": "Reports progress 0/50/100", "inputSchema": NOARGS},
    {"name": "test_error_handling", "description": "Always fails (isError)", "inputSchema": NOARGS},
    {"name": "test_sampling", "description": "Asks the client to sample",
     "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}},
    {"name": "test_elicitation", "description": "Asks the client's user for input",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "test_elicitation_sep1034_defaults", "description": "Elicitation with defaults (SEP-1034)",
     "inputSchema": NOARGS},
    {"name": "test_elicitation_sep1330_enums", "description": "Elicitation with enum variants (SEP-1330)",
     "inputSchema": NOARGS},
    {"name": "test_reconnection", "description": "Closes the SSE stream mid-call (SEP-1699)", "inputSchema": NOARGS},
    {"name": "test_roots", "description": "Asks the client for its roots (roots/list)", "inputSchema": NOARGS},
    {"name": "test_roots_seen", "description": "The roots listed after each roots/list_changed (waits up to 10 s for one)",
     "inputSchema": NOARGS},
    {"name": "test_ask", "description": "Sends the client one sampling/createMessage or elicitation/create "
     "(form, or URL mode with `url`) built from the arguments, after `wait_ms`; with `after_return` from a "
     "background task once this call has returned (outside any request: see test_asked_later)",
     "inputSchema": {"type": "object", "properties": {
         "method": {"type": "string", "enum": ["sampling", "elicitation"]}, "message": {"type": "string"},
         "schema": {"type": "object"}, "url": {"type": "string"}, "system_prompt": {"type": "string"},
         "wait_ms": {"type": "integer"}, "after_return": {"type": "boolean"}, "repeat": {"type": "integer"}, "spec_hex": {"type": "string"}},
         "required": ["method"]}},
    {"name": "test_asked_later", "description": "What test_ask's background requests got back (waits up to "
     "`wait_ms`, default 10000, for `count`, default 1)",
     "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}, "wait_ms": {"type": "integer"}}}},
    {"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features",
     "inputSchema": {
         "$schema": "https://json-schema.org/draft/2020-12/schema",
         "type": "object",
         "$defs": {"address": {"type": "object",
                               "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
         "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
         "additionalProperties": False}},
]

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
                   "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}
SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"}]}},
    },
}

RESOURCES = [
    {"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain"},
    {"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png"},
    {"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain"},
]
TEMPLATES = [{"uriTemplate": "test://template/{id}/data", "name": "template-data", "mimeType": "application/json"}]
PROMPTS = [
    {"name": "test_simple_prompt", "description": "A prompt without arguments"},
    {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
     "arguments": [{"name": "arg1", "description": "First test argument", "required": True},
                   {"name": "arg2", "description": "Second test argument", "required": True}]},
    {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
     "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}]},
    {"name": "test_prompt_with_image", "description": "A prompt with an image"},
]

subscriptions: set[str] = set()


def _dump(m):
    return m.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(m, "model_dump") else m


class NeedInput(Exception):
    """2026-07-28 has no server-to-client requests: answer `input_required` and let the
    client retry the call with `inputResponses` (multi-round-trip, SEP-2322)."""

    def __init__(self, key, method, params):
        self.result = {"resultType": "input_required", "inputRequests": {key: {"method": method, "params": params}}}


MODERN_ASKS = "input_required"  # or "request": try a server-to-client request (fails: no back-channel)


async def ask(ctx, params, key, method, req):
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and MODERN_ASKS == "input_required":
        got = (getattr(params, "input_responses", None) or {}).get(key)
        if got is None:
            raise NeedInput(key, method, req)
        return _dump(got)
    if method == "elicitation/create":
        return _dump(await ctx.session.elicit_form(req["message"], req["requestedSchema"],
                                                   related_request_id=ctx.request_id))
    msgs = [SamplingMessage(role="user", content=TextContent(type="text", text=m["content"]["text"]))
            for m in req["messages"]]
    return _dump(await ctx.session.create_message(msgs, max_tokens=req["maxTokens"],
                                                  related_request_id=ctx.request_id))


async def elicit(ctx, params, message, schema):
    return await ask(ctx, params, "elicit", "elicitation/create", {"mode": "form", "message": message,
                                                                   "requestedSchema": schema})


async def call_tool(ctx, params):
    try:
        return await _call_tool(ctx, params)
    except NeedInput as e:
        return e.result


async def _call_tool(ctx, params):
    name, args = params.name, params.arguments or {}
    s = ctx.session
    if name == "test_simple_text":
        return {"content": [text("This is a simple text response for testing.")]}
    if name == "test_image_content":
        return {"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]}
    if name == "test_audio_content":
        return {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}
    if name == "test_embedded_resource":
        return {"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}}]}
    if name == "test_multiple_content_types":
        return {"content": [
            text("Multiple content types test:"),
            {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                                              "text": json.dumps({"test": "data", "value": 123})}}]}
    if name == "test_tool_with_logging":
        for i, msg in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
            if i:
                await asyncio.sleep(0.05)
            await s.send_log_message("info", msg, logger="conformance-fixture", related_request_id=ctx.request_id)
        return {"content": [text("Tool with logging executed successfully")]}
    if name == "test_tool_with_progress":
        for i, p in enumerate([0, 50, 100]):
            if i:
                await asyncio.sleep(0.05)
            await s.report_progress(p, 100, f"step {p} of 100")
        return {"content": [text("Tool with progress executed successfully")]}
    if name == "test_error_handling":
        return {"isError": True, "content": [text("This tool intentionally returns an error for testing")]}
    if name == "test_sampling":
        res = await ask(ctx, params, "sample", "sampling/createMessage", {
            "messages": [{"role": "user", "content": text(args.get("prompt", ""))}], "maxTokens": 100})
        content = res.get("content") or {}
        reply = content.get("text") if isinstance(content, dict) else json.dumps(content)
        return {"content": [text(f"LLM response: {reply}")]}
    if name == "test_elicitation":
        res = await elicit(ctx, params, args.get("message", ""), {
            "type": "object",
            "properties": {"username": {"type": "string", "description": "User's response"},
                           "email": {"type": "string", "description": "User's email address"}},
            "required": ["username", "email"]})
        return {"content": [text(f"User response: action={res.get('action')}, content={json.dumps(res.get('content', {}))}")]}
    if name == "test_elicitation_sep1034_defaults":
        res = await elicit(ctx, params, "Please provide user information (defaults given)", SEP1034_SCHEMA)
        return {"content": [text(f"Elicitation completed: action={res.get('action')}, content={json.dumps(res.get('content', {}))}")]}
    if name == "test_elicitation_sep1330_enums":
        res = await elicit(ctx, params, "Please pick values (enum variants)", SEP1330_SCHEMA)
        return {"content": [text(f"Elicitation completed: action={res.get('action')}, content={json.dumps(res.get('content', {}))}")]}
    if name == "test_reconnection":
        await s.send_log_message("info", "Before disconnect", related_request_id=ctx.request_id)
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await asyncio.sleep(0.3)
        return {"content": [text("Reconnection test completed")]}
    if name == "test_roots":
        res = await s.list_roots()
        return {"content": [text(json.dumps(_dump(res)))]}
    if name == "test_roots_seen":
        with anyio.move_on_after(10):
            await roots_changed().wait()
        return {"content": [text(json.dumps(roots_seen))]}
    if name == "test_ask":
        if args.get("spec_hex"):
            # The request's text given as hex-encoded JSON: arguments that are plain ASCII, so
            # text with escapes reaches the server request without the call being asked about.
            args = {**args, **json.loads(bytes.fromhex(args["spec_hex"]))}
        if args.get("after_return"):
            # Outside any request: no related request id, sent once this call has returned.
            asyncio.get_running_loop().create_task(ask_later(s, args))
            return {"content": [text("scheduled")]}
        await asyncio.sleep(args.get("wait_ms", 0) / 1000)
        return {"content": [text(json.dumps(await ask_raw(s, args, ctx.request_id)))]}
    if name == "test_asked_later":
        deadline = asyncio.get_running_loop().time() + args.get("wait_ms", 10000) / 1000
        while len(asked_later) < args.get("count", 1) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return {"content": [text(json.dumps(asked_later))]}
    if name == "json_schema_2020_12_tool":
        return {"content": [text(json.dumps(args))]}
    raise MCPError(-32602, f"Unknown tool: {name}")


# What test_ask's background requests got back, in order.
asked_later = []


async def ask_raw(s, a, related):
    """One server request built from test_ask's arguments; what came back, or the error."""
    try:
        if a["method"] == "elicitation" and a.get("url"):
            r = await s.elicit_url(a.get("message", ""), a["url"], "fixture-ask", related_request_id=related)
        elif a["method"] == "elicitation":
            r = await s.elicit_form(a.get("message", ""), a.get("schema") or {"type": "object", "properties": {}},
                                    related_request_id=related)
        else:
            msgs = [SamplingMessage(role="user", content=TextContent(type="text", text=a.get("message", "")))]
            r = await s.create_message(msgs, max_tokens=100, system_prompt=a.get("system_prompt"),
                                       related_request_id=related)
        return {"answered": _dump(r)}
    except Exception as e:  # noqa: BLE001 - the refusal is what the test looks for
        return {"error": str(e)}


async def ask_later(s, a):
    await asyncio.sleep(a.get("wait_ms", 0) / 1000)
    # `repeat`: that many, one after the other (a flood of them).
    for _ in range(a.get("repeat", 1)):
        asked_later.append(await ask_raw(s, a, None))


# The roots listed in answer to each notifications/roots/list_changed.
roots_seen = []
_roots_changed = []


def roots_changed():
    if not _roots_changed:
        _roots_changed.append(asyncio.Event())
    return _roots_changed[0]


async def on_roots_list_changed(ctx, params):
    # Not awaited here: the answer to roots/list arrives through the very
    # loop that runs this handler.
    async def fetch():
        res = await ctx.session.list_roots()
        roots_seen.append(_dump(res))
        roots_changed().set()
    asyncio.get_running_loop().create_task(fetch())


async def list_tools(ctx, params):
    return {"tools": TOOLS}


async def list_resources(ctx, params):
    return {"resources": RESOURCES}


async def list_templates(ctx, params):
    return {"resourceTemplates": TEMPLATES}


async def read_resource(ctx, params):
    uri = str(params.uri)
    if uri == "test://static-text":
        return {"contents": [{"uri": uri, "mimeType": "text/plain",
                              "text": "This is the content of the static text resource."}]}
    if uri == "test://static-binary":
        return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}]}
    if uri == "test://watched-resource":
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]}
    if uri.startswith("test://template/") and uri.endswith("/data"):
        rid = uri[len("test://template/"):-len("/data")]
        if rid and "/" not in rid:
            return {"contents": [{"uri": uri, "mimeType": "application/json", "text": json.dumps(
                {"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"})}]}
    raise MCPError(-32002, f"Resource not found: {uri}", {"uri": uri})


async def subscribe(ctx, params):
    subscriptions.add(str(params.uri))
    return {}


async def unsubscribe(ctx, params):
    subscriptions.discard(str(params.uri))
    return {}


async def list_prompts(ctx, params):
    return {"prompts": PROMPTS}


async def get_prompt(ctx, params):
    name, args = params.name, params.arguments or {}
    if name == "test_simple_prompt":
        return {"messages": [{"role": "user", "content": text("This is a simple prompt for testing.")}]}
    if name == "test_prompt_with_arguments":
        return {"messages": [{"role": "user", "content": text(
            f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'")}]}
    if name == "test_prompt_with_embedded_resource":
        return {"messages": [
            {"role": "user", "content": {"type": "resource", "resource": {
                "uri": args.get("resourceUri", "test://example-resource"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}}},
            {"role": "user", "content": text("Please process the embedded resource above.")}]}
    if name == "test_prompt_with_image":
        return {"messages": [
            {"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}},
            {"role": "user", "content": text("Please analyze the image above.")}]}
    raise MCPError(-32602, f"Unknown prompt: {name}")


async def complete(ctx, params):
    value = params.argument.value
    options = [v for v in ("paris", "park", "party") if v.startswith(value)]
    return {"completion": {"values": options, "total": len(options), "hasMore": False}}


async def set_level(ctx, params):
    return {}


class MemoryEventStore(EventStore):
    """Keeps every event so a client can resume a stream with Last-Event-ID."""

    def __init__(self):
        self.events = []  # (stream_id, event_id, message)

    async def store_event(self, stream_id, message):
        eid = str(len(self.events) + 1)
        self.events.append((stream_id, eid, message))
        return eid

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for s, e, m in self.events:
            if s == stream and int(e) > int(last_event_id) and m is not None:
                await send_callback(EventMessage(m, e))
        return stream


def era(fn):
    """2026-07-28 results need `resultType` (and ttlMs/cacheScope on cacheable methods, filled
    by cache_hints below); handshake-era results must not carry them."""
    async def wrapped(ctx, params):
        r = await fn(ctx, params)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and isinstance(r, dict):
            r = {"resultType": "complete", **r}
        return r
    return wrapped


def build():
    cacheable = ["tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"]
    return Server(
        "warden-conformance-fixture", version="1.0.0",
        cache_hints={m: CacheHint() for m in cacheable},
        on_list_tools=era(list_tools), on_call_tool=era(call_tool),
        on_list_resources=era(list_resources), on_list_resource_templates=era(list_templates),
        on_read_resource=era(read_resource), on_subscribe_resource=era(subscribe),
        on_unsubscribe_resource=era(unsubscribe), on_list_prompts=era(list_prompts), on_get_prompt=era(get_prompt),
        on_completion=era(complete), on_set_logging_level=era(set_level),
        on_roots_list_changed=on_roots_list_changed,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", action="store_true", help="streamable HTTP at /mcp instead of stdio")
    ap.add_argument("--marker", help="ignored: lets a test find this process")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3401)
    ap.add_argument("--retry-ms", type=int, default=500, help="SSE retry field")
    ap.add_argument("--no-dns-rebinding-protection", action="store_true")
    ap.add_argument("--require-bearer", metavar="TOKEN", help="answer 401 unless Authorization: Bearer TOKEN")
    ap.add_argument("--modern-asks", choices=["input_required", "request"], default="input_required",
                    help="how elicitation/sampling tools ask under 2026-07-28: an input_required result "
                         "(multi-round-trip) or a server-to-client request (SDK error: no back-channel)")
    a = ap.parse_args()
    global MODERN_ASKS
    MODERN_ASKS = a.modern_asks
    server = build()
    if not a.http:
        import anyio
        from mcp.server.stdio import stdio_server

        async def run():
            async with stdio_server() as (r, w):
                await server.run(r, w, server.create_initialization_options())
        anyio.run(run)
        return
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings
    sec = TransportSecuritySettings(enable_dns_rebinding_protection=False) if a.no_dns_rebinding_protection else None
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=a.retry_ms,
                                     transport_security=sec, host=a.host)
    if a.require_bearer:
        inner, want = app, f"Bearer {a.require_bearer}".encode()

        async def app(scope, receive, send):  # noqa: F811 - plain ASGI wrapper
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != want:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b"Bearer"), (b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
            await inner(scope, receive, send)
    print(f"fixture: http://{a.host}:{a.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
