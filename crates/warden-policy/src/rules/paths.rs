//! How a path-like argument value is normalised before a path pattern
//! matches it.

use std::path::Path;

/// Lexical normalisation with [`warden_core::path::normalize`]: relative
/// paths are joined to `workspace`; `.`, `..` and empty segments are
/// resolved; `..` at the root stays at the root. A value starting with `~`
/// keeps its `~` root (warden cannot know which home directory a server
/// expands it to), so it never matches an absolute allow pattern; `..`
/// never climbs above that `~` either.
///
/// URIs: a `file:` URI is decoded (`%XX`) and normalised as the absolute
/// path it names; a value with any other scheme (`https:`, `s3:`, also
/// `C:`) is kept as written, so it never matches an absolute pattern.
pub(super) fn normalize_path(value: &str, workspace: &str) -> String {
    if let Some((scheme, rest)) = split_scheme(value) {
        if !scheme.eq_ignore_ascii_case("file") {
            return value.to_string();
        }
        // file:///p, file://localhost/p, file:/p
        let path = rest
            .strip_prefix("//")
            .map(|r| r.find('/').map_or("/", |i| &r[i..]))
            .unwrap_or(rest);
        return rooted(&percent_decode(path));
    }
    if value.starts_with('~') {
        let (head, tail) = value.split_once('/').unwrap_or((value, ""));
        // `~` acts as the root: `~/..` is `~`.
        let tail = rooted(tail);
        return format!("{head}{}", tail.trim_end_matches('/'));
    }
    let base = Path::new(workspace);
    warden_core::path::absolutize(&Path::new("/").join(base), Path::new(value))
        .to_string_lossy()
        .into_owned()
}

/// `path` taken from `/` (absolute or not) and normalised.
fn rooted(path: &str) -> String {
    warden_core::path::normalize(&Path::new("/").join(path))
        .to_string_lossy()
        .into_owned()
}

/// `scheme:rest` when `value` starts with an RFC 3986 scheme.
fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let colon = value.find(':')?;
    let scheme = &value[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| (scheme, &value[colon + 1..]))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_paths() {
        assert_eq!(normalize_path("/w/../x", "/w"), "/x");
        assert_eq!(normalize_path("a/./b//c", "/w"), "/w/a/b/c");
        assert_eq!(normalize_path("../../..", "/w"), "/");
        assert_eq!(normalize_path("~/a/../.ssh/k", "/w"), "~/.ssh/k");
        assert_eq!(normalize_path("~/../../x", "/w"), "~/x");
        assert_eq!(normalize_path("~", "/w"), "~");
        assert_eq!(normalize_path("", "/w"), "/w");
        assert_eq!(normalize_path("...", "/w"), "/w/...");
        assert_eq!(
            normalize_path("file:///w/../etc/passwd", "/w"),
            "/etc/passwd"
        );
        assert_eq!(normalize_path("file://localhost/w/%2e%2e/x", "/w"), "/x");
        assert_eq!(normalize_path("file:/w/a", "/w"), "/w/a");
        assert_eq!(normalize_path("https://h/w/a", "/w"), "https://h/w/a");
        assert_eq!(normalize_path("C:\\x", "/w"), "C:\\x");
    }
}
