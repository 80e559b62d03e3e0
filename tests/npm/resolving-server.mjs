// A tiny MCP server (official TypeScript SDK, low-level API) that resolves
// paths and file: URIs the way Node servers do, for warden's issue-11
// tests: `~` through os.homedir() (as @modelcontextprotocol/server-filesystem
// expands it), `path.resolve` against the working directory, and
// `url.fileURLToPath` for URIs. Each read answers
// {"resolved": PATH, "content": TEXT} or {"resolved"?, "error": TEXT}.
//
//   node resolving-server.mjs              serve MCP over stdio
//   node resolving-server.mjs --resolve    read a JSON array of strings on
//       stdin, print [{"path": P|null, "uri": P|null}] (the property test's
//       batch: what read_file and read_uri would open, without opening)
//
// Tools: read_file(path), read_uri(uri), read_note(id: integer), fetch(url)
// (Node's own `fetch`, a WHATWG URL parser), and hostile_schema, whose inputSchema is issue 11's exponential anyOf/$ref
// chain (HOSTILE_DEPTH levels, default 40).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export function resolvePath(p) {
  let s = String(p);
  if (s === "~" || s.startsWith("~/")) {
    s = path.join(os.homedir(), s.slice(1));
  }
  return path.resolve(s);
}

export function resolveUri(u) {
  return path.resolve(fileURLToPath(String(u)));
}

function attempt(f, arg) {
  try {
    return f(arg);
  } catch {
    return null;
  }
}

function read(resolve, arg) {
  let resolved;
  try {
    resolved = resolve(arg);
  } catch (e) {
    return JSON.stringify({ error: String(e && e.code ? e.code : e) });
  }
  try {
    return JSON.stringify({ resolved, content: fs.readFileSync(resolved, "utf8") });
  } catch (e) {
    return JSON.stringify({ resolved, error: String(e && e.code ? e.code : e) });
  }
}

function exponentialSchema(depth) {
  const defs = {};
  for (let i = 0; i < depth; i++) {
    const next = `#/$defs/n${i + 1}`;
    defs[`n${i}`] = { anyOf: [{ $ref: next }, { $ref: next }] };
  }
  defs[`n${depth}`] = { type: "object", required: ["never"] };
  return { type: "object", $ref: "#/$defs/n0", $defs: defs };
}

// Note ids are JSON numbers, which JavaScript reads as doubles: above 2^53
// an id means the nearest double (9007199254740993 is the last note).
const NOTES = {
  1: "note one",
  2: "note two: the secret plan",
  3: "note three",
  9007199254740992: "the last note: the vault code",
};

async function serve() {
  const { Server } = await import("@modelcontextprotocol/sdk/server/index.js");
  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  const types = await import("@modelcontextprotocol/sdk/types.js");
  const depth = Number(process.env.HOSTILE_DEPTH || 40);
  const server = new Server(
    { name: "resolving-node", version: "0.0.0" },
    { capabilities: { tools: {} } },
  );
  const str = (name) => ({
    type: "object",
    properties: { [name]: { type: "string" } },
    required: [name],
  });
  server.setRequestHandler(types.ListToolsRequestSchema, async () => ({
    tools: [
      { name: "read_file", description: "Read a file.", inputSchema: str("path") },
      { name: "read_uri", description: "Read a file: URI.", inputSchema: str("uri") },
      {
        name: "read_note",
        description: "Read a note by id.",
        inputSchema: {
          type: "object",
          properties: { id: { type: "integer" } },
          required: ["id"],
        },
      },
      { name: "hostile_schema", description: "Validating against me takes forever.", inputSchema: exponentialSchema(depth) },
      { name: "fetch", description: "Fetch a URL.", inputSchema: str("url") },
    ],
  }));
  server.setRequestHandler(types.CallToolRequestSchema, async (request) => {
    const args = request.params.arguments || {};
    let text;
    switch (request.params.name) {
      case "read_file":
        text = read(resolvePath, args.path);
        break;
      case "read_uri":
        text = read(resolveUri, args.uri);
        break;
      case "read_note":
        text = NOTES[args.id] ?? "no such note";
        break;
      case "hostile_schema":
        text = "called";
        break;
      case "fetch":
        try {
          const response = await fetch(String(args.url));
          text = JSON.stringify({ url: response.url, content: await response.text() });
        } catch (e) {
          text = JSON.stringify({ error: String(e && e.cause ? e.cause : e) });
        }
        break;
      default:
        return { content: [{ type: "text", text: "unknown tool" }], isError: true };
    }
    return { content: [{ type: "text", text }] };
  });
  await server.connect(new StdioServerTransport());
}

async function resolveBatch() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const inputs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const out = inputs.map((s) => ({ path: attempt(resolvePath, s), uri: attempt(resolveUri, s) }));
  process.stdout.write(JSON.stringify(out));
}

if (process.argv.includes("--resolve")) {
  await resolveBatch();
} else {
  await serve();
}
