//! The Rego stage on regorus's bytecode VM (RVM), where a policy allows it.
//!
//! regorus's tree-walking interpreter (`CompiledPolicy`) builds an
//! interpreter per evaluation and allocates at every step: with
//! `default.rego` it was the largest single item of a call's CPU. The same
//! policy compiled to RVM bytecode decides a 16 B call in less than half
//! the time (BENCHMARKS.md, "Fifth pass"). The interpreter stays the
//! reference:
//!
//! - only the shipped policies run on the VM (`default.rego`, `ci.rego`,
//!   alone or together: [`crate::rego::VmUse`]). The VM does not fail on
//!   conflicting rule values (two values of a complete rule, two outputs
//!   of a function, two values for one key of a partial object), where
//!   the interpreter fails the evaluation and warden denies: a user's
//!   policy that conflicts would decide silently on it (fail open), so
//!   every other policy stays on the interpreter. The shipped policies
//!   define no rule that can take two values;
//! - even so, a group runs on the VM only if it compiles to bytecode (the
//!   VM refuses `walk`, for one), calls none of the builtins warden bounds
//!   ([`crate::bounded`]: the VM would run regorus's unbounded originals;
//!   it runs no engine extensions) and gives the interpreter's answer on
//!   every load-time probe;
//! - `regex.match` is answered by warden ([`crate::patterns`], the same
//!   shared compiled patterns as the interpreter's extension) through the
//!   VM's host-await suspension;
//! - builtin errors are strict on the VM, and any VM error other than a
//!   limit, and any `regex.match` that is not a plain true/false (an
//!   invalid pattern, a non-string), hands the decision to the
//!   interpreter, whose (non-strict) answer is the one given. So the VM
//!   never answers with a builtin's error semantics of its own; a
//!   differential property test and the `rego_input` fuzz target hold the
//!   shipped policies to the interpreter's answers;
//! - the VM's own limits bound it: the same wall-clock budget as the
//!   interpreter ([`crate::rego::EVAL_TIME_LIMIT`], per VM rather than
//!   process-wide) and an instruction budget. A limit hit is the
//!   decision's error (a deny), not a second evaluation.

use std::sync::{Arc, Mutex, PoisonError};

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::RegoVM;
use regorus::rvm::program::Program;
use regorus::rvm::vm::{ExecutionMode, ExecutionState, SuspendReason, VmError};
use regorus::{CompiledPolicy, Value};

/// Builtins answered by warden through host-await, with their arity.
const HOST_AWAIT: &[(&str, usize)] = &[("regex.match", 2)];

/// Instructions one evaluation may execute. The VM's default (25,000)
/// would deny legitimate calls with many arguments; the wall-clock budget
/// is the real bound, this one only a backstop far beyond it.
const MAX_INSTRUCTIONS: usize = 500_000_000;

/// Idle VMs kept for reuse, at most this many per policy: one per
/// evaluation running at once on the usual one-per-core pool and the
/// caller's tasks, beyond which a burst's extra VMs are dropped.
const MAX_IDLE: usize = 8;

/// A policy compiled to bytecode.
#[derive(Clone)]
pub(crate) struct VmPolicy {
    program: Arc<Program>,
    compiled: CompiledPolicy,
    data: Value,
    /// VMs loaded with this program and data, each left by an evaluation
    /// that completed. Building one (program, data check, registers)
    /// was a tenth of a 16 B decision's VM work; regorus clears every
    /// per-evaluation state (rule and builtin caches, registers, stack)
    /// when the next evaluation starts, and checks it in debug builds.
    idle: Arc<Mutex<Vec<RegoVM>>>,
}

/// Why the VM gave no answer.
#[derive(Debug)]
pub(crate) enum VmMiss {
    /// Something the VM does not do as the interpreter does (an
    /// unsupported construct, a strict builtin error, a `regex.match`
    /// that is not true or false): ask the interpreter.
    Defer(String),
    /// The evaluation ran out of time or instructions: the decision's
    /// error, as the interpreter's timer would be.
    Limit(String),
}

impl VmPolicy {
    /// Compiles `entry_point` of `compiled` to bytecode, or says why the
    /// policy stays on the interpreter.
    pub(crate) fn compile(
        compiled: &CompiledPolicy,
        entry_point: &str,
        data: Value,
        sources: &[(String, String)],
    ) -> Result<VmPolicy, String> {
        if let Some(name) = crate::functions::EXTENSIONS
            .iter()
            .find(|name| sources.iter().any(|(_, text)| text.contains(*name)))
        {
            return Err(format!(
                "it calls `{name}`, which warden bounds only on the interpreter"
            ));
        }
        let program =
            Compiler::compile_from_policy_with_host_await(compiled, &[entry_point], HOST_AWAIT)
                .map_err(|e| e.to_string())?;
        Ok(VmPolicy {
            program,
            compiled: compiled.clone(),
            data,
            idle: Arc::default(),
        })
    }

    /// An idle VM, or a new one loaded with the program and data.
    fn take_vm(&self) -> Result<RegoVM, VmMiss> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if let Some(vm) = idle {
            return Ok(vm);
        }
        let mut vm = RegoVM::new_with_policy(self.compiled.clone());
        vm.load_program(Arc::clone(&self.program));
        vm.set_data(self.data.clone()).map_err(defer)?;
        vm.set_execution_mode(ExecutionMode::Suspendable);
        vm.set_strict_builtin_errors(true);
        vm.set_max_instructions(MAX_INSTRUCTIONS);
        Ok(vm)
    }

    /// Keeps a VM whose evaluation completed; one that failed or was left
    /// suspended is dropped instead, so no half-run state is ever reused.
    fn give_back(&self, mut vm: RegoVM) {
        vm.set_input(Value::Undefined);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(vm);
        }
    }

    #[cfg(test)]
    fn idle_vms(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Evaluates the entry point against `input`.
    pub(crate) fn eval(&self, input: Value) -> Result<Value, VmMiss> {
        self.eval_within(input, crate::rego::EVAL_TIME_LIMIT)
    }

    /// [`VmPolicy::eval`] with the wall-clock budget at `limit`.
    pub(crate) fn eval_within(
        &self,
        input: Value,
        limit: std::time::Duration,
    ) -> Result<Value, VmMiss> {
        let mut vm = self.take_vm()?;
        vm.set_input(input);
        vm.set_execution_timer_config(Some(crate::rego::timer_within(limit)));
        let mut out = vm.execute_entry_point_by_index(0).map_err(miss)?;
        loop {
            match vm.execution_state() {
                ExecutionState::Completed { .. } => {
                    self.give_back(vm);
                    return Ok(out);
                }
                ExecutionState::Suspended {
                    reason:
                        SuspendReason::HostAwait {
                            argument,
                            identifier,
                            ..
                        },
                    ..
                } => {
                    let answer = host_await(identifier, argument)?;
                    out = vm.resume(Some(answer)).map_err(miss)?;
                }
                other => return Err(VmMiss::Defer(format!("the VM stopped in state {other:?}"))),
            }
        }
    }
}

/// warden's answer to a host-await builtin, or a hand-off to the
/// interpreter when it would not be a plain true/false.
fn host_await(identifier: &Value, argument: &Value) -> Result<Value, VmMiss> {
    let name = identifier
        .as_string()
        .map_err(|_| defer("no builtin name"))?;
    if name.as_ref() != "regex.match" {
        return Err(VmMiss::Defer(format!(
            "unexpected host-await builtin `{name}`"
        )));
    }
    let args: Vec<Value> = argument
        .as_array()
        .map_err(|_| defer("regex.match: arguments are not an array"))?
        .to_vec();
    match crate::patterns::regex_match(args) {
        Ok(Value::Bool(b)) => Ok(Value::Bool(b)),
        Ok(other) => Err(VmMiss::Defer(format!("regex.match gave {other}"))),
        Err(e) => Err(VmMiss::Defer(e.to_string())),
    }
}

fn defer(e: impl std::fmt::Display) -> VmMiss {
    VmMiss::Defer(e.to_string())
}

fn miss(e: VmError) -> VmMiss {
    match e {
        VmError::InstructionLimitExceeded { .. } | VmError::TimeLimitExceeded { .. } => {
            VmMiss::Limit(e.to_string())
        }
        other => VmMiss::Defer(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use regorus::Value;
    use serde_json::{Value as Json, json};
    use warden_core::{Mode, RequestKind, Scope, TransportKind, Trust};

    use crate::facts::{CallContext, CallFacts, PinState, ServerFacts, ToolFacts};
    use crate::pipeline::{Pipeline, PipelineConfig};
    use crate::rego::{CI_REGO, DEFAULT_REGO, PolicyInput, RegoSet, VmUse};

    fn load_using(policies: &[(&str, &str)], vm_use: VmUse) -> RegoSet {
        let inputs: Vec<PolicyInput> = policies
            .iter()
            .map(|(name, text)| PolicyInput::Embedded {
                name: (*name).into(),
                text: (*text).into(),
            })
            .collect();
        RegoSet::load_using(
            &inputs,
            Scope::User,
            &[
                Value::from_json_str(r#"{"arguments": {}, "strings": {}, "raw_strings": {}}"#)
                    .expect("probe"),
            ],
            vm_use,
        )
        .expect("load")
    }

    /// As warden loads policies: only the shipped ones on the VM.
    fn load(policies: &[(&str, &str)]) -> RegoSet {
        load_using(policies, VmUse::Shipped)
    }

    /// Any policy the VM compiles, to test the VM path itself.
    fn load_any(policies: &[(&str, &str)]) -> RegoSet {
        load_using(policies, VmUse::Any)
    }

    #[test]
    fn the_shipped_policies_run_on_the_vm() {
        assert!(load(&[("default.rego", DEFAULT_REGO)]).on_vm());
        assert!(load(&[("ci.rego", CI_REGO)]).on_vm());
        assert!(load(&[("default.rego", DEFAULT_REGO), ("ci.rego", CI_REGO)]).on_vm());
        // Anything else beside them keeps the group on the interpreter,
        // even a policy the VM could run.
        let plain = "package warden\nimport rego.v1\ndeny contains \"x\" if input.arguments.x\n";
        assert!(!load(&[("default.rego", DEFAULT_REGO), ("p.rego", plain)]).on_vm());
        assert!(load_any(&[("default.rego", DEFAULT_REGO), ("p.rego", plain)]).on_vm());
    }

    /// Why only the shipped policies run on the VM: where rules conflict
    /// (two values for a complete rule, two outputs of a function, two
    /// values for one key of a partial object, a complete rule iterating
    /// to several values), the interpreter fails the evaluation (warden
    /// denies) but the VM decides as if nothing happened. A user's policy
    /// like that stays on the interpreter and fails closed.
    #[test]
    fn conflicting_rules_fail_closed_because_user_policies_stay_off_the_vm() {
        for text in [
            "x := 1 if input.arguments.boom\nx := 2 if input.arguments.boom\ndeny contains \"never\" if x == 3\n",
            "x := v if {\n\tinput.arguments.boom\n\tsome v in [1, 2]\n}\ndeny contains \"never\" if x == 3\n",
            "f(a) := 1 if a\nf(a) := 2 if a\ndeny contains \"never\" if f(input.arguments.boom) == 3\n",
            "o[k] := v if {\n\tinput.arguments.boom\n\tsome k, v in {\"a\": 1}\n}\no[k] := v if {\n\tinput.arguments.boom\n\tsome k, v in {\"a\": 2}\n}\ndeny contains \"never\" if o.a == 3\n",
        ] {
            let text = format!("package warden\nimport rego.v1\n{text}");
            let input = crate::rego::to_rego(&json!({"arguments": {"boom": true}}));
            let set = load(&[("p.rego", &text)]);
            assert!(!set.on_vm(), "{text}");
            assert!(set.eval_value(input.clone()).is_err(), "{text}");
            // What the VM would have said (regorus 0.14.1): no error.
            let on_vm = load_any(&[("p.rego", &text)]);
            assert!(on_vm.on_vm(), "{text}");
            assert!(
                matches!(on_vm.both_engines(input), Some((Ok(_), Err(_)))),
                "{text}"
            );
        }
    }

    #[test]
    fn policies_the_vm_cannot_run_stay_on_the_interpreter() {
        let walks = "package warden\nimport rego.v1\ndeny contains \"s\" if {\n\twalk(input.arguments, [_, v])\n\tv == \"x\"\n}\n";
        let bounded = "package warden\nimport rego.v1\ndeny contains \"n\" if count(numbers.range(1, input.arguments.n)) > 3\n";
        for text in [walks, bounded] {
            let set = load_any(&[("p.rego", text)]);
            assert!(!set.on_vm(), "{text}");
            // ...and still decide.
            let input = json!({"arguments": {"n": 10}, "strings": {}, "raw_strings": {}});
            let verdict = set.eval_value(crate::rego::to_rego(&input)).expect("eval");
            assert_eq!(verdict.deny.is_empty(), text == walks, "{text}");
        }
    }

    /// Data documents (`policy_data`) reach the VM.
    #[test]
    fn data_documents_reach_the_vm() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("lists.json");
        std::fs::write(&data, r#"{"lists": {"blocked": ["rm", "dd"]}}"#).expect("write");
        let text = "package warden\nimport rego.v1\ndeny contains \"blocked\" if input.arguments.name in data.lists.blocked\n";
        let set = RegoSet::load_using(
            &[
                PolicyInput::Embedded {
                    name: "p.rego".into(),
                    text: text.into(),
                },
                PolicyInput::Data(data),
            ],
            Scope::User,
            &[Value::from_json_str(r#"{"arguments": {}}"#).expect("probe")],
            VmUse::Any,
        )
        .expect("load");
        assert!(set.on_vm());
        let deny = |name: &str| {
            let input = crate::rego::to_rego(&json!({"arguments": {"name": name}}));
            set.both_engines(input)
                .and_then(|(vm, _)| vm.ok())
                .map(|v| v["deny"].clone())
        };
        let blocked: std::collections::BTreeSet<Value> = [Value::from("blocked")].into();
        assert_eq!(deny("dd"), Some(Value::from(blocked)));
        assert_eq!(deny("ls"), Some(Value::new_set()));
    }

    /// A `regex.match` the VM cannot answer with true or false (an invalid
    /// pattern is undefined, non-strict, on the interpreter) is answered by
    /// the interpreter; a pattern over the size limit fails the decision.
    #[test]
    fn regex_match_outside_true_and_false_is_the_interpreters() {
        let text = "package warden\nimport rego.v1\ndeny contains \"m\" if regex.match(input.arguments.p, \"x\")\ndeny contains \"not m\" if not regex.match(input.arguments.p, \"x\")\n";
        let set = load_any(&[("p.rego", text)]);
        assert!(set.on_vm());
        let eval = |p: &str| set.eval_value(crate::rego::to_rego(&json!({"arguments": {"p": p}})));
        assert_eq!(eval("x").expect("eval").deny, vec!["m"]);
        assert_eq!(eval("y").expect("eval").deny, vec!["not m"]);
        // Invalid: undefined, so only `not` fires (as on the interpreter).
        assert_eq!(eval("(").expect("eval").deny, vec!["not m"]);
        assert!(eval(r"\w{1000}\w{1000}\w{1000}").is_err());
    }

    /// A runaway policy is stopped by the VM's own timer: an error (the
    /// call is denied), not a second evaluation on the interpreter.
    #[test]
    fn a_runaway_policy_is_a_limit_error_on_the_vm() {
        let text = "package warden\nimport rego.v1\ndeny contains \"big\" if {\n\txs := input.arguments.xs\n\tcount([1 | some a in xs; some b in xs; some c in xs; a + b + c < 0]) > 0\n}\n";
        let set = load_any(&[("p.rego", text)]);
        assert!(set.on_vm());
        let xs: Vec<u32> = (0..3000).collect();
        let input = crate::rego::to_rego(&json!({"arguments": {"xs": xs}}));
        let vm = set.vm.as_ref().expect("on the VM");
        match vm.eval(input.clone()) {
            Err(super::VmMiss::Limit(e)) => assert!(e.contains("time limit"), "{e}"),
            other => panic!("expected the time limit, got {other:?}"),
        }
        // The decision is that error, not the interpreter's second try.
        let e = set.eval_value(input).expect_err("denied");
        assert!(e.contains("time limit"), "{e}");
    }

    /// A VM is reused only after an evaluation that completed, and then
    /// answers each input afresh: a deny, an ask and an allow in turn on
    /// one VM give the interpreter's answers (a rule result kept from the
    /// call before would give that call's).
    #[test]
    fn a_reused_vm_answers_each_input_afresh() {
        let pipeline = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            workspace: "/srv/repo".into(),
            ..PipelineConfig::default()
        })
        .expect("pipeline");
        let stages = vec![crate::decision::StageVerdict::new(
            warden_core::Stage::Rules,
            None,
            vec![],
        )];
        let inputs: Vec<Value> = [
            (Trust::Untrusted, false, json!({"path": "~/.ssh/id_rsa"})),
            (Trust::Untrusted, false, json!({"path": "notes.txt"})),
            (Trust::Trusted, true, json!({"path": "notes.txt"})),
            (Trust::Trusted, true, json!({"key": "AKIAABCDEFGHIJKLMNOP"})),
        ]
        .into_iter()
        .map(|(trust, read_only, args)| {
            let facts = facts(RequestKind::Tool, trust, read_only, args);
            pipeline.rego_input(&facts, Mode::Interactive, &stages)
        })
        .collect();
        let set = load(&[("default.rego", DEFAULT_REGO)]);
        let vm = set.vm.as_ref().expect("on the VM");
        let expected: Vec<Value> = inputs
            .iter()
            .map(|input| set.interpret(input.clone()).expect("interpreter"))
            .collect();
        let distinct: std::collections::BTreeSet<String> =
            expected.iter().map(|v| v.to_string()).collect();
        assert_eq!(distinct.len(), expected.len(), "{expected:?}");
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 1, 0, 0]] {
            for i in order {
                let out = vm.eval(inputs[i].clone()).expect("VM");
                assert_eq!(out, expected[i], "input {i} after another");
                assert_eq!(vm.idle_vms(), 1, "one VM, reused");
            }
        }
        // A VM whose evaluation ran out of time is not kept.
        let before = vm.idle_vms();
        assert!(matches!(
            vm.eval_within(inputs[0].clone(), std::time::Duration::ZERO),
            Err(super::VmMiss::Limit(_))
        ));
        assert_eq!(vm.idle_vms(), before - 1, "the timed-out VM was dropped");
        assert_eq!(vm.eval(inputs[0].clone()).expect("VM"), expected[0]);
        // Evaluations at once each take their own VM; at most
        // `MAX_IDLE` stay.
        std::thread::scope(|scope| {
            for _ in 0..super::MAX_IDLE * 2 {
                scope.spawn(|| {
                    for (input, want) in inputs.iter().zip(&expected) {
                        assert_eq!(&vm.eval(input.clone()).expect("VM"), want);
                    }
                });
            }
        });
        assert!((1..=super::MAX_IDLE).contains(&vm.idle_vms()));
    }

    fn facts(kind: RequestKind, trust: Trust, read_only: bool, args: Json) -> CallFacts {
        CallFacts {
            kind,
            server: ServerFacts {
                name: "fs".into(),
                trust,
                transport: TransportKind::Stdio,
                scope: Scope::User,
                dirs: Default::default(),
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__fs__t".into(),
                annotations: json!({"readOnlyHint": read_only}),
                input_schema: json!({}).into(),
                pin: PinState::Pinned,
            },
            arguments: args,
            context: CallContext {
                mode: Mode::Interactive,
                session: "s".into(),
                call_index: 1,
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The shipped policies answer the same on the VM and on the
        /// interpreter, for every kind, trust, claim and earlier verdict.
        #[test]
        fn the_vm_decides_as_the_interpreter(
            args in prop::collection::btree_map("[a-z~/]{1,6}", crate::strategies::argument_value(), 0..4),
            kind in prop_oneof![Just(RequestKind::Tool), Just(RequestKind::Resource), Just(RequestKind::Prompt)],
            trusted in any::<bool>(),
            read_only in any::<bool>(),
            rules in prop_oneof![Just(None), Just(Some(warden_core::Effect::Allow)), Just(Some(warden_core::Effect::Ask))],
        ) {
            let pipeline = Pipeline::load(PipelineConfig {
                policies: Some(vec![]),
                workspace: "/srv/repo".into(),
                ..PipelineConfig::default()
            }).expect("pipeline");
            let trust = if trusted { Trust::Trusted } else { Trust::Untrusted };
            let facts = facts(kind, trust, read_only, Json::Object(args.into_iter().collect()));
            let stages = vec![crate::decision::StageVerdict::new(warden_core::Stage::Rules, rules, vec![])];
            let input = pipeline.rego_input(&facts, Mode::Interactive, &stages);
            for set in [shipped_default(), shipped_ci()] {
                let (vm, interpreter) = match set.both_engines(input.clone()) {
                    Some((vm, interpreter)) => (vm.ok(), interpreter.ok()),
                    None => (None, None),
                };
                prop_assert!(vm.is_some(), "the VM deferred or failed on {}", input);
                prop_assert_eq!(vm, interpreter, "{}", input);
            }
        }
    }

    fn shipped_default() -> &'static RegoSet {
        static SET: std::sync::OnceLock<RegoSet> = std::sync::OnceLock::new();
        SET.get_or_init(|| load(&[("default.rego", DEFAULT_REGO)]))
    }

    fn shipped_ci() -> &'static RegoSet {
        static SET: std::sync::OnceLock<RegoSet> = std::sync::OnceLock::new();
        SET.get_or_init(|| load(&[("ci.rego", CI_REGO)]))
    }
}
