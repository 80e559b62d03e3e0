//! Rego builtins that can allocate without bound from small arguments,
//! made bounded.
//!
//! regorus checks its execution timer between evaluation steps, never
//! inside one builtin: `numbers.range(1, 2e8)` ran 15 s and took 4.7 GB
//! inside one step. Two defences:
//!
//! - at load (`warden policy check`, and every start), [`check_source`]
//!   refuses calls whose literal arguments already exceed a cap
//!   (`numbers.range(1, 2e8)`, a `sprintf` width of `%900000000d`, a
//!   `bits.lsh` by a literal over 64) and `graph.reachable_paths`
//!   (exponentially many paths), naming the file and line;
//! - at evaluation, [`install`] replaces `numbers.range`,
//!   `numbers.range_step`, `bits.lsh`, `replace`, `strings.replace_n` and
//!   `graph.reachable_paths` with versions that compute the size of the
//!   result first and fail (so the call is denied) beyond a cap. regorus
//!   looks extensions up before builtins, so a policy cannot reach the
//!   unbounded originals.
//!
//! What stays: a policy can still build large collections step by step
//! (comprehensions over ranges); the 2 s timer stops those, and the
//! evaluation deadline of the pipeline abandons anything that outlives it.

use regorus::{Engine, Value};

/// Most elements a `numbers.range`/`numbers.range_step` may produce.
pub const MAX_RANGE: u64 = 100_000;
/// Largest `sprintf` width accepted in a literal format.
pub const MAX_WIDTH: u64 = 10_000;
/// Largest string `replace`/`strings.replace_n` may produce.
pub const MAX_STRING_BYTES: usize = 64 << 20;

/// Replaces the unbounded builtins with bounded extensions.
pub fn install(engine: &mut Engine) -> Result<(), String> {
    let add = |engine: &mut Engine, name: &str, nargs: u8, f: Box<dyn regorus::Extension>| {
        engine
            .add_extension(name.to_string(), nargs, f)
            .map_err(|e| format!("{name}: {e}"))
    };
    add(
        engine,
        "numbers.range",
        2,
        Box::new(|args: Vec<Value>| range(&args, None)),
    )?;
    add(
        engine,
        "numbers.range_step",
        3,
        Box::new(|args: Vec<Value>| {
            let step = args.get(2).and_then(|v| v.as_i64().ok());
            match step {
                Some(s) if s > 0 => range(&args, Some(s)),
                _ => anyhow::bail!("numbers.range_step: step must be a positive integer"),
            }
        }),
    )?;
    add(
        engine,
        "bits.lsh",
        2,
        Box::new(|args: Vec<Value>| lsh(&args)),
    )?;
    add(
        engine,
        "replace",
        3,
        Box::new(|args: Vec<Value>| replace(&args)),
    )?;
    add(
        engine,
        "strings.replace_n",
        2,
        Box::new(|args: Vec<Value>| replace_n(&args)),
    )?;
    add(
        engine,
        "graph.reachable_paths",
        2,
        Box::new(|_args: Vec<Value>| -> anyhow::Result<Value> {
            anyhow::bail!(
                "graph.reachable_paths is not available in warden: it can return \
                 exponentially many paths; use graph.reachable"
            )
        }),
    )?;
    Ok(())
}

fn int(args: &[Value], i: usize, name: &str) -> anyhow::Result<i64> {
    args.get(i)
        .and_then(|v| v.as_i64().ok())
        .ok_or_else(|| anyhow::anyhow!("{name}: operand {} must be an integer", i + 1))
}

/// `numbers.range(a, b)` (both ends included, counting down when `b < a`)
/// and `numbers.range_step(a, b, step)` (towards `b`, not past it).
fn range(args: &[Value], step: Option<i64>) -> anyhow::Result<Value> {
    let name = if step.is_some() {
        "numbers.range_step"
    } else {
        "numbers.range"
    };
    let (a, b) = (int(args, 0, name)?, int(args, 1, name)?);
    let span = (i128::from(b) - i128::from(a)).unsigned_abs();
    let step_abs = step.map_or(1, i64::unsigned_abs);
    let count = span / u128::from(step_abs) + 1;
    if count > u128::from(MAX_RANGE) {
        anyhow::bail!(
            "{name}({a}, {b}) would produce {count} numbers; warden allows at most {MAX_RANGE} \
             (the builtin cannot be interrupted)"
        );
    }
    let dir: i128 = if b >= a { 1 } else { -1 };
    let step = i128::from(step_abs) * dir;
    let mut out = Vec::new();
    let mut v = i128::from(a);
    while (dir > 0 && v <= i128::from(b)) || (dir < 0 && v >= i128::from(b)) {
        // `v` lies between `a` and `b`, so it fits an i64.
        out.push(Value::from(i64::try_from(v).unwrap_or(i64::MAX)));
        v += step;
    }
    Ok(Value::from(out))
}

fn lsh(args: &[Value]) -> anyhow::Result<Value> {
    let (x, s) = (int(args, 0, "bits.lsh")?, int(args, 1, "bits.lsh")?);
    let shifted = u32::try_from(s)
        .ok()
        .filter(|s| *s < 64)
        .and_then(|s| i64::checked_mul(x, 1i64.checked_shl(s)?))
        .ok_or_else(|| {
            anyhow::anyhow!("bits.lsh({x}, {s}): warden computes shifts within 64-bit integers")
        })?;
    Ok(Value::from(shifted))
}

fn string<'a>(args: &'a [Value], i: usize, name: &str) -> anyhow::Result<&'a str> {
    args.get(i)
        .and_then(|v| v.as_string().ok())
        .map(|s| s.as_ref())
        .ok_or_else(|| anyhow::anyhow!("{name}: operand {} must be a string", i + 1))
}

/// Size of `s.replace(old, new)` without computing it.
fn replaced_len(s: &str, old: &str, new: &str) -> usize {
    let count = if old.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(old).count()
    };
    s.len()
        .saturating_sub(count.saturating_mul(old.len()))
        .saturating_add(count.saturating_mul(new.len()))
}

fn check_len(name: &str, len: usize) -> anyhow::Result<()> {
    if len > MAX_STRING_BYTES {
        anyhow::bail!(
            "{name} would produce {len} bytes; warden allows at most {} MiB",
            MAX_STRING_BYTES >> 20
        );
    }
    Ok(())
}

fn replace(args: &[Value]) -> anyhow::Result<Value> {
    let (s, old, new) = (
        string(args, 0, "replace")?,
        string(args, 1, "replace")?,
        string(args, 2, "replace")?,
    );
    check_len("replace", replaced_len(s, old, new))?;
    Ok(Value::from(s.replace(old, new)))
}

/// As regorus does it: each (pattern, replacement) in key order, in turn.
fn replace_n(args: &[Value]) -> anyhow::Result<Value> {
    let name = "strings.replace_n";
    let patterns = args
        .first()
        .and_then(|v| v.as_object().ok())
        .ok_or_else(|| anyhow::anyhow!("{name}: operand 1 must be an object"))?;
    let mut s = string(args, 1, name)?.to_string();
    for (k, v) in patterns.iter_sorted() {
        let (Ok(k), Ok(v)) = (k.as_string(), v.as_string()) else {
            anyhow::bail!("{name} expects string keys and values in pattern object.");
        };
        check_len(name, replaced_len(&s, k, v))?;
        s = s.replace(k.as_ref(), v.as_ref());
    }
    Ok(Value::from(s))
}

/// Refuses calls whose literal arguments already exceed a cap, and
/// builtins warden does not offer; names the file and line.
pub fn check_source(file: &str, text: &str) -> Result<(), String> {
    crate::parse_cost::check(file, text)?;
    for (i, line) in text.lines().enumerate() {
        let code = strip_comment(line);
        let at = |msg: String| format!("{file}:{}: {msg}\n    {}", i + 1, line.trim());
        if code.contains("graph.reachable_paths") {
            return Err(at(
                "graph.reachable_paths is not available in warden: it can return exponentially \
                 many paths; use graph.reachable"
                    .into(),
            ));
        }
        for (call, nargs) in [("numbers.range_step(", 3), ("numbers.range(", 2)] {
            for args in literal_calls(&code, call, nargs) {
                let step = if nargs == 3 {
                    args[2].abs().max(1.0)
                } else {
                    1.0
                };
                let count = ((args[1] - args[0]).abs() / step).floor() + 1.0;
                if count > MAX_RANGE as f64 {
                    return Err(at(format!(
                        "{}…) would produce {count} numbers; warden allows at most {MAX_RANGE}, \
                         because a builtin cannot be interrupted while it runs",
                        call
                    )));
                }
            }
        }
        for args in literal_calls(&code, "bits.lsh(", 2) {
            if args[1] > 63.0 {
                return Err(at(format!(
                    "bits.lsh by {} bits: warden computes shifts within 64-bit integers",
                    args[1]
                )));
            }
        }
        if let Some(width) = sprintf_width(&code)
            && width > MAX_WIDTH
        {
            return Err(at(format!(
                "sprintf width {width} is over warden's limit of {MAX_WIDTH}"
            )));
        }
    }
    Ok(())
}

/// `line` without a `#` comment (a `#` inside a string stays).
fn strip_comment(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
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
                }
            }
            None if c == '#' => break,
            None if c == '"' || c == '`' => quote = Some(c),
            None => {}
        }
        out.push(c);
    }
    out
}

/// The numeric arguments of every `call` in `code` whose `nargs` arguments
/// are all number literals.
fn literal_calls(code: &str, call: &str, nargs: usize) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(call) {
        let after = &rest[i + call.len()..];
        let inner = after.split(')').next().unwrap_or("");
        let args: Vec<f64> = inner
            .split(',')
            .filter_map(|a| a.trim().parse::<f64>().ok())
            .collect();
        if args.len() == nargs && inner.split(',').count() == nargs {
            out.push(args);
        }
        rest = after;
    }
    out
}

/// The largest width in a literal `sprintf` format on this line.
fn sprintf_width(code: &str) -> Option<u64> {
    let mut widest = None;
    let mut rest = code;
    while let Some(i) = rest.find("sprintf(") {
        let after = &rest[i + "sprintf(".len()..];
        let format = after.trim_start();
        let quote = format.chars().next();
        if let Some(q @ ('"' | '`')) = quote {
            let body = &format[1..];
            let body = body.split(q).next().unwrap_or("");
            let mut chars = body.chars().peekable();
            while let Some(c) = chars.next() {
                if c != '%' {
                    continue;
                }
                let mut digits = String::new();
                while let Some(d) = chars
                    .peek()
                    .copied()
                    .filter(|d| d.is_ascii_digit() || *d == '.')
                {
                    digits.push(d);
                    chars.next();
                }
                let width = digits
                    .split('.')
                    .filter_map(|d| {
                        d.parse::<u64>()
                            .ok()
                            .or((!d.is_empty()).then_some(u64::MAX))
                    })
                    .max();
                widest = widest.max(width);
            }
        }
        rest = after;
    }
    widest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(policy: &str, rule: &str) -> anyhow::Result<Value> {
        let mut engine = Engine::new();
        install(&mut engine).map_err(anyhow::Error::msg)?;
        engine.add_policy("p.rego".into(), policy.into())?;
        engine.eval_rule(rule.into())
    }

    #[test]
    fn literal_caps_are_refused_at_load() {
        for bad in [
            "x := numbers.range(1, 2e8)",
            "x := numbers.range(1, 200000000)",
            "x := numbers.range_step(0, 1e9, 2)",
            "x := sprintf(\"%900000000d\", [1])",
            "x := sprintf(\"%.99999999999999999999f\", [1])",
            "x := bits.lsh(1, 100000)",
            "x := graph.reachable_paths(g, s)",
        ] {
            let e = check_source("p.rego", &format!("package p\n{bad}\n")).unwrap_err();
            assert!(e.contains("p.rego:2"), "{e}");
        }
        check_source(
            "p.rego",
            "package p\nx := numbers.range(1, 10) # numbers.range(1, 2e8)\ny := sprintf(\"%05d %s\", [1, \"#\"])\n",
        )
        .unwrap();
    }

    #[test]
    fn bounded_versions_agree_with_the_builtins() {
        let p = "package p\nimport rego.v1\nup := numbers.range(1, 4)\ndown := numbers.range(3, 1)\n\
                 step := numbers.range_step(10, 1, 3)\nsh := bits.lsh(3, 4)\nr := replace(\"aXbX\", \"X\", \"--\")\n\
                 rn := strings.replace_n({\"a\": \"b\", \"b\": \"c\"}, \"ab\")\n";
        let v = |r: &str| {
            let json = eval(p, &format!("data.p.{r}"))
                .unwrap()
                .to_json_str()
                .unwrap();
            serde_json::from_str::<serde_json::Value>(&json)
                .unwrap()
                .to_string()
        };
        assert_eq!(v("up"), "[1,2,3,4]");
        assert_eq!(v("down"), "[3,2,1]");
        assert_eq!(v("step"), "[10,7,4,1]");
        assert_eq!(v("sh"), "48");
        assert_eq!(v("r"), "\"a--b--\"");
        assert_eq!(v("rn"), "\"cc\"");
    }

    #[test]
    fn input_driven_sizes_fail_instead_of_allocating() {
        let mut engine = Engine::new();
        install(&mut engine).unwrap();
        engine
            .add_policy(
                "p.rego".into(),
                "package p\nimport rego.v1\nn := count(numbers.range(1, input.n))\n\
                 s := replace(input.s, \"\", input.s)\n"
                    .into(),
            )
            .unwrap();
        engine.set_input(Value::from_json_str(r#"{"n": 200000000, "s": "x"}"#).unwrap());
        let started = std::time::Instant::now();
        assert!(engine.eval_rule("data.p.n".into()).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let big = "y".repeat(20_000);
        engine.set_input(Value::from_json_str(&format!(r#"{{"n": 1, "s": "{big}"}}"#)).unwrap());
        assert!(engine.eval_rule("data.p.s".into()).is_err());
    }
}
