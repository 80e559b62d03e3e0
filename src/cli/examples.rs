//! The "Examples:" block at the end of every command's `--help` (clap
//! `after_help`). A unit test checks every visible command has one.

pub const WARDEN: &str = "Examples:
  warden demo                                   # the offline end-to-end demo
  warden doctor                                 # is everything in place?
  warden --config warden.json mcp status        # connect and show every server
  warden import claude --write                  # adopt Claude Code's servers";

pub const DEMO: &str = "Examples:
  warden demo
  warden demo --json | jq .ok";

pub const CALL: &str = "Examples:
  warden call notes read_note --args '{\"id\": 2}'
  warden --ci --json call fs write_file --args @args.json   # ask → deny; exit 3
  warden --config warden.json call time get_current_time
  warden call fx ask_user --answers answers.json            # the server's questions answered from a file";

pub const RUN: &str = "Examples:
  warden run --model anthropic:claude-sonnet-4-5 --task 'Summarise the open issues'
  warden --ci --json run --model scripted:turns.json --task t --fail-on-deny";

pub const REPL: &str = "Examples:
  warden repl --model openai:gpt-4.1
  warden --workspace ~/src/app repl --model anthropic:claude-sonnet-4-5
  warden repl --answers answers.json                      # servers' questions answered from a file";

pub const MCP: &str = "Examples:
  warden mcp list
  warden mcp status --json
  warden mcp approve github";

pub const MCP_LIST: &str = "Examples:
  warden mcp list
  warden --config warden.json mcp list --json";

pub const MCP_STATUS: &str = "Examples:
  warden mcp status
  warden --config warden.json mcp status --json | jq '.servers[].state'";

pub const MCP_APPROVE: &str = "Examples:
  warden mcp approve github          # shows the configuration, then asks
  warden mcp approve github --yes    # scripts";

pub const MCP_REVOKE: &str = "Examples:
  warden mcp revoke github";

pub const MCP_LOGIN: &str = "Examples:
  warden mcp login linear                     # prints the URL to open
  BROWSER=firefox warden mcp login linear     # and opens it";

pub const MCP_LOGOUT: &str = "Examples:
  warden mcp logout linear";

pub const PIN: &str = "Examples:
  warden pin list
  warden pin reset github";

pub const PIN_LIST: &str = "Examples:
  warden pin list
  warden --lock warden.lock pin list --json";

pub const PIN_RESET: &str = "Examples:
  warden pin reset github     # forget one server's pins
  warden pin reset            # forget every pin";

pub const SANDBOX: &str = "Examples:
  warden sandbox check
  warden sandbox exec -- ls /";

pub const SANDBOX_CHECK: &str = "Examples:
  warden sandbox check
  warden sandbox check --server fs --json";

pub const SANDBOX_EXEC: &str = "Examples:
  warden sandbox exec -- cat /etc/hostname
  warden sandbox exec --profile profile.json -- python3 server.py";

pub const POLICY: &str = "Examples:
  warden policy check
  warden policy eval --input call.json
  warden policy test policies/";

pub const POLICY_CHECK: &str = "Examples:
  warden policy check
  warden --policy my.rego policy check --json

Says which Rego engine decides: regorus's bytecode VM for the shipped
policies, its interpreter for any other (README, \"Rego engine\").
WARDEN_REGO_ENGINE=interpreter keeps every policy on the interpreter.";

pub const POLICY_EVAL: &str = "Examples:
  warden policy eval --input call.json
  warden --policy policies/ci.rego policy eval --input call.json --json";

pub const POLICY_TEST: &str = "Examples:
  warden policy test
  warden policy test policies/ tests/policy/";

pub const AUDIT: &str = "Examples:
  warden audit verify .warden/audit.jsonl
  warden audit show .warden/audit.jsonl --effect deny";

pub const AUDIT_VERIFY: &str = "Examples:
  warden audit verify .warden/audit.jsonl
  warden audit verify audit.jsonl --head 41:9f2c…   # a head kept elsewhere
  warden audit verify old.jsonl --accept-head       # a log from before head files";

pub const AUDIT_HEAD: &str = "Examples:
  warden audit head .warden/audit.jsonl > head.txt";

pub const AUDIT_SHOW: &str = "Examples:
  warden audit show .warden/audit.jsonl
  warden audit show audit.jsonl --tool 'mcp__fs__*' --effect deny --json";

pub const GATEWAY: &str = "Examples:
  claude mcp add warden -- warden --config ~/warden.json gateway --stdio --ask-client
  warden --config warden.json gateway --listen 127.0.0.1:0
  warden gateway --listen 127.0.0.1:8800 --token-file ~/.config/warden/gateway.token";

pub const IMPORT: &str = "Examples:
  warden import claude                          # ~/.claude.json + ~/.claude/settings.json
  warden import claude .mcp.json .claude/settings.json --json
  warden import codex --write                   # ~/.codex/config.toml → user config
  warden import cursor ~/.cursor/mcp.json --write --force";

pub const COMPLETIONS: &str = "Examples:
  warden completions bash > ~/.local/share/bash-completion/completions/warden
  warden completions zsh > ~/.zfunc/_warden       # with fpath+=(~/.zfunc)
  warden completions fish > ~/.config/fish/completions/warden.fish";

pub const DOCTOR: &str = "Examples:
  warden doctor
  warden doctor --connect            # also start each server and list its tools
  warden --config warden.json doctor --json";
