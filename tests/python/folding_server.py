"""A tiny MCP server (stdio, JSON-RPC by hand) that binds arguments to its
parameters the way Go's `encoding/json` does (mcp-go's typed handlers and
`BindArguments`, any Go server that unmarshals `arguments` into a struct):
a key names a parameter when it is equal to it with case folded (`PATH`
and `Path` are `path`; `pathſ` is `paths`, `ſ` folding to `s`), each
matching key in the order of the text assigns it, so the last one wins.
The schemas are what such servers declare: properties, nothing required,
no `additionalProperties`.

Tools: read_file(path) → {"resolved", "content"|"error"};
read_files(paths: [str]) → {"read": [...]}.
"""

import json
import sys


def fold(key: str) -> str:
    return key.upper().lower()


def bind(pairs, name: str):
    """The value Go's decoder leaves in the field `name`."""
    value = None
    for key, v in pairs:
        if key == name or fold(key) == fold(name):
            value = v
    return value


def read(path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return {"resolved": path, "content": f.read()}
    except Exception as e:
        return {"resolved": path, "error": f"{type(e).__name__}: {e}"}


TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "read_files",
        "description": "Read files.",
        "inputSchema": {
            "type": "object",
            "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
        },
        "annotations": {"readOnlyHint": True},
    },
]


def call(name: str, pairs) -> dict:
    if name == "read_file":
        return read(bind(pairs, "path"))
    if name == "read_files":
        return {"read": [read(p) for p in bind(pairs, "paths") or []]}
    return {"error": f"no tool {name}"}


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        mid = msg.get("id")
        method = msg.get("method")
        if mid is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "folding", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            # The arguments as pairs, in the order of the text.
            params = json.loads(line, object_pairs_hook=lambda pairs: pairs)
            params = dict(params)["params"]
            params = dict(params)
            text = json.dumps(call(params["name"], params.get("arguments") or []))
            result = {"content": [{"type": "text", "text": text}]}
        else:
            err = {"code": -32601, "message": f"no method {method}"}
            print(json.dumps({"jsonrpc": "2.0", "id": mid, "error": err}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)


if __name__ == "__main__":
    main()
