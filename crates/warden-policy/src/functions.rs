//! Every function a policy calls must exist, checked at load.
//!
//! regorus reports an unknown function only when evaluation reaches the
//! call, so a typo in a rarely taken branch (`deny if { rare; strings.nope(x) }`)
//! passed `warden policy check` and failed (denying) in production. This
//! module finds every call in every loaded module's source (`name(` or
//! `a.b.c(` outside strings and comments) and resolves it: a builtin of
//! this regorus build, one of warden's bounded replacements, `print`, or a
//! function a loaded module defines (in the same package, by `data.…`, or
//! through an `import` alias). Anything else is a load error naming the
//! file and line.

use std::collections::{BTreeMap, BTreeSet};

/// Functions warden registers as extensions ([`crate::bounded`]).
pub(crate) const EXTENSIONS: &[&str] = &[
    "numbers.range",
    "numbers.range_step",
    "bits.lsh",
    "replace",
    "strings.replace_n",
    "graph.reachable_paths",
];

/// Keywords that may be followed by `(` and are no calls.
const KEYWORDS: &[&str] = &[
    "not", "if", "else", "some", "every", "in", "with", "as", "contains", "default", "package",
    "import", "true", "false", "null", "or", "and",
];

/// One module: its name (file), package and source.
pub struct Module<'a> {
    pub file: &'a str,
    pub package: String,
    pub text: &'a str,
}

impl<'a> Module<'a> {
    /// Each `(file, text)` as a module of the package its text declares.
    pub fn all(sources: &'a [(String, String)]) -> Vec<Module<'a>> {
        sources
            .iter()
            .map(|(file, text)| Module {
                file,
                package: crate::rego::package_of(text).unwrap_or_default(),
                text,
            })
            .collect()
    }

    /// Line `line_no` (from 1), trimmed, for a message that quotes it.
    fn line(&self, line_no: usize) -> &'a str {
        self.text
            .lines()
            .nth(line_no.saturating_sub(1))
            .unwrap_or_default()
            .trim()
    }
}

/// Checks every call in `modules`; the first unknown one is an error.
pub fn check(modules: &[Module<'_>]) -> Result<(), String> {
    // Functions (and rules) each module defines, as `data.PKG.NAME`.
    let mut defined = BTreeSet::new();
    for m in modules {
        for (_, line) in code_lines(m.text) {
            let head = line.trim_start();
            let head = head.strip_prefix("default ").unwrap_or(head);
            let name: String = head
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty()
                && !KEYWORDS.contains(&name.as_str())
                && line.starts_with(|c: char| !c.is_whitespace())
            {
                defined.insert(format!("data.{}.{name}", m.package));
            }
        }
    }
    for m in modules {
        let aliases = imports(m.text);
        for (line_no, line) in code_lines(m.text) {
            for call in calls(&line) {
                if resolves(&call, &m.package, &aliases, &defined) {
                    continue;
                }
                return Err(format!(
                    "{}:{line_no}: unknown function `{call}` (not a builtin of warden's regorus \
                     build, nor defined by a loaded policy)\n    {}",
                    m.file,
                    line.trim()
                ));
            }
        }
    }
    Ok(())
}

/// The decision rules warden reads, `data.warden.deny`/`ask`/`allow`.
const DECISIONS: &[&str] = &["deny", "ask", "allow"];

/// Refuses a module outside package `warden` that defines `deny`, `ask`
/// or `allow` while no other module reads its package: warden consults
/// only `data.warden`, so such a rule (`package wardn`, `package
/// warden.extra` with its own `deny`) would load and never deny anything,
/// with at most a warning. A package another module reads (`data.lib.deny`,
/// `import data.lib`) may define them as helpers.
pub fn unconsulted_decisions(modules: &[Module<'_>]) -> Result<(), String> {
    for m in modules.iter().filter(|m| m.package != "warden") {
        let prefix = format!("data.{}", m.package);
        let read_elsewhere = modules
            .iter()
            .filter(|other| !std::ptr::eq(*other, m))
            .flat_map(|other| code_lines(other.text))
            .any(|(_, line)| names_whole(&line, &prefix));
        if read_elsewhere {
            continue;
        }
        for (line_no, line) in code_lines(m.text) {
            if line.starts_with(char::is_whitespace) {
                continue;
            }
            let head = line.strip_prefix("default ").unwrap_or(&line).trim_start();
            let name: String = head
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if DECISIONS.contains(&name.as_str()) {
                return Err(format!(
                    "{}:{line_no}: `{name}` in package `{}` is never consulted: warden decides \
                     on `data.warden.deny`, `ask` and `allow` only, so this rule would never \
                     apply; put it in `package warden` (or read it from there)\n    {}",
                    m.file,
                    m.package,
                    m.line(line_no)
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a call of `print` in `modules`: regorus writes what it prints
/// straight to warden's stderr, past the filter every other output passes
/// (`warden_core::display`), on every decision. A repository's policy
/// could put terminal escapes or CI workflow commands (`::stop-commands::`)
/// into the person's terminal or the job's log. (`warden policy test`
/// keeps `print` for the policies one is writing.)
pub fn no_print(modules: &[Module<'_>]) -> Result<(), String> {
    for m in modules {
        for (line_no, line) in code_lines(m.text) {
            if calls(&line).iter().any(|c| c == "print") {
                return Err(format!(
                    "{}:{line_no}: `print` in a project policy is refused: regorus writes it \
                     unfiltered to warden's stderr (a terminal, a CI log) on every decision\n    {}",
                    m.file,
                    m.line(line_no)
                ));
            }
        }
    }
    Ok(())
}

/// Whether any module names `print` outside strings and comments (not as
/// a field, `x.print`). Wider than a call on purpose (`print (x)`, a
/// `with` replacement): such a policy is evaluated with its prints
/// gathered ([`crate::rego`]), and gathering where none happens only costs
/// time, while missing one would let regorus write to stderr itself.
pub fn mentions_print(modules: &[Module<'_>]) -> bool {
    modules.iter().any(|m| {
        code_lines(m.text)
            .iter()
            .any(|(_, line)| names_whole(line, "print"))
    })
}

/// Whether `line` holds `name` as a whole reference (`print`, or
/// `data.PKG`: then also `data.PKG.x`): not the tail of a longer name or
/// of a field (`x.name`), nor the head of a longer name.
fn names_whole(line: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + name.len()..].chars().next();
        !word(before) && before != Some('.') && !word(after)
    })
}

fn resolves(
    call: &str,
    package: &str,
    aliases: &BTreeMap<String, String>,
    defined: &BTreeSet<String>,
) -> bool {
    if call == "print"
        || EXTENSIONS.contains(&call)
        || regorus::unstable::BUILTINS.contains_key(call)
    {
        return true;
    }
    if call.starts_with("data.") {
        return defined.contains(call);
    }
    let (first, rest) = call.split_once('.').unwrap_or((call, ""));
    if let Some(target) = aliases.get(first) {
        let full = if rest.is_empty() {
            target.clone()
        } else {
            format!("{target}.{rest}")
        };
        return defined.contains(&full);
    }
    !call.contains('.') && defined.contains(&format!("data.{package}.{call}"))
}

/// `import data.a.b` → `b` ↦ `data.a.b`; `import data.a.b as c` → `c`.
fn imports(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (_, line) in code_lines(text) {
        let Some(rest) = line.trim().strip_prefix("import ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(path) = words.next() else { continue };
        if !path.starts_with("data.") {
            continue;
        }
        let alias = match (words.next(), words.next()) {
            (Some("as"), Some(a)) => a.to_string(),
            _ => path.rsplit('.').next().unwrap_or(path).to_string(),
        };
        out.insert(alias, path.to_string());
    }
    out
}

/// Dotted names directly followed by `(`.
fn calls(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            // Part of a longer reference such as `x[0].f(` or `input.a.b`.
            let after_ref = start > 0 && matches!(chars[start - 1], '.' | ']');
            let name: String = chars[start..i].iter().collect();
            let name = name.trim_end_matches('.').to_string();
            // `set()` is the empty set, a literal (there is no `set` function).
            let empty_set = name == "set"
                && chars[i..].iter().skip(1).find(|c| !c.is_whitespace()) == Some(&')');
            if i < chars.len()
                && chars[i] == '('
                && !after_ref
                && !empty_set
                && !KEYWORDS.contains(&name.as_str())
            {
                out.push(name);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `(line number, line)` with strings blanked and comments removed;
/// raw strings may span lines.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_raw = false;
    for (n, line) in text.lines().enumerate() {
        let mut code = String::with_capacity(line.len());
        let mut quote: Option<char> = if in_raw { Some('`') } else { None };
        let mut escaped = false;
        for c in line.chars() {
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' && q == '"' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                        code.push(q);
                        continue;
                    }
                    code.push(' ');
                }
                None if c == '#' => break,
                None if c == '"' || c == '`' => {
                    quote = Some(c);
                    code.push(c);
                }
                None => code.push(c),
            }
        }
        in_raw = quote == Some('`');
        out.push((n + 1, code));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_one(text: &str) -> Result<(), String> {
        check(&[Module {
            file: "p.rego",
            package: "warden".into(),
            text,
        }])
    }

    #[test]
    fn known_calls_pass() {
        check_one(
            "package warden\nimport rego.v1\nf(x) := y if { y := lower(x) }\n\
             deny contains msg if {\n  some x in numbers.range(1, 3)\n  msg := sprintf(\"%v nope(\", [f(x)])\n  \
             data.warden.f(2)\n  regex.match(`a(b\n nope( `, \"c\") # nope(\n  print(x)\n}\n",
        )
        .unwrap();
        // `set()` is the empty-set literal, not a call.
        check_one("package warden\nimport rego.v1\ndeny := set( ) if input.x\nask := set()\n")
            .unwrap();
        // An import of a package that is not loaded does not define it.
        let e = check_one("package warden\nimport data.lib\nx := lib.helper(1)\n").unwrap_err();
        assert!(e.contains("lib.helper"), "{e}");
    }

    #[test]
    fn unknown_calls_fail_with_the_line() {
        let e = check_one(
            "package warden\nimport rego.v1\n\ndeny contains \"x\" if { input.a; foo.bar(1) }\n",
        )
        .unwrap_err();
        assert!(e.contains("p.rego:4") && e.contains("foo.bar"), "{e}");
        let e = check_one("package warden\nx := strings.nope(\"a\")\n").unwrap_err();
        assert!(e.contains("strings.nope"), "{e}");
        // Only the empty `set()` is a literal.
        let e = check_one("package warden\nx := set(1)\n").unwrap_err();
        assert!(e.contains("`set`"), "{e}");
    }

    #[test]
    fn imports_and_other_packages_resolve() {
        check(&[
            Module {
                file: "lib.rego",
                package: "lib.util".into(),
                text: "package lib.util\nclean(x) := trim_space(x)\n",
            },
            Module {
                file: "p.rego",
                package: "warden".into(),
                text: "package warden\nimport data.lib.util\nimport data.lib.util as u2\n\
                       deny contains util.clean(\" a \") if true\nask contains u2.clean(\"b\") if true\n\
                       allow if data.lib.util.clean(\"c\") == \"c\"\n",
            },
        ])
        .unwrap();
    }

    #[test]
    fn decisions_only_in_a_package_something_reads() {
        let m = |file, package: &str, text| Module {
            file,
            package: package.into(),
            text,
        };
        let stray = "package wardn\ndefault allow := true\n";
        let main = "package warden\n# data.wardn is not read by a comment\ns := \"data.wardn\"\n";
        let err =
            unconsulted_decisions(&[m("w.rego", "warden", main), m("x.rego", "wardn", stray)])
                .unwrap_err();
        assert!(err.starts_with("x.rego:2: `allow`"), "{err}");
        // Read through an import, or by its full name: helpers, not errors.
        let imports = "package warden\nimport data.wardn\n";
        unconsulted_decisions(&[m("w.rego", "warden", imports), m("x.rego", "wardn", stray)])
            .unwrap();
        let reads = "package warden\ndeny contains m if some m in data.wardn.deny\n";
        unconsulted_decisions(&[m("w.rego", "warden", reads), m("x.rego", "wardn", stray)])
            .unwrap();
        // `data.wardnx` is another package.
        let other = "package warden\nx := data.wardnx.y\n";
        assert!(
            unconsulted_decisions(&[m("w.rego", "warden", other), m("x.rego", "wardn", stray)])
                .is_err()
        );
    }
}
