//! Values that may be credentials (`env`, `headers`, URL query values) and
//! timeouts, shared by the readers. A literal that looks like a credential
//! is never copied into the output: it becomes `env_from` (an `env` entry)
//! or a `${VAR}` placeholder (a header, a URL query value), with a note
//! naming the variable to set.

use serde_json::{Map, Value, json};

use super::{Ctx, Import, type_name};

/// Names of settings that hold credentials, lower-cased, as substrings.
const SECRET_NAMES: &[&str] = &[
    "token",
    "secret",
    "passw",
    "pwd",
    "apikey",
    "api_key",
    "api-key",
    "auth",
    "credential",
    "private",
    "cookie",
    "session",
    "key",
    "bearer",
    "signature",
    "sig",
];

/// Prefixes of well-known credential formats.
const SECRET_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "eyJ",
    "npm_",
    "pypi-",
    "hf_",
    "dop_v1_",
    "shpat_",
];

/// Whether `value`, the setting called `name`, looks like a credential:
/// by the setting's name, a known credential format, an HTTP auth scheme,
/// or a long random-looking token. Errs on the side of hiding.
pub fn looks_secret(name: &str, value: &str) -> bool {
    let value = value.trim();
    if value.is_empty() || value.contains("${") {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    if SECRET_NAMES.iter().any(|s| lower.contains(s)) {
        return true;
    }
    if SECRET_PREFIXES.iter().any(|p| value.starts_with(p)) {
        return true;
    }
    if let Some((scheme, rest)) = value.split_once(' ')
        && ["bearer", "basic", "token", "digest"].contains(&scheme.to_ascii_lowercase().as_str())
        && !rest.trim().is_empty()
    {
        return true;
    }
    let token_chars = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.+=/".contains(c));
    value.len() >= 32
        && token_chars
        && !value.starts_with('/')
        && !value.starts_with('.')
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// An environment variable name from a server and a setting's name.
fn var_name(server: &str, what: &str) -> String {
    let mut out = String::new();
    for c in format!("{server}_{what}").chars() {
        out.push(if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        });
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A server's `env`: literals kept, `${NAME}` of the same name and literal
/// credentials become `env_from` (passed from the host environment when the
/// server starts, so an unset one fails that server, not the whole file).
pub fn env(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    _server: &str,
    pairs: &[(String, String)],
    vars: &dyn Fn(&str) -> String,
    entry: &mut Map<String, Value>,
) {
    let mut env = Map::new();
    let mut env_from: Vec<String> = entry
        .get("env_from")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for (name, raw) in pairs {
        let value = vars(raw);
        if value == format!("${{{name}}}") {
            if !env_from.contains(name) {
                env_from.push(name.clone());
            }
        } else if looks_secret(name, &value) {
            out.note(
                ctx.file,
                &format!("{key}.{name}"),
                format!(
                    "looks like a credential: its value is not copied; warden passes `{name}` \
                     from your environment when the server starts (env_from): export it there"
                ),
            );
            if !env_from.contains(name) {
                env_from.push(name.clone());
            }
        } else {
            env.insert(name.clone(), json!(value));
        }
    }
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    if !env_from.is_empty() {
        entry.insert("env_from".into(), json!(env_from));
    }
}

/// A stdio server's `args`: a credential given on the command line
/// (`--token VALUE`, `--api-key=VALUE`, or a value in a credential format)
/// becomes a `${VAR}` placeholder. Paths are never taken for credentials.
pub fn args(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    server: &str,
    args: &[String],
) -> Vec<String> {
    let is_path = |v: &str| v.starts_with(['/', '.', '~']) || v.contains("${");
    let mut result = Vec::with_capacity(args.len());
    let mut previous_flag: Option<String> = None;
    for (i, arg) in args.iter().enumerate() {
        let (flag, value) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (Some(f), v),
            _ => (None, arg.as_str()),
        };
        let name = flag
            .map(str::to_string)
            .or_else(|| previous_flag.clone())
            .unwrap_or_default();
        let name = name.trim_start_matches('-');
        let secret = !value.starts_with('-')
            && !is_path(value)
            && if name.is_empty() {
                looks_secret("", value)
            } else {
                looks_secret(name, value)
            };
        if secret {
            let var = if name.is_empty() {
                var_name(server, &format!("arg{i}"))
            } else {
                var_name(server, name)
            };
            out.note(
                ctx.file,
                &format!("{key}[{i}]"),
                format!(
                    "looks like a credential: not copied; the argument reads `${{{var}}}`: set \
                     {var} in your environment (an unset variable is a configuration error)"
                ),
            );
            result.push(match flag {
                Some(f) => format!("{f}=${{{var}}}"),
                None => format!("${{{var}}}"),
            });
        } else {
            result.push(arg.clone());
        }
        previous_flag = (arg.starts_with('-') && !arg.contains('=')).then(|| arg.clone());
    }
    result
}

/// A placeholder for a credential: `${VAR}`, keeping an auth scheme.
fn placeholder(value: &str, var: &str) -> String {
    match value.trim().split_once(' ') {
        Some((scheme, _))
            if ["bearer", "basic", "token", "digest"]
                .contains(&scheme.to_ascii_lowercase().as_str()) =>
        {
            format!("{scheme} ${{{var}}}")
        }
        _ => format!("${{{var}}}"),
    }
}

/// A remote server's `headers`: credentials become `${VAR}` placeholders.
pub fn headers(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    server: &str,
    pairs: &[(String, String)],
    vars: &dyn Fn(&str) -> String,
    entry: &mut Map<String, Value>,
) {
    let mut headers = entry
        .get("headers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, raw) in pairs {
        let value = vars(raw);
        if looks_secret(name, &value) {
            let var = if name.eq_ignore_ascii_case("authorization") {
                var_name(server, "token")
            } else {
                var_name(server, name)
            };
            out.note(
                ctx.file,
                &format!("{key}.{name}"),
                format!(
                    "looks like a credential: not copied; the header reads `${{{var}}}`: set \
                     {var} in your environment (an unset variable is a configuration error)"
                ),
            );
            headers.insert(name.clone(), json!(placeholder(&value, &var)));
        } else {
            headers.insert(name.clone(), json!(value));
        }
    }
    if !headers.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
}

/// A URL: a credential-looking query value or password becomes a `${VAR}`.
pub fn url(ctx: &Ctx<'_>, out: &mut Import, key: &str, url: &str) -> String {
    let server = key.split('.').nth(1).unwrap_or("server").to_string();
    let (base, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let (mut base, query) = match base.split_once('?') {
        Some((b, q)) => (b.to_string(), Some(q)),
        None => (base.to_string(), None),
    };
    // user:password@host
    if let Some((scheme, rest)) = base.split_once("://") {
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        if let Some((userinfo, host)) = authority.rsplit_once('@')
            && let Some((user, password)) = userinfo.split_once(':')
            && !password.contains("${")
        {
            let var = var_name(&server, "password");
            out.note(
                ctx.file,
                key,
                format!(
                    "the URL's password is not copied: it reads `${{{var}}}`: set {var} in your environment"
                ),
            );
            base = format!("{scheme}://{user}:${{{var}}}@{host}{path}");
        }
    }
    let mut result = base;
    if let Some(query) = query {
        let mut parts = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((name, value)) if looks_secret(name, value) => {
                    let var = var_name(&server, name);
                    out.note(
                        ctx.file,
                        key,
                        format!(
                            "the URL's `{name}` value looks like a credential: not copied; it \
                             reads `${{{var}}}`: set {var} in your environment (better: move it \
                             to a header if the server accepts one)"
                        ),
                    );
                    parts.push(format!("{name}=${{{var}}}"));
                }
                _ => parts.push(pair.to_string()),
            }
        }
        result.push('?');
        result.push_str(&parts.join("&"));
    }
    if let Some(fragment) = fragment {
        result.push('#');
        result.push_str(fragment);
    }
    result
}

/// A timeout in `unit` per second (1000.0: milliseconds) → warden's
/// per-request `timeout` in seconds, within 0.05–600 s.
pub fn timeout(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    value: &Value,
    per_second: f64,
    entry: &mut Map<String, Value>,
) {
    let Some(n) = value.as_f64() else {
        out.note(
            ctx.file,
            key,
            format!("expected a number, found {}: left out", type_name(value)),
        );
        return;
    };
    let secs = n / per_second;
    let clamped = secs.clamp(0.05, 600.0);
    if (clamped - secs).abs() > f64::EPSILON {
        out.note(
            ctx.file,
            key,
            format!("{secs} s is outside warden's 0.05–600 s: imported as {clamped} s"),
        );
    }
    let value = if clamped.fract() == 0.0 && clamped <= 600.0 {
        json!(clamped as u64)
    } else {
        json!(clamped)
    };
    entry.insert("timeout".into(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_recognised_and_plain_settings_are_not() {
        for (name, value) in [
            ("GITHUB_TOKEN", "abc"),
            ("X", "ghp_0123456789abcdef0123456789abcdef0123"),
            ("Authorization", "Bearer abc"),
            ("X-Api-Key", "k"),
            ("DATA", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8"),
        ] {
            assert!(looks_secret(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("LOG_LEVEL", "warn"),
            ("DEBUG", "pw:api"),
            ("ROOT", "/home/ada/projects/some-long-folder-name-2024"),
            ("GITHUB_TOKEN", "${GITHUB_TOKEN}"),
            ("REGION", "us-east-1"),
        ] {
            assert!(!looks_secret(name, value), "{name}={value}");
        }
    }

    #[test]
    fn argument_credentials_become_placeholders() {
        let ctx = Ctx {
            file: std::path::Path::new("mcp.json"),
        };
        let mut out = Import::default();
        let given: Vec<String> = [
            "-y",
            "@scope/server",
            "--token",
            "abc123",
            "--api-key=xyz",
            "ghp_0123456789abcdef0123456789abcdef0123",
            "--token-file",
            "/run/secrets/t",
            "--verbose",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = args(&ctx, &mut out, "mcpServers.gh.args", "gh", &given);
        assert_eq!(
            got,
            [
                "-y",
                "@scope/server",
                "--token",
                "${GH_TOKEN}",
                "--api-key=${GH_API_KEY}",
                "${GH_ARG5}",
                "--token-file",
                "/run/secrets/t",
                "--verbose"
            ]
        );
        assert_eq!(out.notes.len(), 3);
    }

    #[test]
    fn url_credentials_become_placeholders() {
        let file = std::path::Path::new("mcp.json");
        let ctx = Ctx { file };
        let mut out = Import::default();
        let got = url(
            &ctx,
            &mut out,
            "mcpServers.web.url",
            "https://u:hunter2@h.example/mcp?api_key=abc&region=eu#x",
        );
        assert_eq!(
            got,
            "https://u:${WEB_PASSWORD}@h.example/mcp?api_key=${WEB_API_KEY}&region=eu#x"
        );
        assert_eq!(out.notes.len(), 2);
        assert!(out.notes.iter().all(|n| !n.message.contains("hunter2")));
    }
}
