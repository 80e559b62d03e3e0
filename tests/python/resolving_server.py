"""A tiny MCP server (official Python SDK, MCPServer) that resolves paths
and file: URIs the way Python servers do, for warden's issue-11 tests:
`pathlib.Path(p).expanduser().resolve()` for paths (relative to the working
directory), `urllib.request.url2pathname(urllib.parse.urlparse(u).path)`
for URIs. Each read answers {"resolved": PATH, "content": TEXT} or
{"resolved"?, "error": TEXT}.

    python resolving_server.py              serve MCP over stdio
    python resolving_server.py --resolve    read a JSON array of strings on
        stdin, print [{"path": P|null, "uri": P|null}] (the property test's
        batch: what read_file and read_uri would open, without opening)

Tools: read_file(path), read_uri(uri), read_note(id: int),
read_latest_note(id: int = 2) (the SDK applies the default), fetch(url)
(`urllib.request.urlopen`), fetch_httpx(url) (`httpx2.get`); and, for the
readings of a value a server may expand or parse: read_expand(path)
(`os.path.expandvars(os.path.expanduser(p))`), read_glob(path) (every file
`glob.glob(p)` finds, `{"read": [...]}`), read_paths(paths: str | list[str])
(the SDK parses JSON text into the list), list_uri(uri) (`os.listdir` of
the URI's path, `{"resolved", "entries"}`); run_shell(cmd) runs the
command in a shell, as servers that run commands do (`{"stdout", "code"}`).
"""

import glob
import json
import os
import pathlib
import subprocess
import sys
import urllib.parse
import urllib.request

NOTES = {1: "note one", 2: "note two: the secret plan", 3: "note three"}


def resolve_path(p: str) -> str:
    return str(pathlib.Path(p).expanduser().resolve())


def resolve_uri(u: str) -> str:
    return resolve_path(urllib.request.url2pathname(urllib.parse.urlparse(u).path))


def attempt(f, arg):
    try:
        return f(arg)
    except Exception:
        return None


def read(resolve, arg) -> str:
    try:
        resolved = resolve(arg)
    except Exception as e:
        return json.dumps({"error": f"{type(e).__name__}: {e}"})
    try:
        with open(resolved, encoding="utf-8") as f:
            return json.dumps({"resolved": resolved, "content": f.read()})
    except Exception as e:
        return json.dumps({"resolved": resolved, "error": f"{type(e).__name__}: {e}"})


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("resolving-py", subscriptions=False)

    @server.tool(name="read_file", description="Read a file.")
    def read_file(path: str) -> str:
        return read(resolve_path, path)

    @server.tool(name="read_uri", description="Read a file: URI.")
    def read_uri(uri: str) -> str:
        return read(resolve_uri, uri)

    @server.tool(name="read_note", description="Read a note by id.")
    def read_note(id: int) -> str:
        return NOTES.get(id, "no such note")

    @server.tool(name="read_latest_note", description="Read a note; the latest without an id.")
    def read_latest_note(id: int = 2) -> str:
        return NOTES.get(id, "no such note")

    @server.tool(name="fetch", description="Fetch a URL.")
    def fetch(url: str) -> str:
        try:
            with urllib.request.urlopen(url) as response:
                content = response.read().decode("utf-8", "replace")
            return json.dumps({"url": url, "content": content})
        except Exception as e:
            return json.dumps({"error": f"{type(e).__name__}: {e}"})

    # fetch_httpx: the same fetch through httpx (httpx2 in the test venv,
    # the MCP SDK's own HTTP client), which reads the authority of a URL
    # otherwise than urllib (tests/url_hosts_e2e.rs).
    @server.tool(name="fetch_httpx", description="Fetch a URL with httpx.")
    def fetch_httpx(url: str) -> str:
        try:
            import httpx2

            response = httpx2.get(url, timeout=10)
            return json.dumps({"url": url, "content": response.text})
        except Exception as e:
            return json.dumps({"error": f"{type(e).__name__}: {e}"})

    @server.tool(name="read_expand", description="Read a file, expanding ~ and $VARS.")
    def read_expand(path: str) -> str:
        return read(lambda p: resolve_path(os.path.expandvars(os.path.expanduser(p))), path)

    @server.tool(name="read_glob", description="Read every file a glob finds.")
    def read_glob(path: str) -> str:
        return json.dumps({"read": [json.loads(read(resolve_path, p)) for p in glob.glob(path)]})

    @server.tool(name="read_paths", description="Read one path or a list of paths.")
    def read_paths(paths: str | list[str]) -> str:
        if isinstance(paths, str):
            paths = [paths]
        return json.dumps({"read": [json.loads(read(resolve_path, p)) for p in paths]})

    @server.tool(name="list_uri", description="List the folder a URI names.")
    def list_uri(uri: str) -> str:
        try:
            resolved = resolve_uri(uri)
            return json.dumps({"resolved": resolved, "entries": sorted(os.listdir(resolved))})
        except Exception as e:
            return json.dumps({"error": f"{type(e).__name__}: {e}"})

    @server.tool(name="run_shell", description="Run a command in a shell.")
    def run_shell(cmd: str) -> str:
        done = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        return json.dumps({"stdout": done.stdout, "code": done.returncode})

    import anyio

    anyio.run(server.run_stdio_async)


def resolve_batch() -> None:
    inputs = json.load(sys.stdin)
    out = [{"path": attempt(resolve_path, s), "uri": attempt(resolve_uri, s)} for s in inputs]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if "--resolve" in sys.argv:
        resolve_batch()
    else:
        serve()
