# A strict policy for CI jobs: nothing runs unless the job's own config
# allowed it. Use it alone (`"policy": ["policies/ci.rego"]`, or
# `"policy": []` plus `--policy policies/ci.rego`) together with `--ci`.
#
#   - secret paths and credential-looking values are denied (as in
#     default.rego: paths in canonical form and every plausible reading,
#     credentials as sent);
#   - an argument warden cannot read with certainty is denied;
#   - a call is denied unless a permission rule allowed it, or a trusted
#     server marked the tool read-only;
#   - a tool whose definition is not pinned (or changed) is denied;
#   - project-scope servers (shipped by the repository under test) are
#     denied outright.
package warden

import rego.v1

ci_secret_path_re := concat("|", [
	`(^|/)\.(ssh|aws|gnupg|gpg|azure|kube|docker)(/|$)`,
	`(^|/)\.config/(gcloud|gh)(/|$)`,
	`(^|/)\.env(\.[a-z]+)?$`,
	`(^|/)id_(rsa|dsa|ecdsa|ed25519)(\.pub)?$`,
	`(^|/)\.(netrc|git-credentials|pgpass|npmrc|pypirc)$`,
	`^/etc/(shadow|gshadow|sudoers)`,
	`^/proc/`,
])

ci_credential_re := concat("|", [
	`-----BEGIN ([A-Z]+ )?PRIVATE KEY-----`,
	`\b(AKIA|ASIA)[0-9A-Z]{16}\b`,
	`\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})\b`,
	`\bsk-(ant-|proj-)?[A-Za-z0-9_-]{20,}`,
	`\bxox[abprs]-[A-Za-z0-9-]{10,}`,
	`\bAIza[0-9A-Za-z_-]{35}\b`,
])

# Every string argument: `input.strings` (as warden reads it) and
# `input.raw_strings` (as sent), by JSON pointer.
ci_paths contains value if {
	some value in input.strings
}

ci_paths contains value if {
	some readings in input.readings
	some value in readings
}

ci_texts contains value if {
	some value in input.raw_strings
}

ci_texts contains value if {
	some value in input.strings
}

deny contains "CI: an argument points at a secret file" if {
	some value in ci_paths
	regex.match(ci_secret_path_re, lower(value))
}

deny contains "CI: an argument looks like a credential" if {
	some value in ci_texts
	regex.match(ci_credential_re, value)
}

deny contains msg if {
	some pointer, why in input.uncertain
	msg := sprintf("CI: argument %v cannot be read with certainty: %v", [pointer, why])
}

ci_explicitly_allowed if input.stages.rules == "allow"

ci_explicitly_allowed if input.stages.annotations == "allow"

deny contains msg if {
	not ci_explicitly_allowed
	msg := sprintf("CI: %q is not allowed by a permission rule", [input.tool.qualified])
}

deny contains msg if {
	not input.tool.pinned
	msg := sprintf("CI: the definition of %q is not the pinned one", [input.tool.qualified])
}

deny contains msg if {
	input.server.scope == "project"
	msg := sprintf("CI: server %q comes from the repository's .mcp.json", [input.server.name])
}
