//! A bound on what parsing a Rego file costs.
//!
//! regorus parses `[` and `{` by trying a comprehension first and, when
//! that fails, parsing the same text again as an array, set or object:
//! each level of nesting doubles the work. `x := [[[[…]]]]` thirty deep
//! (sixty bytes) kept `warden policy check`, and every session that loads
//! the file, busy for hours; fifty rules twelve deep took half a minute.
//! A repository's `.mcp.json` may name a policy, so this is a denial of
//! service any repository could ship. Before regorus sees a file, its
//! cost is estimated (each `[` or `{` costs 2^depth, depth counting the
//! enclosing `[`/`{`; strings, raw strings and comments skipped) and a
//! file over [`MAX_PARSE_COST`] is refused, naming the line.

/// Largest estimated parse cost of one file: far above real policies
/// (warden's own are under 1,000) and about a second of parsing.
pub const MAX_PARSE_COST: u64 = 1 << 15;

/// Refuses `text` when parsing it would cost more than [`MAX_PARSE_COST`].
pub fn check(file: &str, text: &str) -> Result<(), String> {
    let mut cost: u64 = 0;
    let mut depth: u32 = 0;
    let mut line = 1usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '`' => {
                for c in chars.by_ref() {
                    match c {
                        '`' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                cost = cost.saturating_add(1u64.checked_shl(depth).unwrap_or(u64::MAX));
                if cost > MAX_PARSE_COST {
                    return Err(format!(
                        "{file}:{line}: brackets nested too deeply to parse in bounded time \
                         (nesting {depth} deep here; regorus's parser doubles its work with each \
                         level of `[`/`{{`, and this file would cost over {MAX_PARSE_COST} units): \
                         flatten the expression, e.g. with helper rules"
                    ));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warden_policies_are_far_below_the_bound() {
        for (name, text) in [
            ("default", crate::rego::DEFAULT_REGO),
            ("default_test", crate::rego::DEFAULT_TEST_REGO),
            ("ci", crate::rego::CI_REGO),
            ("ci_test", crate::rego::CI_TEST_REGO),
        ] {
            check(name, text).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn deep_or_repeated_nesting_is_refused_with_its_line() {
        let deep = format!("package p\nx := {}{}\n", "[".repeat(30), "]".repeat(30));
        let err = check("deep.rego", &deep).unwrap_err();
        assert!(err.starts_with("deep.rego:2:"), "{err}");
        let many: String = (0..50)
            .map(|i| format!("x{i} := {}{}\n", "{".repeat(12), "}".repeat(12)))
            .collect();
        assert!(check("many.rego", &many).is_err());
        // Brackets inside strings, raw strings and comments cost nothing.
        let quoted = format!("x := \"{0}\"\ny := `{0}`\n# {0}\n", "[".repeat(40));
        check("quoted.rego", &quoted).unwrap();
        // Ordinary nesting is fine.
        check("ok.rego", "x := {\"a\": [{\"b\": [1, {2}]}]}\n").unwrap();
    }
}
