//! `warden policy test`: runs `test_` rules of `*_test.rego` files, like
//! `opa test`. A test passes when its rule evaluates to `true`; `false`,
//! undefined or an error is a failure.
//!
//! Grouping: each `X_test.rego` runs against `X.rego` beside it (plus the
//! `*.json` data there, loaded as configured data is: nothing under
//! `data.warden`); when there is no `X.rego`, against every non-test
//! `.rego` file of its folder. Policies of one package that are meant to be
//! used alone (like the shipped `default.rego` and `ci.rego`) can so live
//! in one folder.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::PolicyError;
use crate::rego::{
    CI_REGO, CI_TEST_REGO, DEFAULT_REGO, DEFAULT_TEST_REGO, PolicyInput, build_engine,
    collect_within, confine, json_beside, package_of,
};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TestOutcome {
    Pass,
    Fail,
    Error,
}

#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    /// `data.PACKAGE.test_NAME`.
    pub name: String,
    pub file: String,
    pub outcome: TestOutcome,
    /// The error, for `Error`.
    pub message: Option<String>,
    /// What the test's `print` calls printed (gathered: regorus would
    /// write them raw to stderr), as regorus gives them, for the caller
    /// to show through [`warden_core::display`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prints: Vec<String>,
    #[serde(skip)]
    pub duration: Duration,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TestReport {
    pub results: Vec<TestResult>,
}

impl TestReport {
    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.outcome == TestOutcome::Pass)
            .count()
    }
    pub fn failed(&self) -> usize {
        self.results.len() - self.passed()
    }
}

/// The shipped policies with their tests, as (policy, test) groups.
pub fn shipped_groups() -> Vec<Vec<PolicyInput>> {
    let e = |name: &str, text: &str| PolicyInput::Embedded {
        name: format!("<builtin>/policies/{name}"),
        text: text.to_string(),
    };
    vec![
        vec![
            e("default.rego", DEFAULT_REGO),
            e("default_test.rego", DEFAULT_TEST_REGO),
        ],
        vec![e("ci.rego", CI_REGO), e("ci_test.rego", CI_TEST_REGO)],
    ]
}

/// Groups the `*_test.rego` files found under `paths` with the policies
/// they test (see the module docs). A folder is confined as a project's
/// policy folder is: every policy and data file found in it must resolve
/// inside it. One runs the tests of a checked-out repository; a link in
/// it (`x_test.rego -> ~/.ssh/id_ed25519`) would otherwise be read and
/// quoted in the parse error.
pub fn groups_for_paths(paths: &[PathBuf]) -> Result<Vec<Vec<PolicyInput>>, PolicyError> {
    let mut groups = Vec::new();
    for path in paths {
        let rego = collect_within(path, true, true)?;
        let folder = path.is_dir();
        let tests: Vec<&PathBuf> = rego
            .iter()
            .filter(|p| p.to_string_lossy().ends_with("_test.rego"))
            .collect();
        if tests.is_empty() {
            return Err(PolicyError::Io {
                path: path.clone(),
                message: "no *_test.rego files found".into(),
            });
        }
        for test in tests {
            let dir = test.parent().unwrap_or(Path::new("."));
            let stem = test
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix("_test.rego"))
                .unwrap_or_default();
            let subject = dir.join(format!("{stem}.rego"));
            let mut group = Vec::new();
            // Only a file the confined walk found.
            if rego.contains(&subject) {
                group.push(PolicyInput::Path(subject));
            } else {
                for p in rego.iter().filter(|p| {
                    p.parent() == Some(dir) && !p.to_string_lossy().ends_with("_test.rego")
                }) {
                    group.push(PolicyInput::Path(p.clone()));
                }
            }
            group.push(PolicyInput::Path(test.clone()));
            // Data beside the tests, as `opa test` loads it (under the
            // same rules as configured data: nothing under `warden`).
            let data = json_beside(dir)?;
            if folder {
                confine(path, &data)?;
            }
            group.extend(data.into_iter().map(PolicyInput::Data));
            groups.push(group);
        }
    }
    Ok(groups)
}

/// `test_` rule names defined at the top level of a module.
fn test_rules(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("test_") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let full = format!("test_{name}");
            if !out.contains(&full) {
                out.push(full);
            }
        }
    }
    out
}

/// Runs every group; a group that does not compile is an error.
pub fn run_groups(groups: &[Vec<PolicyInput>]) -> Result<TestReport, PolicyError> {
    let mut report = TestReport::default();
    for group in groups {
        let (mut engine, _files, sources) = build_engine(group, true)?;
        engine.set_gather_prints(true);
        for (file, text) in &sources {
            if !file.ends_with("_test.rego") {
                continue;
            }
            let package = package_of(text).unwrap_or_default();
            for rule in test_rules(text) {
                let name = format!("data.{package}.{rule}");
                let mut e = engine.clone();
                let start = Instant::now();
                let result = e.eval_rule(name.clone());
                let duration = start.elapsed();
                let prints = e.take_prints().unwrap_or_default();
                let (outcome, message) = match result {
                    Ok(regorus::Value::Bool(true)) => (TestOutcome::Pass, None),
                    Ok(_) => (TestOutcome::Fail, None),
                    Err(err) => (TestOutcome::Error, Some(err.to_string())),
                };
                report.results.push(TestResult {
                    name,
                    file: file.clone(),
                    outcome,
                    message,
                    prints,
                    duration,
                });
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_policy_tests_pass() {
        let report = run_groups(&shipped_groups()).expect("shipped policies compile");
        let failed: Vec<_> = report
            .results
            .iter()
            .filter(|r| r.outcome != TestOutcome::Pass)
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
        assert!(report.passed() > 40, "{}", report.passed());
    }
}
