#!/usr/bin/env python3
"""A client of `warden gateway` written with the official MCP Python SDK
(PyPI `mcp`, in the venv of tests/python/setup-venv.sh). Runs the steps of
a plan and prints one JSON object: what each step returned (or its error)
and every notification, in the order received.

  gateway_client.py PLAN.json (URL [TOKEN] | -- CMD ARG...)

PLAN: {"steps": [STEP, ...]}, each STEP one of
  {"list": "tools" | "resources" | "templates" | "prompts"}
  {"read": URI} / {"read": URI, "progress": TOKEN}   (the token in _meta)
  {"subscribe": URI} / {"unsubscribe": URI}
  {"prompt": NAME, "arguments": {...}}
  {"complete_prompt": NAME, "argument": NAME, "value": TEXT}
  {"complete_resource": URI_TEMPLATE, "argument": NAME, "value": TEXT}
  {"set_level": LEVEL}
  {"call": TOOL, "arguments": {...}, "progress": true|false}
  {"sleep": SECONDS}
PLAN "answers" (optional): how the client answers a server's requests the
gateway passes on, {"elicitation": {"action": ..., "content": {...}},
"sampling": {"text": ...}}; without it elicitation is declined and sampling
refused. Each request received is recorded in the events ({"asked": ...}).
Environment for a stdio gateway: the SDK passes only HOME, LOGNAME, PATH,
SHELL, TERM, USER; the plan's "env" object is added.
"""
import asyncio
import json
import sys
import warnings

warnings.simplefilter("ignore")

import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

plan = json.load(open(sys.argv[1]))
target = sys.argv[2:]
events = []
out = {"steps": [], "events": events}


def dump(m):
    if m is None:
        return None
    return m.model_dump(mode="json", by_alias=True, exclude_none=True)


async def on_log(params):
    events.append({"log": dump(params)})


async def on_message(message):
    if isinstance(message, Exception):
        events.append({"exception": str(message)})
        return
    if isinstance(message, types.LoggingMessageNotification):
        return  # already recorded by on_log
    events.append({"notification": type(message).__name__, "params": dump(getattr(message, "params", None))})


answers = plan.get("answers", {})


async def on_elicit(ctx, p):
    events.append({"asked": {"elicitation": dump(p)}})
    return types.ElicitResult(**answers.get("elicitation", {"action": "decline"}))


async def on_sample(ctx, p):
    events.append({"asked": {"sampling": dump(p)}})
    if "sampling" not in answers:
        return types.ErrorData(code=-1, message="sampling refused: no answer given")
    return types.CreateMessageResult(role="assistant", model="answers-file",
                                     content=types.TextContent(type="text", text=answers["sampling"]["text"]))


def progress_recorder(label):
    async def record(progress, total, message):
        events.append({"progress": label, "value": progress, "total": total, "message": message})
    return record


async def step(c, s):
    if "list" in s:
        what = s["list"]
        if what == "tools":
            return [t.name for t in (await c.list_tools()).tools]
        if what == "resources":
            return [r.uri for r in (await c.list_resources(cache_mode="refresh")).resources]
        if what == "templates":
            return [t.uri_template for t in (await c.list_resource_templates(cache_mode="refresh")).resource_templates]
        if what == "prompts":
            return [dump(p) for p in (await c.list_prompts(cache_mode="refresh")).prompts]
    if "read" in s:
        meta = {"progressToken": s["progress"]} if "progress" in s else None
        return dump(await c.read_resource(s["read"], meta=meta, cache_mode="refresh"))
    if "subscribe" in s:
        return dump(await c.subscribe_resource(s["subscribe"]))
    if "unsubscribe" in s:
        return dump(await c.unsubscribe_resource(s["unsubscribe"]))
    if "prompt" in s:
        return dump(await c.get_prompt(s["prompt"], s.get("arguments")))
    if "complete_prompt" in s:
        ref = types.PromptReference(type="ref/prompt", name=s["complete_prompt"])
        return dump(await c.complete(ref, {"name": s["argument"], "value": s["value"]}))
    if "complete_resource" in s:
        ref = types.ResourceTemplateReference(type="ref/resource", uri=s["complete_resource"])
        return dump(await c.complete(ref, {"name": s["argument"], "value": s["value"]}))
    if "set_level" in s:
        return dump(await c.set_logging_level(s["set_level"]))
    if "call" in s:
        cb = progress_recorder(s["call"]) if s.get("progress") else None
        return dump(await c.call_tool(s["call"], s.get("arguments", {}), progress_callback=cb))
    if "sleep" in s:
        await asyncio.sleep(s["sleep"])
        return None
    raise ValueError(f"unknown step {s}")


async def main():
    if target[0] == "--":
        from mcp.client.stdio import get_default_environment
        env = {**get_default_environment(), **plan.get("env", {})}
        server = StdioServerParameters(command=target[1], args=target[2:], env=env)
    else:
        headers = {"Authorization": f"Bearer {target[1]}"} if len(target) > 1 else {}
        server = streamable_http_client(target[0], http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    callbacks = {"elicitation_callback": on_elicit, "sampling_callback": on_sample} if "answers" in plan else {}
    async with Client(server, mode="legacy", logging_callback=on_log, message_handler=on_message, **callbacks) as c:
        caps = c.server_capabilities
        out["protocol"] = c.protocol_version
        out["capabilities"] = dump(caps)
        for s in plan["steps"]:
            events.append({"step": len(out["steps"])})
            try:
                out["steps"].append({"ok": await step(c, s)})
            except Exception as e:  # an MCP error: its message and code
                error = getattr(e, "error", None)
                out["steps"].append({"error": str(e), "code": getattr(error, "code", None)})
    print(json.dumps(out, default=str))


asyncio.run(main())
