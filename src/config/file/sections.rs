//! The top-level sections besides servers: `permissions`, `policy`,
//! `policy_data` and `audit`.

use super::*;

impl Ctx<'_> {
    pub(super) fn permissions(&self, node: &Node) -> Result<Vec<RuleSource>> {
        let fields = self.object(node, "permissions", "an object with allow/ask/deny lists")?;
        self.check_keys(fields, "permissions", PERMISSION_KEYS)?;
        let mut rules = Vec::new();
        for (name, effect) in [
            ("allow", RuleEffect::Allow),
            ("ask", RuleEffect::Ask),
            ("deny", RuleEffect::Deny),
        ] {
            let Some(m) = get(fields, name) else { continue };
            let key = push_key("permissions", name);
            let items = self.strings(&m.value, &key)?;
            if effect == RuleEffect::Allow && self.scope == Scope::Project && !items.is_empty() {
                return Err(self.boundary(&key, m.value.pos, "add `allow` rules"));
            }
            for (index, (text, k, pos)) in items.into_iter().enumerate() {
                self.no_host_vars(text, &k, pos, "rule")?;
                let text = self.expand(text, &k, pos)?;
                if text.trim().is_empty() {
                    return Err(self.err(ErrorKind::InvalidValue, &k, pos, "empty rule", None));
                }
                let source = RuleSource {
                    effect,
                    text,
                    scope: self.scope,
                    file: self.file.to_path_buf(),
                    index,
                };
                // A rule that does not compile fails the file here, with
                // its key and line, not later when a session builds its
                // pipeline (`mcp list` and `mcp approve` never do).
                if let Err(error) = warden_policy::check_rule(&source) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        format!("invalid rule: {error}"),
                        Some(
                            "a rule is `mcp__SERVER__TOOL` or `mcp__SERVER__TOOL(ARG: GLOB, …)` (README, \"How a call is decided\")"
                                .into(),
                        ),
                    ));
                }
                rules.push(source);
            }
        }
        Ok(rules)
    }

    pub(super) fn policy(&self, node: &Node) -> Result<Vec<PolicySource>> {
        let mut out = Vec::new();
        for (s, k, pos) in self.strings(node, "policy")? {
            self.no_host_vars(s, &k, pos, "policy path")?;
            let raw = self.expand(s, &k, pos)?;
            let path = absolutize(&self.dir, Path::new(&raw));
            if !path.exists() {
                return Err(self.err(
                    ErrorKind::MissingPath,
                    &k,
                    pos,
                    format!("policy {} does not exist", path.display()),
                    Some("policy paths are relative to the file that names them".into()),
                ));
            }
            // A repository's policies live next to its `.mcp.json` (often the
            // repository root, above a workspace subfolder) or in the workspace.
            if self.scope == Scope::Project
                && !self.inside(&path, &self.dir)
                && !self.inside(&path, self.workspace)
            {
                return Err(self.boundary(
                    &k,
                    pos,
                    "load a policy from outside the repository (the project file's folder or the workspace)",
                ));
            }
            out.push(PolicySource {
                path,
                scope: self.scope,
            });
        }
        Ok(out)
    }

    /// `policy_data`: JSON documents loaded as Rego data, relative to this
    /// file (the only way data reaches policies: a JSON file beside a
    /// policy is not loaded). Their top-level keys become `data.KEY`; a key
    /// under `warden` is refused when the policies load.
    pub(super) fn policy_data(&self, node: &Node) -> Result<Vec<DataSource>> {
        let mut out = Vec::new();
        for (s, k, pos) in self.strings(node, "policy_data")? {
            self.no_host_vars(s, &k, pos, "policy data path")?;
            let raw = self.expand(s, &k, pos)?;
            let path = absolutize(&self.dir, Path::new(&raw));
            if !path.is_file() {
                return Err(self.err(
                    ErrorKind::MissingPath,
                    &k,
                    pos,
                    format!("policy data {} is not a file", path.display()),
                    Some("data paths are relative to the file that names them, e.g. \"policy/lists.json\"".into()),
                ));
            }
            if path.extension().is_none_or(|e| e != "json") {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &k,
                    pos,
                    format!("policy data {} is not a `.json` file", path.display()),
                    None,
                ));
            }
            if self.scope == Scope::Project
                && !self.inside(&path, &self.dir)
                && !self.inside(&path, self.workspace)
            {
                return Err(self.boundary(
                    &k,
                    pos,
                    "load policy data from outside the repository (the project file's folder or the workspace)",
                ));
            }
            out.push(DataSource {
                path,
                scope: self.scope,
            });
        }
        Ok(out)
    }

    pub(super) fn audit(&self, node: &Node) -> Result<AuditConfig> {
        let fields = self.object(node, "audit", "an object")?;
        self.check_keys(fields, "audit", AUDIT_KEYS)?;
        let mut audit = AuditConfig::default();
        if let Some(m) = get(fields, "path") {
            let raw = self.expand(
                self.string(&m.value, "audit.path")?,
                "audit.path",
                m.value.pos,
            )?;
            audit.path = Some(absolutize(self.workspace, Path::new(&raw)));
        }
        if let Some(m) = get(fields, "redact") {
            for (s, k, pos) in self.strings(&m.value, "audit.redact")? {
                if !(s.is_empty() || s.starts_with('/')) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        format!("`{}` is not a JSON pointer", short(s)),
                        Some(
                            "JSON pointers start with `/`, e.g. \"/password\" or \"/auth/token\""
                                .into(),
                        ),
                    ));
                }
                audit.redact.push(s.to_string());
            }
        }
        if let Some(m) = get(fields, "fsync") {
            audit.fsync_explicit = true;
            audit.fsync = match self.string(&m.value, "audit.fsync")? {
                "every_record" => FsyncMode::EveryRecord,
                "batch" => FsyncMode::Batch,
                "never" => FsyncMode::Never,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        "audit.fsync",
                        m.value.pos,
                        format!("unknown fsync mode `{}`", short(other)),
                        Some("use \"every_record\" (default), \"batch\" or \"never\"".into()),
                    ));
                }
            };
        }
        if let Some(m) = get(fields, "on_failure") {
            audit.on_failure = match self.string(&m.value, "audit.on_failure")? {
                "fail_closed" => OnFailure::FailClosed,
                "continue" => OnFailure::Continue,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        "audit.on_failure",
                        m.value.pos,
                        format!("unknown on_failure mode `{}`", short(other)),
                        Some(
                            "use \"fail_closed\" (default: a call that cannot be recorded is not \
                             sent) or \"continue\" (run unaudited when the log fails)"
                                .into(),
                        ),
                    ));
                }
            };
        }
        if let Some(m) = get(fields, "max_value_bytes") {
            let value = match &m.value.kind {
                Kind::Number(n) => n.as_u64(),
                _ => {
                    return Err(self.wrong_type(
                        &m.value,
                        "audit.max_value_bytes",
                        "a whole number",
                    ));
                }
            };
            audit.max_value_bytes = value
                .filter(|v| (16..=MAX_VALUE_BYTES).contains(v))
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| {
                    self.err(
                        ErrorKind::InvalidValue,
                        "audit.max_value_bytes",
                        m.value.pos,
                        format!("must be a whole number from 16 to {MAX_VALUE_BYTES}"),
                        Some("remove the key to get the default (4096)".into()),
                    )
                })?;
        }
        Ok(audit)
    }
}
