# Tests of ci.rego: `warden policy test policies/`.
package warden_ci_test

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
	"server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "explicit"},
	"tool": {"name": "read_text_file", "qualified": "mcp__fs__read_text_file", "annotations": {}, "pinned": true},
	"arguments": {"path": "/ci/build/README.md"},
	"context": {"mode": "ci", "session": "s", "workspace": "/ci/build", "call_index": 1},
	"stages": {"trust": null, "schema": null, "pinning": null, "annotations": null, "rules": "allow"},
}

allowed := indexed(plain)

test_rule_allowed_call_passes if {
	count(warden.deny) == 0 with input as allowed
}

test_not_allowed_by_rule_denied if {
	count(warden.deny) == 1 with input as object.union(allowed, {"stages": {"rules": null}})
}

test_trusted_read_only_passes if {
	inp := object.union(allowed, {"stages": {"rules": null, "annotations": "allow"}})
	count(warden.deny) == 0 with input as inp
}

test_secret_path_denied_even_when_allowed if {
	count(warden.deny) > 0 with input as indexed(object.union(plain, {"arguments": {"path": "/root/.ssh/id_rsa"}}))
}

test_credential_denied if {
	inp := indexed(object.union(plain, {"arguments": {"text": "AKIAABCDEFGHIJKLMNOP"}}))
	count(warden.deny) > 0 with input as inp
}

test_unpinned_denied if {
	count(warden.deny) > 0 with input as object.union(allowed, {"tool": {"pinned": false}})
}

test_project_server_denied if {
	count(warden.deny) > 0 with input as object.union(allowed, {"server": {"scope": "project"}})
}

test_never_allows if {
	not warden.allow with input as allowed
}

# ---- issue 11: arguments decided on their canonical form

sent(raw, canonical, readings, uncertain) := indexed(object.union(plain, {
	"arguments": canonical,
	"raw_arguments": raw,
	"readings": readings,
	"uncertain": uncertain,
}))

test_double_slash_shadow_denied if {
	inp := sent({"path": "//etc/shadow"}, {"path": "//etc/shadow"}, {"/path": ["/etc/shadow", "/shadow"]}, {"/path": "it starts with `//`"})
	count(warden.deny) > 0 with input as inp
}

test_dot_segment_shadow_denied if {
	count(warden.deny) > 0 with input as sent({"path": "/etc/./shadow"}, {"path": "/etc/shadow"}, {}, {})
}

test_proc_environ_denied if {
	inp := sent({"path": "/proc/self//environ"}, {"path": "/proc/self/environ"}, {}, {})
	count(warden.deny) > 0 with input as inp
}

test_tilde_climb_denied if {
	inp := sent(
		{"path": "~/../../etc/shadow"},
		{"path": "~/../../etc/shadow"},
		{"/path": ["~/etc/shadow", "/etc/shadow"]},
		{"/path": "it starts with `~`"},
	)
	some msg in warden.deny with input as inp
	contains(msg, "certainty")
}

test_file_uri_fragment_denied if {
	uri := "file:///ci/build/secrets/key#/../../public/x"
	inp := sent({"uri": uri}, {"uri": uri}, {"/uri": ["/ci/build/secrets/key", "/ci/build/public/x"]}, {"/uri": "a `file:` URI with a fragment"})
	count(warden.deny) > 0 with input as inp
}

test_credential_checked_as_sent if {
	inp := sent({"path": "/tmp/ghp_abcdefghijklmnopqrstuvwxyz0123456789/../x"}, {"path": "/tmp/x"}, {}, {})
	count(warden.deny) > 0 with input as inp
}

test_certain_rule_allowed_path_passes if {
	inp := sent({"path": "/ci/build/./README.md"}, {"path": "/ci/build/README.md"}, {}, {})
	count(warden.deny) == 0 with input as inp
}

test_other_scheme_proc_environ_denied if {
	uri := "x:///proc/self/environ"
	inp := sent({"uri": uri}, {"uri": uri}, {"/uri": [uri, "/proc/self/environ", "/ci/build/x:/proc/self/environ"]}, {})
	some msg in warden.deny with input as inp
	contains(msg, "secret file")
}

test_json_text_denied if {
	text := "[\"a/b\"]"
	inp := sent({"paths": text}, {"paths": text}, {"/paths": ["/ci/build/a/b"]}, {"/paths": "it is JSON text"})
	some msg in warden.deny with input as inp
	contains(msg, "certainty")
}
