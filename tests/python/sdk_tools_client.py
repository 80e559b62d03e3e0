#!/usr/bin/env python3
"""The official MCP Python SDK (PyPI `mcp`) as a client of `warden gateway
--stdio`: lists the tools, makes the calls given, prints one JSON object
{"protocol", "tools", "calls": [{"tool", "isError", "text"}]}.

  sdk_tools_client.py [-e K=V]... [--call TOOL '{json}']... -- CMD ARG...

The server gets only the SDK's default environment plus the -e variables."""
import argparse
import asyncio
import json
import warnings

warnings.simplefilter("ignore")
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import get_default_environment  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("-e", "--env", action="append", default=[])
ap.add_argument("--call", nargs=2, action="append", default=[], metavar=("TOOL", "ARGS"))
ap.add_argument("target", nargs=argparse.REMAINDER)
a = ap.parse_args()
target = a.target[1:] if a.target and a.target[0] == "--" else a.target


async def main():
    env = {**get_default_environment(), **dict(kv.split("=", 1) for kv in a.env)}
    server = StdioServerParameters(command=target[0], args=target[1:], env=env)
    out = {}
    async with Client(server, mode="legacy") as c:
        out["protocol"] = c.protocol_version
        out["tools"] = sorted(t.name for t in (await c.list_tools()).tools)
        calls = []
        for name, args in a.call:
            result = await c.call_tool(name, json.loads(args))
            text = "".join(getattr(b, "text", "") for b in result.content)
            calls.append({"tool": name, "isError": bool(result.is_error), "text": text})
        out["calls"] = calls
    print(json.dumps(out))


asyncio.run(main())
