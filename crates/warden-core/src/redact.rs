//! Credentials in URLs, masked wherever a URL can be printed (errors, logs,
//! `mcp status`, audit records). One helper, so every layer hides the same
//! parts.
//!
//! What is masked, and why: the userinfo (`https://user:token@host/`), every
//! query value (`?token=…`, `?key=…`; the names stay, the values could be
//! credentials and warden cannot tell which are) and the fragment (OAuth
//! implicit grants put tokens there). Scheme, host, port and path stay, so
//! a message still says which server failed. A token in the path itself
//! (`https://hooks.example/services/T0/SECRET`) cannot be told from a path
//! and is not masked: put such URLs in `headers` or an environment
//! variable the config references (`${VAR}` values are secrets).

use std::borrow::Cow;

/// What replaces a masked part.
pub const MASK: &str = "[REDACTED]";

/// `url` with its userinfo, query values and fragment masked. A string
/// without `scheme://` is returned unchanged.
pub fn url(url: &str) -> Cow<'_, str> {
    let Some(sep) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    if !is_scheme(&url[..sep]) {
        return Cow::Borrowed(url);
    }
    let after = sep + 3;
    let rest = &url[after..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let tail = &rest[authority_end..];
    let (path, query, fragment) = split_tail(tail);
    let userinfo = authority.rfind('@');
    if userinfo.is_none() && query.is_none() && fragment.is_none_or(str::is_empty) {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len() + 16);
    out.push_str(&url[..after]);
    match userinfo {
        Some(at) => {
            out.push_str(MASK);
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((name, _)) => {
                    out.push_str(name);
                    out.push('=');
                    out.push_str(MASK);
                }
                // A bare `?abcdef` may be a token by itself.
                None if pair.is_empty() => {}
                None => out.push_str(MASK),
            }
        }
    }
    if let Some(fragment) = fragment
        && !fragment.is_empty()
    {
        out.push('#');
        out.push_str(MASK);
    }
    Cow::Owned(out)
}

/// `(path, query, fragment)` of what follows a URL's authority.
fn split_tail(tail: &str) -> (&str, Option<&str>, Option<&str>) {
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query), fragment),
        None => (before_fragment, None, fragment),
    }
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Every `scheme://…` URL inside `text` passed through [`url`]. A URL ends
/// at whitespace, a quote or `<>`; trailing `.,;:!` and a `)` or `]` that
/// closes a bracket opened before the URL are not part of it
/// (`… (http://h/?t=x): refused`).
pub fn urls_in(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("://") {
        let sep = search + found;
        // Walk back over the scheme.
        let start = text[..sep]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(sep, |(i, _)| i);
        // A scheme starts with a letter.
        let start = text[start..sep]
            .char_indices()
            .find(|(_, c)| c.is_ascii_alphabetic())
            .map_or(sep, |(i, _)| start + i);
        let mut end = text[sep..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .map_or(text.len(), |i| sep + i);
        // Trailing punctuation that closes a bracket opened before the URL.
        while end > sep + 3 {
            let last = text[..end].chars().next_back().unwrap_or(' ');
            let opener = match last {
                ')' => Some('('),
                ']' => Some('['),
                '.' | ',' | ';' | ':' | '!' => None,
                _ => break,
            };
            if opener.is_some_and(|o| text[start..end].contains(o)) {
                break;
            }
            end -= last.len_utf8();
        }
        if start < sep {
            out.push_str(&text[copied..start]);
            out.push_str(&url(&text[start..end]));
            copied = end;
        }
        search = end.max(sep + 3);
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_userinfo_query_values_and_fragment() {
        assert_eq!(
            url("https://user:tok@example.com:8443/mcp?token=abc&x=1#frag"),
            "https://[REDACTED]@example.com:8443/mcp?token=[REDACTED]&x=[REDACTED]#[REDACTED]"
        );
        assert_eq!(url("http://h/p?abcdef"), "http://h/p?[REDACTED]");
        assert_eq!(url("http://a@b@host/"), "http://[REDACTED]@host/");
    }

    #[test]
    fn leaves_plain_urls_and_non_urls_alone() {
        assert!(matches!(url("https://example.com/mcp"), Cow::Borrowed(_)));
        assert!(matches!(url("/etc/passwd"), Cow::Borrowed(_)));
        assert!(matches!(url("1://x?y=z"), Cow::Borrowed(_)));
    }

    #[test]
    fn finds_urls_inside_text() {
        assert_eq!(
            urls_in("error sending request for url (http://127.0.0.1:9/mcp?token=s3cret): refused"),
            "error sending request for url (http://127.0.0.1:9/mcp?token=[REDACTED]): refused"
        );
        assert_eq!(
            urls_in("a https://u:p@h/x and \"wss://h/?k=v\" b"),
            "a https://[REDACTED]@h/x and \"wss://h/?k=[REDACTED]\" b"
        );
        assert_eq!(urls_in("no urls here: a://"), "no urls here: a://");
        assert!(matches!(urls_in("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn never_panics_on_odd_text() {
        for s in [
            "://",
            "a://",
            "://x?y",
            "é://x?t=1",
            "x é://h?t=1",
            "(http://h?t=1))",
            "http://",
        ] {
            let _ = urls_in(s);
            let _ = url(s);
        }
    }
}
