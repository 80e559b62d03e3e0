//! `mcpServers.NAME.oauth` on a streamable-HTTP server: whether warden
//! uses OAuth 2.1 for it, and a pre-registered client (README, "Remote
//! servers behind OAuth").

use super::*;
use crate::config::{OAuthMode, OAuthSettings};

const OAUTH_KEYS: &[&str] = &[
    "client_id",
    "client_secret",
    "scopes",
    "redirect_port",
    "client_metadata_url",
    "allow_private_addresses",
];

impl Ctx<'_> {
    /// `true`, `false` or an object; absent means "discovered": a stored
    /// login is used, and a server that answers 401 asks for one.
    pub(super) fn oauth(&self, fields: &[Member], key: &str, kind: &str) -> Result<OAuthSettings> {
        let Some(m) = get(fields, "oauth") else {
            return Ok(OAuthSettings::default());
        };
        let k = push_key(key, "oauth");
        if kind != "http" {
            return Err(self.err(
                ErrorKind::UnknownKey,
                &k,
                m.key_pos,
                format!("`oauth` is only for streamable-HTTP servers, and this one is `{kind}`"),
                Some("use \"type\": \"http\", or remove the key".into()),
            ));
        }
        let members = match &m.value.kind {
            Kind::Bool(true) => {
                return Ok(OAuthSettings {
                    mode: OAuthMode::Required,
                    ..OAuthSettings::default()
                });
            }
            Kind::Bool(false) => {
                return Ok(OAuthSettings {
                    mode: OAuthMode::Off,
                    ..OAuthSettings::default()
                });
            }
            _ => self.object(
                &m.value,
                &k,
                "true, false, or an object with client_id, client_secret, scopes, redirect_port",
            )?,
        };
        self.check_keys(members, &k, OAUTH_KEYS)?;
        let mut settings = OAuthSettings {
            mode: OAuthMode::Required,
            ..OAuthSettings::default()
        };
        if let Some(f) = get(members, "client_id") {
            let fk = push_key(&k, "client_id");
            let id = self.expand(self.string(&f.value, &fk)?, &fk, f.value.pos)?;
            if id.trim().is_empty() {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &fk,
                    f.value.pos,
                    "empty client_id",
                    None,
                ));
            }
            settings.client_id = Some(id);
        }
        if let Some(f) = get(members, "client_secret") {
            let fk = push_key(&k, "client_secret");
            let secret = self.expand(self.string(&f.value, &fk)?, &fk, f.value.pos)?;
            if settings.client_id.is_none() {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &fk,
                    f.value.pos,
                    "`client_secret` without `client_id` (value not shown: it is secret)",
                    Some("add the pre-registered \"client_id\" it belongs to".into()),
                ));
            }
            settings.client_secret = Some(Secret::new(secret));
        }
        if let Some(f) = get(members, "scopes") {
            for (s, sk, pos) in self.strings(&f.value, &push_key(&k, "scopes"))? {
                let scope = self.expand(s, &sk, pos)?;
                if scope.is_empty()
                    || scope.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\')
                {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &sk,
                        pos,
                        "a scope is one non-empty word without spaces, quotes or backslashes",
                        None,
                    ));
                }
                settings.scopes.push(scope);
            }
        }
        if let Some(f) = get(members, "redirect_port") {
            let fk = push_key(&k, "redirect_port");
            let port = match &f.value.kind {
                Kind::Number(n) => n
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p > 0),
                _ => return Err(self.wrong_type(&f.value, &fk, "a port number")),
            };
            let Some(port) = port else {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &fk,
                    f.value.pos,
                    "`redirect_port` must be a port from 1 to 65535",
                    Some(
                        "leave it out for a random free port (http://127.0.0.1:PORT/callback)"
                            .into(),
                    ),
                ));
            };
            settings.redirect_port = Some(port);
        }
        if let Some(f) = get(members, "client_metadata_url") {
            let fk = push_key(&k, "client_metadata_url");
            let url = self.expand(self.string(&f.value, &fk)?, &fk, f.value.pos)?;
            let ok = url::Url::parse(&url)
                .is_ok_and(|u| u.scheme() == "https" && u.host().is_some() && u.path() != "/");
            if !ok {
                return Err(self.err(
                    ErrorKind::InvalidUrl,
                    &fk,
                    f.value.pos,
                    "a client ID metadata document is named by an https URL with a path",
                    Some(
                        "e.g. \"https://example.com/warden/client.json\", a document you host"
                            .into(),
                    ),
                ));
            }
            settings.client_metadata_url = Some(url);
        }
        if let Some(f) = get(members, "allow_private_addresses") {
            let fk = push_key(&k, "allow_private_addresses");
            let allow = self.boolean(&f.value, &fk)?;
            if allow && self.scope == Scope::Project {
                return Err(self.boundary(
                    &fk,
                    f.value.pos,
                    "let OAuth discovery reach private addresses",
                ));
            }
            settings.allow_private_addresses = allow;
        }
        Ok(settings)
    }
}
