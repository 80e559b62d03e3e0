"""An MCP server in plain Python (no SDK) that answers each request with
the request line exactly as it received it, so a test sees what warden
sent: `tools/call` (tool `echo`) as a text result, `prompts/get` (prompt
`p`, argument `path`) as a message, `completion/complete` as the one
completion value; the template `file:///{+path}` is listed.

    python3 raw_echo_server.py [--marker M]    serve MCP over stdio
"""

import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(method, params, raw):
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "completions": {}},
            "serverInfo": {"name": "raw-echo", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": raw}]}
    if method == "prompts/list":
        return {"prompts": [{"name": "p", "arguments": [{"name": "path"}, {"name": "dir"}]}]}
    if method == "prompts/get":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": raw}}]}
    if method == "resources/list":
        return {"resources": []}
    if method == "resources/templates/list":
        return {"resourceTemplates": [{"uriTemplate": "file:///{+path}", "name": "f"}]}
    if method == "completion/complete":
        return {"completion": {"values": [raw]}}
    return {}


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        continue
    send({"jsonrpc": "2.0", "id": message["id"],
          "result": answer(message["method"], message.get("params") or {}, line.strip())})
