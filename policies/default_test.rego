# Tests of default.rego: `warden policy test policies/`.
package warden_test

import rego.v1

import data.warden

# `input.strings` / `input.raw_strings` as warden builds them: every string
# of the arguments by JSON pointer (no key here needs `~0`/`~1`).
strings_of(args) := {pointer: value |
	walk(args, [path, value])
	is_string(value)
	pointer := concat("", [sprintf("/%v", [p]) | some p in path])
}

indexed(doc) := object.union(doc, {
	"strings": strings_of(object.get(doc, "arguments", {})),
	"raw_strings": strings_of(object.get(doc, "raw_arguments", {})),
})

plain := {
	"server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "user"},
	"tool": {"name": "read_text_file", "qualified": "mcp__fs__read_text_file", "annotations": {"readOnlyHint": true}, "pinned": true},
	"arguments": {"path": "/srv/repo/README.md"},
	"context": {"mode": "interactive", "session": "s", "workspace": "/srv/repo", "call_index": 1},
	"stages": {"trust": null, "schema": null, "pinning": null, "annotations": null, "rules": null},
}

base := indexed(plain)

with_args(args) := indexed(object.union(plain, {"arguments": args}))

# The document warden builds for `raw` arguments: `canonical` is what
# `input.arguments` holds, `readings`/`uncertain` as warden computes them.
sent(raw, canonical, readings, uncertain) := indexed(object.union(plain, {
	"arguments": canonical,
	"raw_arguments": raw,
	"readings": readings,
	"uncertain": uncertain,
}))

test_plain_read_has_no_opinion if {
	count(warden.deny) == 0 with input as base
	count(warden.ask) == 0 with input as base
	not warden.allow with input as base
}

test_ssh_key_denied if {
	some msg in warden.deny with input as with_args({"path": "/home/u/.ssh/id_ed25519"})
	contains(msg, "/path")
}

test_traversal_to_ssh_denied if {
	count(warden.deny) > 0 with input as with_args({"path": "/srv/repo/../../home/u/.ssh/config"})
}

test_aws_dir_denied if {
	count(warden.deny) > 0 with input as with_args({"path": "~/.aws/credentials"})
}

test_env_file_denied if {
	count(warden.deny) > 0 with input as with_args({"path": "/srv/repo/.env"})
	count(warden.deny) > 0 with input as with_args({"path": ".env.local"})
	count(warden.deny) > 0 with input as with_args({"path": "/srv/repo/config/.env"})
}

test_env_example_allowed if {
	count(warden.deny) == 0 with input as with_args({"path": "/srv/repo/.env.example"})
}

test_environment_dir_not_secret if {
	count(warden.deny) == 0 with input as with_args({"path": "/srv/repo/.envrc.d/readme"})
}

test_shadow_denied if {
	count(warden.deny) > 0 with input as with_args({"path": "/etc/shadow"})
}

test_nested_array_secret_denied if {
	count(warden.deny) > 0 with input as with_args({"paths": ["/srv/repo/a", "/root/.gnupg/secring.gpg"]})
}

test_private_key_value_denied if {
	some msg in warden.deny with input as with_args({"content": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"})
	contains(msg, "private key")
	not contains(msg, "abc")
}

test_aws_key_value_denied if {
	count(warden.deny) > 0 with input as with_args({"body": {"note": "key AKIAABCDEFGHIJKLMNOP here"}})
}

test_github_token_denied if {
	count(warden.deny) > 0 with input as with_args({"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"})
}

test_ordinary_text_not_credential if {
	count(warden.deny) == 0 with input as with_args({"content": "ask a skeptic: sk-8 is not a key"})
}

test_untrusted_writer_asks if {
	inp := object.union(base, {"tool": {"name": "write_file", "qualified": "mcp__fs__write_file", "annotations": {"readOnlyHint": false}}})
	count(warden.ask) == 1 with input as inp
}

test_untrusted_tool_without_hints_asks if {
	tool := {"name": "write_file", "qualified": "mcp__fs__write_file", "annotations": {}, "pinned": true}
	inp := object.union(object.remove(base, ["tool"]), {"tool": tool})
	count(warden.ask) == 1 with input as inp
}

test_untrusted_writer_allowed_by_rule_does_not_ask if {
	inp := object.union(base, {
		"tool": {"name": "write_file", "qualified": "mcp__fs__write_file", "annotations": {"readOnlyHint": false}},
		"stages": {"rules": "allow"},
	})
	count(warden.ask) == 0 with input as inp
}

test_untrusted_read_only_claim_not_allowed if {
	not warden.allow with input as base
}

test_trusted_read_only_allowed if {
	warden.allow with input as object.union(base, {"server": {"trust": "trusted"}})
}

test_trusted_writer_not_allowed if {
	inp := object.union(base, {
		"server": {"trust": "trusted"},
		"tool": {"annotations": {"readOnlyHint": false}},
	})
	not warden.allow with input as inp
}

test_credential_patterns_in_sync if {
	every re in warden.credential_res {
		contains(warden.credential_any_re, re)
	}
}

# ---- issue 11: arguments decided on their canonical form

test_double_slash_shadow_denied if {
	# `//etc/shadow` is `/etc/shadow` as a path and `/shadow` on host `etc`
	# to a URL parser: warden hands both readings over, unsure which.
	inp := sent(
		{"path": "//etc/shadow"},
		{"path": "//etc/shadow"},
		{"/path": ["/etc/shadow", "/shadow"]},
		{"/path": "it starts with `//`, which URL parsers read as a host"},
	)
	count(warden.deny) > 0 with input as inp
	count(warden.ask) > 0 with input as inp
}

test_dot_segment_shadow_denied if {
	inp := sent({"path": "/etc/./shadow"}, {"path": "/etc/shadow"}, {}, {})
	count(warden.deny) > 0 with input as inp
}

test_proc_environ_double_slash_denied if {
	inp := sent({"path": "/proc/self//environ"}, {"path": "/proc/self/environ"}, {}, {})
	count(warden.deny) > 0 with input as inp
}

test_relative_climb_to_shadow_denied if {
	inp := sent({"path": "../../etc/shadow"}, {"path": "/etc/shadow"}, {}, {})
	count(warden.deny) > 0 with input as inp
}

test_tilde_climb_denied_and_asked if {
	inp := sent(
		{"path": "~/../../etc/shadow"},
		{"path": "~/../../etc/shadow"},
		{"/path": ["~/etc/shadow", "/etc/shadow", "/home/u/../../etc/shadow", "/srv/repo/~/../../etc/shadow"]},
		{"/path": "it starts with `~`: warden does not expand `~`"},
	)
	some msg in warden.deny with input as inp
	contains(msg, "/etc/shadow")
	count(warden.ask) > 0 with input as inp
}

test_tilde_ssh_denied if {
	inp := sent(
		{"path": "~/.ssh/id_ed25519"},
		{"path": "~/.ssh/id_ed25519"},
		{"/path": ["~/.ssh/id_ed25519", "/.ssh/id_ed25519"]},
		{"/path": "it starts with `~`"},
	)
	count(warden.deny) > 0 with input as inp
}

test_file_uri_fragment_checked_on_every_reading if {
	uri := "file:///srv/repo/.ssh/key#/../../public/x"
	inp := sent(
		{"uri": uri},
		{"uri": uri},
		{"/uri": ["/srv/repo/.ssh/key", "/srv/repo/public/x"]},
		{"/uri": "a `file:` URI with a fragment"},
	)
	count(warden.deny) > 0 with input as inp
	some msg in warden.ask with input as inp
	contains(msg, "fragment")
}

test_file_uri_query_asks if {
	uri := "file:///srv/repo/a?x=/../../etc/passwd"
	inp := sent({"uri": uri}, {"uri": uri}, {"/uri": ["/srv/repo/a", "/etc/passwd"]}, {"/uri": "a `file:` URI with a query"})
	count(warden.ask) > 0 with input as inp
}

test_file_uri_backslash_shadow_denied if {
	uri := "file:///srv/repo/a\\..\\..\\..\\etc\\shadow"
	inp := sent(
		{"uri": uri},
		{"uri": uri},
		{"/uri": ["/srv/repo/a\\..\\..\\..\\etc\\shadow", "/etc/shadow"]},
		{"/uri": "a `file:` URI with a backslash"},
	)
	count(warden.deny) > 0 with input as inp
}

test_certain_file_uri_to_secret_denied if {
	inp := sent(
		{"uri": "file:///etc/shadow"},
		{"uri": "/etc/shadow"},
		{"/uri": ["/etc/shadow", "/srv/repo/file:/etc/shadow"]},
		{},
	)
	count(warden.deny) > 0 with input as inp
}

test_credential_checked_as_sent if {
	# A credential hidden in a path-shaped value the canonical form drops.
	inp := sent(
		{"path": "/tmp/AKIAABCDEFGHIJKLMNOP/../x"},
		{"path": "/tmp/x"},
		{},
		{},
	)
	count(warden.deny) > 0 with input as inp
}

test_numbers_compare_by_value if {
	# warden hands the canonical number (2.0 and 2e0 are 2) to policies.
	inp := sent({"id": 2.0}, {"id": 2}, {}, {})
	input.arguments.id == 2 with input as inp
}

test_certain_paths_do_not_ask if {
	inp := sent({"path": "/srv/repo/./README.md"}, {"path": "/srv/repo/README.md"}, {}, {})
	count(warden.ask) == 0 with input as inp
	count(warden.deny) == 0 with input as inp
}

# A URI of another scheme also names the files a server may open for it
# (Python servers open `url2pathname(urlparse(uri).path)` whatever the
# scheme): those readings are checked too.
test_other_scheme_proc_environ_denied if {
	uri := "x:///proc/self/environ"
	inp := sent(
		{"uri": uri},
		{"uri": uri},
		{"/uri": [uri, "/proc/self/environ", "/srv/repo/x:/proc/self/environ"]},
		{},
	)
	some msg in warden.deny with input as inp
	contains(msg, "/proc/self/environ")
}

test_http_localhost_shadow_denied if {
	uri := "http://localhost/etc/shadow"
	inp := sent(
		{"uri": uri},
		{"uri": uri},
		{"/uri": [uri, "/etc/shadow", "/localhost/etc/shadow", "/srv/repo/http:/localhost/etc/shadow"]},
		{},
	)
	some msg in warden.deny with input as inp
	contains(msg, "/etc/shadow")
}

# JSON text: the strings inside are readings of the value.
test_json_text_secret_denied_and_asked if {
	text := "[\"/proc/self/environ\"]"
	inp := sent(
		{"paths": text},
		{"paths": text},
		{"/paths": ["/srv/repo/[\"/proc/self/environ\"]", "/srv/repo", "/proc/self/environ"]},
		{"/paths": "it is JSON text, which some servers parse into a value"},
	)
	count(warden.deny) > 0 with input as inp
	count(warden.ask) > 0 with input as inp
}

# `$HOME` climbs from every HOME the server may have, and from `/`.
test_home_variable_climb_denied if {
	inp := sent(
		{"path": "${HOME}/../../proc/self/environ"},
		{"path": "${HOME}/../../proc/self/environ"},
		{"/path": ["/srv/repo/${HOME}/../../proc/self/environ", "/proc/self/environ"]},
		{"/path": "it contains `$NAME` or `${…}`"},
	)
	count(warden.deny) > 0 with input as inp
}

# A relative path is the file it names in `input.arguments`/`input.strings`.
test_relative_path_checked_as_the_file_it_names if {
	inp := sent({"path": ".aws/credentials"}, {"path": "/srv/repo/.aws/credentials"}, {}, {})
	some msg in warden.deny with input as inp
	contains(msg, "/srv/repo/.aws/credentials")
}

# Resources and prompts (CONTRACT §8).
resource_read(trust, uri, canonical) := indexed({
	"kind": "resource",
	"server": {"name": "fs", "trust": trust, "transport": "stdio", "scope": "user"},
	"resource": {"uri": uri, "server": "fs"},
	"arguments": {"uri": canonical},
	"raw_arguments": {"uri": uri},
	"readings": {},
	"uncertain": {},
	"context": base.context,
	"stages": {"trust": null, "rules": null},
})

test_resource_under_secret_path_denied if {
	some msg in warden.deny with input as resource_read("trusted", "file:///home/u/.ssh/id_rsa", "/home/u/.ssh/id_rsa")
	contains(msg, "/uri")
}

test_resource_of_untrusted_server_asks if {
	inp := resource_read("untrusted", "test://notes/1", "test://notes/1")
	count(warden.ask) > 0 with input as inp
	count(warden.deny) == 0 with input as inp
}

test_resource_allowed_by_rule_does_not_ask if {
	inp := object.union(resource_read("untrusted", "test://notes/1", "test://notes/1"), {"stages": {"rules": "allow"}})
	count(warden.ask) == 0 with input as inp
}

test_resource_of_trusted_server_allowed if {
	warden.allow with input as resource_read("trusted", "test://notes/1", "test://notes/1")
}

test_prompt_of_untrusted_server_asks if {
	inp := {
		"kind": "prompt",
		"server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "user"},
		"prompt": {"name": "review", "qualified": "prompt__fs__review"},
		"arguments": {"file": "/srv/repo/README.md"},
		"raw_arguments": {"file": "/srv/repo/README.md"},
		"readings": {},
		"uncertain": {},
		"context": base.context,
		"stages": {"trust": null, "rules": null},
	}
	count(warden.ask) > 0 with input as inp
}

test_prompt_argument_secret_denied if {
	inp := indexed({
		"kind": "prompt",
		"server": {"name": "fs", "trust": "trusted", "transport": "stdio", "scope": "user"},
		"prompt": {"name": "review", "qualified": "prompt__fs__review"},
		"arguments": {"file": "/home/u/.aws/credentials"},
		"raw_arguments": {"file": "/home/u/.aws/credentials"},
		"readings": {},
		"uncertain": {},
		"context": base.context,
		"stages": {"trust": null, "rules": null},
	})
	count(warden.deny) > 0 with input as inp
}
