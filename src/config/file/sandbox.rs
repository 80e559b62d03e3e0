//! `mcpServers.NAME.sandbox`: grants, network and limits, with what a
//! project file or an untrusted server may not widen.

use super::*;

impl Ctx<'_> {
    pub(super) fn sandbox(&self, key: &str, node: &Node, trust: Trust) -> Result<SandboxSpec> {
        let sub = |k: &str| push_key(key, k);
        let fields = match &node.kind {
            Kind::Bool(true) => return Ok(SandboxSpec::default()),
            Kind::Bool(false) => {
                if self.scope == Scope::Project {
                    return Err(self.boundary(key, node.pos, "turn the sandbox off"));
                }
                if trust != Trust::Trusted {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        key,
                        node.pos,
                        "only a `trusted` server may run without a sandbox",
                        Some("add \"trust\": \"trusted\" if this server may do anything your user can, or remove \"sandbox\": false".into()),
                    ));
                }
                return Ok(SandboxSpec {
                    enabled: false,
                    ..SandboxSpec::default()
                });
            }
            Kind::Object(m) => m,
            _ => return Err(self.wrong_type(node, key, "false or an object")),
        };
        self.check_keys(fields, key, SANDBOX_KEYS)?;
        let mut spec = SandboxSpec::default();
        for (which, out) in [("read", &mut spec.read), ("write", &mut spec.write)] {
            let Some(m) = get(fields, which) else {
                continue;
            };
            for (s, k, pos) in self.strings(&m.value, &sub(which))? {
                let raw = self.expand(s, &k, pos)?;
                if raw.starts_with('~') {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        "`~` is not expanded",
                        Some("write `${HOME}/…` instead".into()),
                    ));
                }
                let path = absolutize(self.workspace, Path::new(&raw));
                if self.scope == Scope::Project && !self.inside_workspace(&path) {
                    return Err(self.boundary(
                        &k,
                        pos,
                        &format!(
                            "grant `{which}` access outside the workspace ({} resolves outside {})",
                            path.display(),
                            self.workspace.display()
                        ),
                    ));
                }
                if !path.exists() {
                    // Not an error: a missing path grants nothing (fails
                    // closed), and may be created later. But a typo is
                    // otherwise invisible, so say it.
                    tracing::warn!(file = %self.file.display(), key = %k, path = %path.display(), "sandbox path does not exist; it grants nothing");
                }
                out.push(path);
            }
        }
        if let Some(m) = get(fields, "network") {
            spec.network = self.network(&sub("network"), &m.value, trust)?;
        }
        if let Some(m) = get(fields, "env") {
            spec.env = self.var_names(&m.value, &sub("env"))?;
        }
        if let Some(m) = get(fields, "limits") {
            spec.limits = self.limits(&sub("limits"), &m.value)?;
        }
        if let Some(m) = get(fields, "best_effort") {
            spec.best_effort = self.boolean(&m.value, &sub("best_effort"))?;
            if spec.best_effort && self.scope == Scope::Project {
                return Err(self.boundary(
                    &sub("best_effort"),
                    m.value.pos,
                    "set `best_effort` (starting with a weaker sandbox than configured)",
                ));
            }
        }
        Ok(spec)
    }

    /// `sandbox.limits.sampling_tokens` (CONTRACT §8: the `maxTokens` cap
    /// of the server's sampling requests), when given.
    pub(super) fn sampling_tokens(&self, key: &str, sandbox: &Node) -> Result<Option<u32>> {
        let Kind::Object(fields) = &sandbox.kind else {
            return Ok(None);
        };
        let Some(limits) = get(fields, "limits") else {
            return Ok(None);
        };
        let Kind::Object(limits) = &limits.value.kind else {
            return Ok(None);
        };
        let Some(m) = get(limits, SAMPLING_TOKENS) else {
            return Ok(None);
        };
        let k = push_key(&push_key(key, "limits"), SAMPLING_TOKENS);
        match &m.value.kind {
            Kind::Number(n) => match n
                .as_u64()
                .filter(|v| (1..=super::server_mediation::MAX_SAMPLING).contains(v))
            {
                // As `sampling.max_tokens`: a project may only lower it.
                Some(v)
                    if self.scope == Scope::Project
                        && v > u64::from(crate::config::SamplingLimits::default().max_tokens) =>
                {
                    Err(self.boundary(
                        &k,
                        m.value.pos,
                        &format!(
                            "raise a sampling limit above its default ({})",
                            crate::config::SamplingLimits::default().max_tokens
                        ),
                    ))
                }
                Some(v) => Ok(Some(u32::try_from(v).unwrap_or(u32::MAX))),
                None => Err(self.err(
                    ErrorKind::InvalidValue,
                    &k,
                    m.value.pos,
                    format!(
                        "`{SAMPLING_TOKENS}` must be a whole number from 1 to {}",
                        super::server_mediation::MAX_SAMPLING
                    ),
                    Some("remove the key to get the default (4096)".into()),
                )),
            },
            _ => Err(self.wrong_type(&m.value, &k, "a whole number")),
        }
    }

    pub(super) fn network(&self, key: &str, node: &Node, trust: Trust) -> Result<NetworkSpec> {
        let help = "use \"none\" (the default), \"host\" (trusted servers only) or {\"connect_tcp\": [443], \"bind_tcp\": []}";
        match &node.kind {
            Kind::String(s) if s == "none" => Ok(NetworkSpec::None),
            Kind::String(s) if s == "host" => {
                if self.scope == Scope::Project {
                    return Err(self.boundary(key, node.pos, "grant `network: \"host\"`"));
                }
                if trust != Trust::Trusted {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        key,
                        node.pos,
                        "only a `trusted` server may have unrestricted network",
                        Some(help.into()),
                    ));
                }
                Ok(NetworkSpec::Host)
            }
            Kind::String(s) => Err(self.err(
                ErrorKind::InvalidValue,
                key,
                node.pos,
                format!("unknown network setting `{}`", short(s)),
                Some(help.into()),
            )),
            Kind::Object(fields) => {
                self.check_keys(fields, key, &["connect_tcp", "bind_tcp"])?;
                let mut lists = [Vec::new(), Vec::new()];
                for (i, which) in ["connect_tcp", "bind_tcp"].iter().enumerate() {
                    let Some(m) = get(fields, which) else {
                        continue;
                    };
                    let k = push_key(key, which);
                    let Kind::Array(items) = &m.value.kind else {
                        return Err(self.wrong_type(&m.value, &k, "an array of port numbers"));
                    };
                    for (j, item) in items.iter().enumerate() {
                        let ik = push_index(&k, j);
                        let port = match &item.kind {
                            Kind::Number(n) => n.as_u64().and_then(|p| u16::try_from(p).ok()),
                            _ => return Err(self.wrong_type(item, &ik, "a port number")),
                        };
                        match port {
                            Some(p) if p > 0 => lists[i].push(p),
                            _ => {
                                return Err(self.err(
                                    ErrorKind::InvalidValue,
                                    &ik,
                                    item.pos,
                                    "port out of range",
                                    Some("TCP ports are whole numbers from 1 to 65535".into()),
                                ));
                            }
                        }
                    }
                    if !lists[i].is_empty() && self.scope == Scope::Project {
                        return Err(self.boundary(&k, m.value.pos, "grant network ports"));
                    }
                }
                let [connect_tcp, bind_tcp] = lists;
                if connect_tcp.is_empty() && bind_tcp.is_empty() {
                    Ok(NetworkSpec::None)
                } else {
                    Ok(NetworkSpec::Ports {
                        connect_tcp,
                        bind_tcp,
                    })
                }
            }
            _ => Err(self.wrong_type(node, key, "\"none\", \"host\" or an object of ports")),
        }
    }

    pub(super) fn limits(&self, key: &str, node: &Node) -> Result<Limits> {
        let fields = self.object(node, key, "an object of limits")?;
        self.check_keys(fields, key, LIMIT_KEYS)?;
        let defaults = Limits::default();
        let mut limits = defaults;
        for m in fields {
            // Not a limit of the process: the server's sampling cap
            // (CONTRACT §8), read by `sampling_tokens`.
            if m.key == SAMPLING_TOKENS {
                continue;
            }
            let k = push_key(key, &m.key);
            let value = match &m.value.kind {
                Kind::Number(n) => n.as_u64(),
                _ => return Err(self.wrong_type(&m.value, &k, "a whole number")),
            };
            // The upper cap keeps `memory_mb << 20` and friends from
            // overflowing where the sandbox turns them into bytes.
            let Some(value) = value.filter(|v| (1..=MAX_LIMIT).contains(v)) else {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &k,
                    m.value.pos,
                    format!("a limit must be a whole number from 1 to {MAX_LIMIT}"),
                    Some("remove the key to get the default".into()),
                ));
            };
            let e = &mut limits.explicit;
            let (slot, default, explicit) = match m.key.as_str() {
                "memory_mb" => (&mut limits.memory_mb, defaults.memory_mb, &mut e.memory_mb),
                "processes" => (&mut limits.processes, defaults.processes, &mut e.processes),
                "open_files" => (
                    &mut limits.open_files,
                    defaults.open_files,
                    &mut e.open_files,
                ),
                "cpu_seconds" => (
                    &mut limits.cpu_seconds,
                    defaults.cpu_seconds,
                    &mut e.cpu_seconds,
                ),
                "private_mb" => (
                    &mut limits.private_mb,
                    defaults.private_mb,
                    &mut e.private_mb,
                ),
                _ => (
                    &mut limits.file_size_mb,
                    defaults.file_size_mb,
                    &mut e.file_size_mb,
                ),
            };
            if value > default && self.scope == Scope::Project {
                return Err(self.boundary(
                    &k,
                    m.value.pos,
                    &format!("raise a limit above its default ({default})"),
                ));
            }
            *slot = value;
            *explicit = true;
        }
        Ok(limits)
    }
}
