//! The URI a resource template's completion prepares: the template with
//! the argument being completed, and the context's known arguments, put in
//! (RFC 6570 operators and separators, values as given). A completion is
//! decided on this URI, not on the template's text, so a URI a rule
//! denies cannot be probed by completing towards it (CONTRACT §8).
//!
//! A variable with no value yet stays as written (`{host}`): what it will
//! be is unknown, and an empty expansion would make another URI than the
//! one being prepared.

/// `template` with each variable `values` knows put in.
pub fn fill_template<'v>(template: &str, values: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        let body = &rest[open + 1..open + len];
        match expand(body, &values) {
            Some(expanded) => out.push_str(&expanded),
            None => out.push_str(&rest[open..=open + len]),
        }
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The names of `template`'s variables (`{x*}`, `{x:3}`: `x`), read as
/// [`fill_template`] reads them.
pub fn variables(template: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            break;
        };
        let body = &rest[open + 1..open + len];
        let body = body
            .strip_prefix(['+', '#', '/', '.', ';', '?', '&'])
            .unwrap_or(body);
        for name in body.split(',') {
            let name = name.trim_end_matches('*');
            names.push(name.split(':').next().unwrap_or(name));
        }
        rest = &rest[open + len + 1..];
    }
    names
}

/// One expression's expansion, or `None` when none of its variables has a
/// value (it then stays as written).
fn expand<'v>(body: &str, values: &impl Fn(&str) -> Option<&'v str>) -> Option<String> {
    let (op, names) = match body.chars().next() {
        Some(c @ ('+' | '#' | '/' | '.' | ';' | '?' | '&')) => (Some(c), &body[1..]),
        _ => (None, body),
    };
    let (first, separator, named) = match op {
        None | Some('+') => ("", ",", false),
        Some('#') => ("#", ",", false),
        Some('/') => ("/", "/", false),
        Some('.') => (".", ".", false),
        Some(';') => (";", ";", true),
        Some('?') => ("?", "&", true),
        _ => ("&", "&", true),
    };
    let mut parts = Vec::new();
    for name in names.split(',') {
        // `{x*}`, `{x:3}`: the variable is `x`.
        let name = name.trim_end_matches('*');
        let name = name.split(':').next().unwrap_or(name);
        if let Some(value) = values(name) {
            parts.push(if named {
                format!("{name}={value}")
            } else {
                value.to_string()
            });
        }
    }
    (!parts.is_empty()).then(|| format!("{first}{}", parts.join(separator)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(template: &str, pairs: &[(&'static str, &'static str)]) -> String {
        fill_template(template, |n| {
            pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v)
        })
    }

    #[test]
    fn operators_and_unknown_variables() {
        assert_eq!(
            fill("vault://box/{name}", &[("name", "ke")]),
            "vault://box/ke"
        );
        assert_eq!(
            fill("vault://{host}/{name}", &[("name", "k")]),
            "vault://{host}/k"
        );
        assert_eq!(fill("x://a{/p,q}", &[("p", "b"), ("q", "c")]), "x://a/b/c");
        assert_eq!(fill("x://a{?p,q}", &[("q", "1")]), "x://a?q=1");
        assert_eq!(fill("x://a/{+rest}", &[("rest", "b/../c")]), "x://a/b/../c");
        assert_eq!(fill("x://a/{name", &[("name", "b")]), "x://a/{name");
    }

    #[test]
    fn variables_are_read_as_filled() {
        assert_eq!(
            variables("x://{host}/{+rest}{?p,q*}{;r:3}/{s"),
            ["host", "rest", "p", "q", "r"]
        );
        assert!(variables("x://plain").is_empty());
    }
}
