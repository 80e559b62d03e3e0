//! `mcpServers.NAME`: name, transport (`stdio` command resolution, remote
//! URL and headers), timeout, trust and the server's digest.

use super::*;

/// Programs that run a script named in their arguments.
const INTERPRETERS: &[&str] = &[
    "python",
    "pythonw",
    "pypy",
    "node",
    "nodejs",
    "bash",
    "sh",
    "dash",
    "zsh",
    "ksh",
    "fish",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "uv",
    "uvx",
    "pipx",
    "tsx",
    "ts-node",
    "java",
    "lua",
    "luajit",
    "Rscript",
    "pwsh",
    "osascript",
    "npx",
    "pnpm",
    "yarn",
];

/// Whether `program` (or what its symlinks resolve to) is an interpreter:
/// its name without a version suffix (`python3.12` → `python`) is listed.
pub(super) fn is_interpreter(program: &Path) -> bool {
    let names = [
        program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        std::fs::canonicalize(program)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
    ];
    names.into_iter().flatten().any(|name| {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        INTERPRETERS.contains(&stem)
    })
}

impl Ctx<'_> {
    pub(super) fn server(&self, entry: &Member) -> Result<ServerConfig> {
        let name = entry.key.as_str();
        let key = push_key("mcpServers", name);
        if let Some(why) = invalid_server_name(name) {
            return Err(self.err(
                ErrorKind::InvalidServerName,
                &key,
                entry.key_pos,
                format!("invalid server name: {why}"),
                Some(
                    "use letters, digits, `_` and `-` only, without `__` and not ending in `_` (tools are named mcp__SERVER__TOOL)"
                        .into(),
                ),
            ));
        }
        let node = &entry.value;
        let fields = self.object(node, &key, "an object describing the server")?;
        self.check_keys(fields, &key, SERVER_KEYS)?;
        let field = |k: &str| get(fields, k);
        let sub = |k: &str| push_key(&key, k);

        let kind = match field("type") {
            None => "stdio",
            Some(m) => match self.string(&m.value, &sub("type"))? {
                t @ ("stdio" | "http" | "sse") => t,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &sub("type"),
                        m.value.pos,
                        format!("unknown server type `{}`", short(other)),
                        Some("use \"stdio\" (the default), \"http\" (streamable HTTP) or \"sse\" (legacy HTTP+SSE)".into()),
                    ));
                }
            },
        };
        let disabled = match field("disabled") {
            Some(m) => self.boolean(&m.value, &sub("disabled"))?,
            None => false,
        };
        let trust = match field("trust") {
            None => Trust::Untrusted,
            Some(m) => {
                let k = sub("trust");
                let t = match self.string(&m.value, &k)? {
                    "trusted" => Trust::Trusted,
                    "untrusted" => Trust::Untrusted,
                    "blocked" => Trust::Blocked,
                    other => {
                        return Err(self.err(
                            ErrorKind::InvalidValue,
                            &k,
                            m.value.pos,
                            format!("unknown trust level `{}`", short(other)),
                            Some(
                                "use \"trusted\", \"untrusted\" (the default) or \"blocked\""
                                    .into(),
                            ),
                        ));
                    }
                };
                if t == Trust::Trusted && self.scope == Scope::Project {
                    return Err(self.boundary(&k, m.value.pos, "mark a server `trusted`"));
                }
                t
            }
        };
        let timeout = match field("timeout") {
            None => Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS),
            Some(m) => {
                let k = sub("timeout");
                let secs = match &m.value.kind {
                    Kind::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    _ => return Err(self.wrong_type(&m.value, &k, "a number of seconds")),
                };
                if !(MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(&secs) {
                    return Err(self.err(
                        ErrorKind::TimeoutOutOfRange,
                        &k,
                        m.value.pos,
                        format!("timeout {secs} s is outside 0.05–600 seconds"),
                        Some("give the per-request timeout in seconds, e.g. \"timeout\": 30 (default 60)".into()),
                    ));
                }
                Duration::from_secs_f64(secs)
            }
        };

        let protocol = self.protocol(fields, &key)?;
        let mut sampling = self.sampling(fields, &key)?;
        let elicitation = self.elicitation(fields, &key)?;

        let (transport, sandbox, program) = if kind == "stdio" {
            for k in REMOTE_ONLY {
                if let Some(m) = field(k) {
                    return Err(self.err(
                        ErrorKind::UnknownKey,
                        &sub(k),
                        m.key_pos,
                        format!("`{k}` is only for remote servers, and this one is stdio"),
                        Some("add \"type\": \"http\" (or \"sse\") for a remote server, or remove the key".into()),
                    ));
                }
            }
            let stdio = self.stdio(&key, node.pos, fields, disabled)?;
            let sandbox = match field("sandbox") {
                Some(m) => {
                    // CONTRACT §8 caps sampling with `limits.sampling_tokens`;
                    // with `sampling.max_tokens` as well, the lower holds.
                    if let Some(tokens) = self.sampling_tokens(&sub("sandbox"), &m.value)? {
                        let explicit = self.sampling_max_tokens_given(fields);
                        sampling.max_tokens = if explicit {
                            sampling.max_tokens.min(tokens)
                        } else {
                            tokens
                        };
                    }
                    self.sandbox(&sub("sandbox"), &m.value, trust)?
                }
                None => SandboxSpec::default(),
            };
            let program = stdio.program.clone();
            (TransportConfig::Stdio(stdio), sandbox, Some(program))
        } else {
            for k in STDIO_ONLY {
                if let Some(m) = field(k) {
                    return Err(self.err(
                        ErrorKind::UnknownKey,
                        &sub(k),
                        m.key_pos,
                        format!("`{k}` is only for stdio servers, and this one is `{kind}`"),
                        Some("remove the key, or drop \"type\" for a local stdio server".into()),
                    ));
                }
            }
            let mut remote = self.remote(&key, node.pos, fields)?;
            remote.oauth = self.oauth(fields, &key, kind)?;
            let t = if kind == "http" {
                TransportConfig::Http(remote)
            } else {
                TransportConfig::Sse(remote)
            };
            (t, SandboxSpec::default(), None)
        };

        let digest = server_digest(name, &node.to_value(), program.as_deref());
        let content = match &transport {
            TransportConfig::Stdio(stdio) if !disabled => self.content_of(stdio),
            _ => BTreeMap::new(),
        };
        let approval_digest = approval_digest(&digest, &content);
        Ok(ServerConfig {
            name: name.to_string(),
            transport,
            timeout,
            protocol,
            sampling,
            elicitation,
            disabled,
            trust,
            sandbox,
            scope: self.scope,
            source: self.file.to_path_buf(),
            digest,
            content,
            approval_digest,
        })
    }

    /// What runs from the workspace or the repository (this file's folder):
    /// the executable, and for an interpreter every argument that names a
    /// file there (its script, a module file…), each with the SHA-256 of its
    /// content. Files elsewhere (system interpreters, installed packages)
    /// are the sandbox's business, not the approval's.
    fn content_of(&self, stdio: &StdioConfig) -> BTreeMap<PathBuf, String> {
        let roots: Vec<PathBuf> = [self.workspace, self.dir.as_path()]
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect();
        let within = |p: &Path| -> Option<PathBuf> {
            let real = std::fs::canonicalize(p).ok()?;
            (real.is_file() && roots.iter().any(|r| real.starts_with(r))).then_some(real)
        };
        let mut out = BTreeMap::new();
        let mut add = |p: PathBuf| {
            if let Ok(h) = warden_core::digest::sha256_file(&p) {
                out.insert(p, h);
            }
        };
        if let Some(real) = within(&stdio.program) {
            add(real);
        }
        let base = stdio
            .cwd
            .clone()
            .unwrap_or_else(|| self.workspace.to_path_buf());
        let mut named = |value: &str| {
            // `--flag=value` names a file as much as `value` does.
            let value = value.split_once('=').map_or(value, |(_, v)| v);
            if value.is_empty() || value.starts_with('-') {
                return;
            }
            for candidate in [
                absolutize(&base, Path::new(value)),
                absolutize(&self.dir, Path::new(value)),
            ] {
                if let Some(real) = within(&candidate) {
                    add(real);
                    break;
                }
            }
        };
        if is_interpreter(&stdio.program) {
            for arg in &stdio.args {
                named(arg);
            }
        }
        // What the environment names runs too, for any program:
        // `NODE_OPTIONS=--require ./hook.js`, `BASH_ENV`, `PYTHONSTARTUP`,
        // `LD_PRELOAD=lib/x.so`; each word, and each `:`-separated entry.
        for value in stdio.env.values() {
            for word in value.expose().split_whitespace() {
                for part in word.split(':') {
                    named(part);
                }
            }
        }
        out
    }

    pub(super) fn stdio(
        &self,
        key: &str,
        pos: Pos,
        fields: &[Member],
        disabled: bool,
    ) -> Result<StdioConfig> {
        let sub = |k: &str| push_key(key, k);
        let Some(cmd) = get(fields, "command") else {
            return Err(self.err(
                ErrorKind::MissingKey,
                key,
                pos,
                "missing `command` (a stdio server needs the program to start)",
                Some("add \"command\": \"…\", or \"type\": \"http\" and a \"url\" for a remote server".into()),
            ));
        };
        let ck = sub("command");
        let command = self.expand(self.string(&cmd.value, &ck)?, &ck, cmd.value.pos)?;
        if command.trim().is_empty() {
            return Err(self.err(
                ErrorKind::InvalidValue,
                &ck,
                cmd.value.pos,
                "empty command",
                None,
            ));
        }
        let program = match self.resolve_program(&command) {
            Ok(p) => p,
            // A disabled server is not started, so a program that is not
            // installed (yet) must not stop the others.
            Err(_) if disabled => PathBuf::from(&command),
            Err(why) => {
                return Err(self.err(
                    ErrorKind::MissingExecutable,
                    &ck,
                    cmd.value.pos,
                    why,
                    Some(if command.contains('/') {
                        format!(
                            "a command containing `/` is relative to the config file's folder ({})",
                            self.dir.display()
                        )
                    } else {
                        "install it, add its folder to PATH, or give an absolute path".into()
                    }),
                ));
            }
        };
        let mut args = Vec::new();
        if let Some(m) = get(fields, "args") {
            for (s, k, p) in self.strings(&m.value, &sub("args"))? {
                args.push(self.expand(s, &k, p)?);
            }
        }
        let mut env = BTreeMap::new();
        if let Some(m) = get(fields, "env") {
            for (member, value, k) in self.string_map(&m.value, &sub("env"))? {
                if member.key.is_empty() || member.key.contains(['=', '\0']) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.key_pos,
                        "invalid environment variable name (empty, or contains `=` or NUL)",
                        None,
                    ));
                }
                let value = self.expand(value, &k, member.value.pos)?;
                env.insert(member.key.clone(), Secret::new(value));
            }
        }
        let env_from = match get(fields, "env_from") {
            Some(m) => self.var_names(&m.value, &sub("env_from"))?,
            None => Vec::new(),
        };
        let cwd = match get(fields, "cwd") {
            None => None,
            Some(m) => {
                let k = sub("cwd");
                let raw = self.expand(self.string(&m.value, &k)?, &k, m.value.pos)?;
                let dir = absolutize(self.workspace, Path::new(&raw));
                if !dir.is_dir() {
                    return Err(self.err(
                        ErrorKind::MissingCwd,
                        &k,
                        m.value.pos,
                        format!("working directory {} does not exist", dir.display()),
                        Some("a relative `cwd` is relative to the workspace root".into()),
                    ));
                }
                Some(dir)
            }
        };
        Ok(StdioConfig {
            command,
            program,
            args,
            env,
            env_from,
            cwd,
        })
    }

    /// Absolute path of the executable, symlinks not followed (the sandbox
    /// resolves them when granting the install prefix).
    pub(super) fn resolve_program(&self, command: &str) -> std::result::Result<PathBuf, String> {
        if command.contains('/') {
            let path = absolutize(&self.dir, Path::new(command));
            return match std::fs::metadata(&path) {
                Ok(md) if md.is_file() && is_executable(&md) => Ok(path),
                Ok(md) if md.is_file() => Err(format!("{} is not executable", path.display())),
                Ok(_) => Err(format!("{} is not a file", path.display())),
                Err(_) => Err(format!("executable {} does not exist", path.display())),
            };
        }
        let Some(path_var) = (self.env)("PATH") else {
            return Err(format!("cannot find `{command}`: PATH is not set"));
        };
        // Relative PATH entries (`.`, `node_modules/.bin`) would resolve
        // inside whatever directory warden runs in, i.e. a repository's
        // files: only absolute ones are searched.
        let dirs: Vec<&str> = path_var.split(':').filter(|d| d.starts_with('/')).collect();
        which::which_in(command, Some(dirs.join(":")), "/")
            .map(|p| normalize(&p))
            .map_err(|_| format!("`{command}` was not found on PATH"))
    }

    pub(super) fn remote(&self, key: &str, pos: Pos, fields: &[Member]) -> Result<RemoteConfig> {
        let sub = |k: &str| push_key(key, k);
        let Some(u) = get(fields, "url") else {
            return Err(self.err(
                ErrorKind::MissingKey,
                key,
                pos,
                "missing `url` (an http or sse server needs the address to connect to)",
                Some("add \"url\": \"https://…\"".into()),
            ));
        };
        let uk = sub("url");
        let url = self.expand(self.string(&u.value, &uk)?, &uk, u.value.pos)?;
        // The URL is not echoed: after expansion it may carry a token.
        match url::Url::parse(&url) {
            Ok(parsed)
                if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
            Ok(parsed) => {
                return Err(self.err(
                    ErrorKind::InvalidUrl,
                    &uk,
                    u.value.pos,
                    if matches!(parsed.scheme(), "http" | "https") {
                        "invalid URL: no host".to_string()
                    } else {
                        format!(
                            "invalid URL: scheme `{}` is not supported; use http or https",
                            short(parsed.scheme())
                        )
                    },
                    Some("write a full address such as \"https://example.com/mcp\"".into()),
                ));
            }
            Err(e) => {
                return Err(self.err(
                    ErrorKind::InvalidUrl,
                    &uk,
                    u.value.pos,
                    format!("invalid URL: {e}"),
                    Some("write a full address such as \"https://example.com/mcp\"".into()),
                ));
            }
        }
        let mut headers = BTreeMap::new();
        if let Some(m) = get(fields, "headers") {
            for (member, value, k) in self.string_map(&m.value, &sub("headers"))? {
                let valid_name = !member.key.is_empty()
                    && member
                        .key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !valid_name {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.key_pos,
                        "invalid HTTP header name",
                        None,
                    ));
                }
                let value = self.expand(value, &k, member.value.pos)?;
                if value.contains(['\r', '\n', '\0']) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.value.pos,
                        "header value contains a line break or NUL (value not shown: it may be secret)",
                        None,
                    ));
                }
                headers.insert(member.key.clone(), Secret::new(value));
            }
        }
        Ok(RemoteConfig {
            url,
            headers,
            oauth: crate::config::OAuthSettings::default(),
            oauth_store: None,
        })
    }
}

/// Why `name` cannot be a server name, if it cannot.
fn invalid_server_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Some("only A-Z, a-z, 0-9, `_` and `-` are allowed")
    } else if name.contains("__") {
        Some("`__` separates server and tool in tool names")
    } else if name.ends_with('_') {
        // `mcp__a___t` (server `a_`, tool `t`) would also read as server
        // `a`'s tool `_t`, and a rule for `a` (`mcp__a`, `mcp__a__*`)
        // would cover every tool of `a_`.
        Some(
            "a name ending in `_` runs into the `__` after it (`mcp__a___t` would read as server `a`'s tool `_t`)",
        )
    } else {
        None
    }
}

#[cfg(unix)]
fn is_executable(md: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    md.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_md: &std::fs::Metadata) -> bool {
    true
}
