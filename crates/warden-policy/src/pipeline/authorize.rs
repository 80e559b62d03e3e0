//! From a [`Decision`] to a [`Permit`] (the only way to obtain one) or a
//! final denial, asking a person when the decision is `ask`.

use std::sync::Arc;

use warden_core::digest::sha256_json;
use warden_core::{Effect, Stage};

use super::Pipeline;
use crate::ask::{AskAnswer, AskPrompt, Asker, argument_lines};
use crate::decision::Decision;
use crate::facts::CallFacts;
use crate::permit::Permit;

impl Pipeline {
    /// Turns a decision into a [`Permit`] or a final denial: `allow` gives
    /// a permit; `ask` goes to `asker` (a session approval is remembered
    /// per session, tool and kind of ask), or is denied when there is
    /// nobody to ask; `deny` is returned as is.
    pub async fn authorize(
        &self,
        facts: &Arc<CallFacts>,
        decision: Decision,
        asker: Option<&dyn Asker>,
    ) -> Result<Permit, Decision> {
        match decision.effect {
            Effect::Allow => Ok(self.permit(facts, decision)),
            Effect::Deny => Err(decision),
            Effect::Ask => {
                let key = session_key(facts, &decision);
                let remembered = self
                    .session_allowed
                    .lock()
                    .map(|s| s.contains(&key))
                    .unwrap_or(false);
                if remembered {
                    let d = approved(decision, "allowed for this session by the user");
                    return Ok(self.permit(facts, d));
                }
                let Some(asker) = asker else {
                    return Err(denied(
                        decision,
                        "no one could be asked, so `ask` is a deny",
                    ));
                };
                // Every key is shown, or nobody is asked.
                let argument_lines = match argument_lines(&facts.arguments) {
                    Ok(lines) => lines,
                    Err(why) => {
                        return Err(denied(
                            decision,
                            &format!(
                                "not asked: {why}; warden does not ask about arguments a \
                                 person cannot see in full"
                            ),
                        ));
                    }
                };
                let prompt = AskPrompt {
                    server: facts.server.name.clone(),
                    tool: facts.tool.name.clone(),
                    qualified: facts.tool.qualified.clone(),
                    arguments: facts.arguments.clone(),
                    argument_lines,
                    stage: decision.stage,
                    reasons: decision.reasons.clone(),
                };
                match asker.ask(&prompt).await {
                    AskAnswer::AllowOnce => {
                        let d = approved(decision, "allowed once by the user");
                        Ok(self.permit(facts, d))
                    }
                    AskAnswer::AllowSession => {
                        if let Ok(mut s) = self.session_allowed.lock() {
                            s.insert(key);
                        }
                        let d = approved(decision, "allowed for this session by the user");
                        Ok(self.permit(facts, d))
                    }
                    AskAnswer::Deny => Err(denied(decision, "denied by the user")),
                    AskAnswer::Unasked => Err(denied(
                        decision,
                        "not approved: no one could be asked (no terminal)",
                    )),
                }
            }
        }
    }

    /// Takes over the "allow for this session" answers given under
    /// `previous` (a policy reload: the person is not asked again what
    /// the new policy still merely asks about). Safe because an approval
    /// is consulted only when the decision is `ask`, and only for an `ask`
    /// with the same session, target and reasons ([`session_key`]): what
    /// the new policy denies stays denied (the stricter policy wins), and
    /// a new or changed reason to ask (another rule, another policy
    /// message) asks again.
    pub fn keep_session_approvals(&self, previous: &Pipeline) {
        if std::ptr::eq(self, previous) {
            return;
        }
        let given = match previous.session_allowed.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        match self.session_allowed.lock() {
            Ok(mut s) => s.extend(given),
            Err(poisoned) => poisoned.into_inner().extend(given),
        }
    }

    fn permit(&self, facts: &Arc<CallFacts>, decision: Decision) -> Permit {
        Permit::new(
            facts.server.name.clone(),
            facts.tool.name.clone(),
            sha256_json(&facts.arguments),
            decision,
            Some(Arc::clone(facts)),
        )
    }
}

/// What "allow for this session" covers: the same session, tool (for a
/// resource: the same URI) and reasons to ask. For the rules stage the matched rules count, not the
/// values they matched (so other arguments under the same rule are
/// covered); pinning, annotation and policy reasons count in full, so a
/// new pin change or a different policy concern asks again.
fn session_key(facts: &CallFacts, decision: &Decision) -> String {
    let mut parts = vec![facts.context.session.clone(), facts.tool.qualified.clone()];
    // A resource's target (`resource__S`) names the server only: the
    // approval covers that URI, not every resource of the server.
    if facts.kind == warden_core::RequestKind::Resource {
        parts.push(facts.tool.name.clone());
    }
    for s in &decision.stages {
        if s.effect == Some(Effect::Ask) {
            parts.push(s.stage.as_str().into());
            let covered = match s.stage {
                Stage::Rules => &s.matched_rules,
                _ => &s.reasons,
            };
            parts.extend(covered.iter().cloned());
        }
    }
    if decision.stage == Stage::Default {
        parts.push("default".into());
    }
    parts.join("\u{1f}")
}

fn approved(mut d: Decision, why: &str) -> Decision {
    d.effect = Effect::Allow;
    d.reasons.push(why.into());
    d
}

fn denied(mut d: Decision, why: &str) -> Decision {
    d.effect = Effect::Deny;
    d.reasons.push(why.into());
    d
}
