# warden's shipped policy: what a user gets without writing Rego.
#
# Input and outputs: CONTRACT §5. `deny` and `ask` are sets of reasons,
# `allow` a boolean. The earlier stages' verdicts are in `input.stages`.
#
# Paths are decided on their canonical form: `input.arguments` holds every
# argument as warden reads it (`//etc/./shadow` is `/etc/shadow`, a `file:`
# URI is the path it names, `../x` and `src/a.rs` are resolved against the
# workspace), and `input.strings` each string among them by JSON pointer;
# `input.readings` every plausible meaning of a value that has several
# (`~/…`, `$HOME/…`, a `file:` URI with a fragment, the path of an
# `x:///…` or `http://localhost/…` URI, the strings inside JSON text, a
# relative path from the server's `cwd`…), each checked; `input.uncertain`
# says which values warden cannot read with certainty, and why. Text such
# as credentials is checked as sent (`input.raw_strings`) too.
#
# Sensible for a world of untrusted servers:
#   - deny arguments that point at well-known secret files (SSH, cloud and
#     GPG keys, .env files, /etc/shadow, …), whatever the server;
#   - deny arguments that carry credential-looking values (private keys,
#     cloud and forge tokens): they must never leave through a tool;
#   - ask when an argument cannot be read with certainty (the question
#     says why), so a person sees what the server may make of it;
#   - ask before a tool of a server that is not trusted runs, unless it
#     claims to be read-only or the user's own rules allowed the call;
#     a read-only claim of such a server is not believed either: it only
#     means this policy has no opinion, and the default (ask, or deny in
#     CI) applies;
#   - allow read-only tools of trusted servers.
#
# The other kinds of request (CONTRACT §8, `input.kind`): a resource read
# or subscription is decided on its `uri` (`input.arguments.uri`, a `file:`
# URI as the path it names), so a resource under a secret path is denied
# like a tool argument; a prompt on its arguments. Resources and prompts
# of a server that is not trusted are asked about unless the user's rules
# allowed them; those of a trusted server are allowed (reading is what
# they are for).
package warden

import rego.v1

# Secret paths, matched against every string argument (lower-cased):
# ~/.ssh, ~/.aws, ~/.gnupg, ~/.gpg, ~/.azure, ~/.kube, ~/.config/gcloud,
# ~/.config/gh, .env files (.env, .env.local, .env.production, …), SSH
# private and public key files, .netrc, .git-credentials, .pgpass, .npmrc,
# .pypirc, ~/.docker/config.json, /etc/shadow, /etc/gshadow, /etc/sudoers,
# /proc/*/environ. One literal pattern: one match per string.
secret_path_re := `(^|/)\.(ssh|aws|gnupg|gpg|azure|kube)(/|$)|(^|/)\.config/(gcloud|gh)(/|$)|(^|/)\.env(\.(local|prod|production|dev|development|staging|test))?$|(^|/)id_(rsa|dsa|ecdsa|ed25519)(\.pub)?$|(^|/)\.(netrc|git-credentials|pgpass|npmrc|pypirc)$|(^|/)\.docker/config\.json$|^/etc/(shadow|gshadow|sudoers)|^/proc/[^/]+/environ$`

# Credential-looking values (never echoed in reasons).
credential_res := {
	"a private key": `-----BEGIN ([A-Z]+ )?PRIVATE KEY-----`,
	"an AWS access key id": `\b(AKIA|ASIA)[0-9A-Z]{16}\b`,
	"a GitHub token": `\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})\b`,
	"an API secret key": `\bsk-(ant-|proj-)?[A-Za-z0-9_-]{20,}`,
	"a Slack token": `\bxox[abprs]-[A-Za-z0-9-]{10,}`,
	"a Google API key": `\bAIza[0-9A-Za-z_-]{35}\b`,
}

# All of the above in one pattern (checked first; the per-kind patterns
# only name a hit). Keep in sync with `credential_res` (a test checks).
credential_any_re := `-----BEGIN ([A-Z]+ )?PRIVATE KEY-----|\b(AKIA|ASIA)[0-9A-Z]{16}\b|\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})\b|\bsk-(ant-|proj-)?[A-Za-z0-9_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAIza[0-9A-Za-z_-]{35}\b`

# Every string argument is in `input.strings` by JSON pointer as warden
# reads it, and in `input.raw_strings` as sent (so no rule walks the
# arguments itself). A reason names the argument by its pointer.
deny contains msg if {
	some pointer, value in input.strings
	regex.match(secret_path_re, lower(value))
	msg := sprintf("argument %v points at a secret file (%v)", [arg_name(pointer), value])
}

# Every plausible reading of a value with several, by JSON pointer.
deny contains msg if {
	some pointer, readings in input.readings
	some value in readings
	regex.match(secret_path_re, lower(value))
	msg := sprintf("argument %v points at a secret file (%v)", [pointer, value])
}

# Credentials are checked in every string as read, and as sent where that
# differs (a long text is scanned once).
deny contains msg if {
	some strings in [input.strings, sent_only]
	some pointer, value in strings
	regex.match(credential_any_re, value)
	some what, re in credential_res
	regex.match(re, value)
	msg := sprintf("argument %v looks like %v; credentials are never sent to tools", [arg_name(pointer), what])
}

sent_only := {pointer: value |
	some pointer, value in input.raw_strings
	object.get(input.strings, pointer, null) != value
}

ask contains msg if {
	some pointer, why in input.uncertain
	msg := sprintf("argument %v cannot be read with certainty: %v", [pointer, why])
}

read_only_claimed if input.tool.annotations.readOnlyHint == true

is_tool if input.kind == "tool"

is_tool if not input.kind

ask contains msg if {
	is_tool
	input.server.trust != "trusted"
	not read_only_claimed
	input.stages.rules != "allow"
	msg := sprintf("server %q is not trusted and tool %q may change things", [input.server.name, input.tool.name])
}

allow if {
	is_tool
	input.server.trust == "trusted"
	read_only_claimed
}

ask contains msg if {
	input.kind == "resource"
	input.server.trust != "trusted"
	input.stages.rules != "allow"
	msg := sprintf("server %q is not trusted and its resource %q would reach the model", [input.server.name, input.resource.uri])
}

ask contains msg if {
	input.kind == "prompt"
	input.server.trust != "trusted"
	input.stages.rules != "allow"
	msg := sprintf("server %q is not trusted and its prompt %q would reach the model", [input.server.name, input.prompt.name])
}

allow if {
	input.kind in {"resource", "prompt"}
	input.server.trust == "trusted"
}

arg_name(pointer) := pointer if pointer != ""

arg_name(pointer) := "(arguments)" if pointer == ""
