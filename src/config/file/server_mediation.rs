//! A server's `protocol`, `sampling` and `elicitation` keys (server →
//! client requests).

use super::json::{Kind, Member, push_key};
use super::shape::get;
use super::{Ctx, Result};
use crate::config::error::ErrorKind;
use crate::config::{ElicitationLimits, ProtocolChoice, SamplingLimits, Scope};

const SAMPLING_KEYS: &[&str] = &["max_tokens", "max_requests"];
const ELICITATION_KEYS: &[&str] = &["max_requests"];
/// The largest `sampling.max_tokens` / `sampling.max_requests` accepted.
pub(super) const MAX_SAMPLING: u64 = 1_000_000;

impl Ctx<'_> {
    /// `"protocol": "2025-11-25"` (the default) or `"2026-07-28"`.
    pub(super) fn protocol(&self, fields: &[Member], key: &str) -> Result<ProtocolChoice> {
        let Some(m) = get(fields, "protocol") else {
            return Ok(ProtocolChoice::Session);
        };
        let k = push_key(key, "protocol");
        match self.string(&m.value, &k)? {
            "2025-11-25" => Ok(ProtocolChoice::Session),
            "2026-07-28" => Ok(ProtocolChoice::Stateless),
            _ => Err(self.err(
                ErrorKind::InvalidValue,
                &k,
                m.value.pos,
                "unknown protocol revision",
                Some(
                    "use \"2025-11-25\" (the default: servers may elicit and sample) or \"2026-07-28\""
                        .into(),
                ),
            )),
        }
    }

    /// Whether `sampling.max_tokens` is given.
    pub(super) fn sampling_max_tokens_given(&self, fields: &[Member]) -> bool {
        get(fields, "sampling").is_some_and(|m| match &m.value.kind {
            Kind::Object(members) => get(members, "max_tokens").is_some(),
            _ => false,
        })
    }

    /// `"elicitation": {"max_requests": N}`.
    pub(super) fn elicitation(&self, fields: &[Member], key: &str) -> Result<ElicitationLimits> {
        let mut limits = ElicitationLimits::default();
        let Some(m) = get(fields, "elicitation") else {
            return Ok(limits);
        };
        let k = push_key(key, "elicitation");
        let members = self.object(&m.value, &k, "an object with max_requests")?;
        self.check_keys(members, &k, ELICITATION_KEYS)?;
        if let Some(field) = get(members, "max_requests") {
            let default = ElicitationLimits::default().max_requests;
            limits.max_requests = self.limit(&push_key(&k, "max_requests"), field, default)?;
        }
        Ok(limits)
    }

    /// A whole number from 1 to [`MAX_SAMPLING`]; in a project file, not
    /// above `default`: these caps spend the person's model, tokens and
    /// attention, so a repository's server may lower its own, never raise
    /// them.
    fn limit(&self, fk: &str, field: &Member, default: u32) -> Result<u32> {
        let value = match &field.value.kind {
            Kind::Number(n) => n.as_u64(),
            _ => None,
        };
        match value {
            Some(v) if v > u64::from(default) && self.scope == Scope::Project => Err(self
                .boundary(
                    fk,
                    field.value.pos,
                    &format!("raise a limit above its default ({default})"),
                )),
            Some(v) if (1..=MAX_SAMPLING).contains(&v) => Ok(u32::try_from(v).unwrap_or(u32::MAX)),
            _ => Err(self.err(
                ErrorKind::InvalidValue,
                fk,
                field.value.pos,
                format!(
                    "`{}` must be a whole number from 1 to {MAX_SAMPLING}",
                    fk.rsplit('.').next().unwrap_or(fk)
                ),
                None,
            )),
        }
    }

    /// `"sampling": {"max_tokens": N, "max_requests": N}`.
    pub(super) fn sampling(&self, fields: &[Member], key: &str) -> Result<SamplingLimits> {
        let defaults = SamplingLimits::default();
        let mut limits = defaults;
        let Some(m) = get(fields, "sampling") else {
            return Ok(limits);
        };
        let k = push_key(key, "sampling");
        let members = self.object(&m.value, &k, "an object with max_tokens, max_requests")?;
        self.check_keys(members, &k, SAMPLING_KEYS)?;
        for (name, slot, default) in [
            ("max_tokens", &mut limits.max_tokens, defaults.max_tokens),
            (
                "max_requests",
                &mut limits.max_requests,
                defaults.max_requests,
            ),
        ] {
            let Some(field) = get(members, name) else {
                continue;
            };
            *slot = self.limit(&push_key(&k, name), field, default)?;
        }
        Ok(limits)
    }
}
