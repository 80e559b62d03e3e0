# Tests of ci.rego: `warden policy test policies/`.
package warden_ci_test

import rego.v1

import data.warden

allowed := {
	"server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "explicit"},
	"tool": {"name": "read_text_file", "qualified": "mcp__fs__read_text_file", "annotations": {}, "pinned": true},
	"arguments": {"path": "/ci/build/README.md"},
	"context": {"mode": "ci", "session": "s", "workspace": "/ci/build", "call_index": 1},
	"stages": {"trust": null, "schema": null, "pinning": null, "annotations": null, "rules": "allow"},
}

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
	count(warden.deny) > 0 with input as object.union(allowed, {"arguments": {"path": "/root/.ssh/id_rsa"}})
}

test_credential_denied if {
	inp := object.union(allowed, {"arguments": {"text": "AKIAABCDEFGHIJKLMNOP"}})
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
