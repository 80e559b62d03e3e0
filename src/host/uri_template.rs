//! Whether a URI could have come from an RFC 6570 URI template (as MCP's
//! `resources/templates/list` gives them): used only to find which server
//! owns a resource URI (CONTRACT §8), never to decide a request.
//!
//! Literal text must match exactly; an expression matches one or more
//! characters: `{x}` (simple) none of `/?#`, `{+x}` / `{#x}` anything,
//! `{/x}`, `{.x}`, `{;x}`, `{?x}`, `{&x}` anything starting with their
//! operator. Matching is bounded: at most [`MAX_PARTS`] parts, and a URI
//! longer than [`MAX_URI`] bytes matches nothing.

/// Templates with more parts than this match nothing.
const MAX_PARTS: usize = 32;
/// URIs longer than this match no template.
const MAX_URI: usize = 4096;

#[derive(Debug, PartialEq)]
enum Part<'a> {
    Literal(&'a str),
    /// An expression; `Some(op)` for an operator that must start the value.
    Expr {
        op: Option<char>,
        reserved: bool,
    },
}

fn parse(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let body = &rest[1..end];
                let first = body.chars().next()?;
                let part = match first {
                    '+' | '#' => Part::Expr {
                        op: (first == '#').then_some('#'),
                        reserved: true,
                    },
                    '/' | '.' | ';' | '?' | '&' => Part::Expr {
                        op: Some(first),
                        reserved: true,
                    },
                    _ => Part::Expr {
                        op: None,
                        reserved: false,
                    },
                };
                parts.push(part);
                rest = &rest[end + 1..];
            }
            Some(i) => {
                parts.push(Part::Literal(&rest[..i]));
                rest = &rest[i..];
            }
            None => {
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    (parts.len() <= MAX_PARTS).then_some(parts)
}

/// Whether `uri` matches `template`.
pub(super) fn matches(template: &str, uri: &str) -> bool {
    if uri.len() > MAX_URI {
        return false;
    }
    parse(template).is_some_and(|parts| match_parts(&parts, uri))
}

/// A linear pass per part over the set of positions reachable so far
/// (no backtracking: a template cannot make matching slow).
fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let n = bytes.len();
    let mut reach = vec![false; n + 1];
    reach[0] = true;
    for part in parts {
        let mut next = vec![false; n + 1];
        match part {
            Part::Literal(text) => {
                for (pos, _) in reach.iter().enumerate().filter(|(_, r)| **r) {
                    if uri[pos..].starts_with(text) {
                        next[pos + text.len()] = true;
                    }
                }
            }
            Part::Expr { op, reserved } => {
                // `open`: an expression started at or before `i` can
                // still take the character at `i`.
                let mut open = false;
                for i in 0..n {
                    if reach[i]
                        && uri.is_char_boundary(i)
                        && op.is_none_or(|op| uri[i..].starts_with(op))
                    {
                        open = true;
                    }
                    if !*reserved && matches!(bytes[i], b'/' | b'?' | b'#') {
                        open = false;
                    }
                    if open && uri.is_char_boundary(i + 1) {
                        next[i + 1] = true;
                    }
                }
            }
        }
        if !next.iter().any(|r| *r) {
            return false;
        }
        reach = next;
    }
    reach[n]
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn simple_expressions_match_one_segment() {
        assert!(matches("test://notes/{id}", "test://notes/1"));
        assert!(!matches("test://notes/{id}", "test://notes/1/2"));
        assert!(!matches("test://notes/{id}", "test://notes/"));
        assert!(!matches("test://notes/{id}", "test://other/1"));
        assert!(matches("users://{u}/profile", "users://ada/profile"));
    }

    #[test]
    fn reserved_expressions_match_paths() {
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("x://a{/p}", "x://a/b"));
        assert!(!matches("x://a{/p}", "x://ab"));
        assert!(matches("x://s{?q,r}", "x://s?q=1&r=2"));
    }

    #[test]
    fn literals_must_match_exactly() {
        assert!(matches("mem://static", "mem://static"));
        assert!(!matches("mem://static", "mem://static2"));
        assert!(!matches("mem://{", "mem://x"));
    }
}
