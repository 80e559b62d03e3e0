//! The places Python's HTTP clients connect to for a string, where they
//! read it otherwise than the WHATWG parser warden reads URLs with
//! ([`url::Url`]). A host rule (`deny` `http://127.0.0.1:*/**`, `allow`
//! `https://api.example.com/**`) must hold for the host the *server's*
//! library reaches; each reading here was checked against the library
//! itself (a real fetch from a loopback server, `tests/url_hosts_e2e.rs`):
//!
//! - `urllib.request.urlopen` (the standard library): strips whitespace
//!   at both ends as `str.strip()` does (Unicode spaces, `\x1c`–`\x1f`),
//!   unwraps `<URL:…>` and `URL:…`, cuts the fragment at the *last* `#`,
//!   takes the host up to the first `/`, `?` or `#` (a `\` is part of it)
//!   and percent-decodes it *before* it looks for the port, so
//!   `http://127.0.0.1%3a8080/` reaches `127.0.0.1:8080` (WHATWG refuses
//!   it). The port is Python's `int()`: `+8080`, ` 8080`, `80_80`. A
//!   `user@` stays in the host (the lookup of `user@host` fails), and a
//!   non-ASCII host is encoded with Python's IDNA 2003 codec: nameprep
//!   maps `ß` to `ss` and drops U+200B–U+200D, where WHATWG (UTS 46)
//!   keeps `ß` and refuses a joiner.
//! - `httpx` (and its successor `httpx2`): no stripping; the authority
//!   runs up to the first `/`, `?` or `#`, so in
//!   `http://evil.example\@127.0.0.1:8080/` the user is `evil.example\`
//!   and the host `127.0.0.1` (WHATWG reads `\` as `/`: host
//!   `evil.example`); the host ends at the first `:`, and the port is
//!   Python's `int()` again (fullwidth digits included).
//! - `requests` (urllib3, read from its source: it is not in the test
//!   environment): strips leading whitespace (`str.lstrip()`), then reads
//!   the rest as RFC 3986 does, which for the host is WHATWG's reading.
//!
//! Each reading is a URL in [`url::Url`]'s serialisation, so rule patterns
//! and the loopback spellings of `canon` apply to it as to any URI.

/// Python's `str.isspace()`: Unicode White_Space plus the information
/// separators `\x1c`–`\x1f`, which `str.strip()` removes too.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// The code points that are the digit zero of a Unicode decimal digit run
/// (general category Nd; each run is ten consecutive code points), as
/// Python's `int()` accepts them. From Python 3.11's `unicodedata`.
const DIGIT_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

fn decimal(c: char) -> Option<u32> {
    let c = c as u32;
    DIGIT_ZEROS
        .iter()
        .find(|&&zero| (zero..zero + 10).contains(&c))
        .map(|zero| c - zero)
}

/// A port as Python's `int()` reads it (whitespace at the ends, a `+`,
/// single `_` between digits, any Unicode decimal digits), when it is one
/// a connection can use.
fn py_port(text: &str) -> Option<u16> {
    let t = text.trim_matches(py_space);
    let t = t.strip_prefix('+').unwrap_or(t);
    let mut value: u32 = 0;
    let mut after_digit = false;
    for c in t.chars() {
        if c == '_' && after_digit {
            after_digit = false;
            continue;
        }
        let d = decimal(c)?;
        value = value * 10 + d;
        if value > u32::from(u16::MAX) {
            return None;
        }
        after_digit = true;
    }
    after_digit.then(|| u16::try_from(value).ok()).flatten()
}

/// `%XX` decoded as `urllib.parse.unquote` does (UTF-8, invalid bytes
/// replaced).
fn unquote(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |x: u8| (x as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What `scheme:` a client fetches over the network with: `http`/`https`.
fn web_scheme(scheme: &str) -> Option<&'static str> {
    if scheme.eq_ignore_ascii_case("http") {
        Some("http")
    } else if scheme.eq_ignore_ascii_case("https") {
        Some("https")
    } else {
        None
    }
}

/// A place a client connects to, with the request target it sends.
struct Reached {
    scheme: &'static str,
    host: String,
    port: Option<u16>,
    target: String,
}

impl Reached {
    /// As a URL in [`url::Url`]'s serialisation (the request target kept
    /// when it parses, else `/`).
    fn url(&self) -> Option<url::Url> {
        if self.host.is_empty() {
            return None;
        }
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        let target = if self.target.starts_with('/') {
            self.target.as_str()
        } else {
            "/"
        };
        url::Url::parse(&format!("{}://{host}{port}{target}", self.scheme))
            .or_else(|_| url::Url::parse(&format!("{}://{host}{port}/", self.scheme)))
            .ok()
    }
}

/// `urllib.request.urlopen(raw)`: `Request.full_url`, `_splittype`,
/// `_splithost`, `unquote`, then `http.client`'s `_get_hostport`.
fn urllib(raw: &str) -> Option<Reached> {
    let mut s = raw.trim_matches(py_space);
    if let Some(inner) = s.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
        s = inner.trim_matches(py_space);
    }
    if let Some(inner) = s.strip_prefix("URL:") {
        s = inner.trim_matches(py_space);
    }
    let s = s.rsplit_once('#').map_or(s, |(before, _)| before);
    let (scheme, rest) = s.split_once(':')?;
    if scheme.contains('/') {
        return None;
    }
    let scheme = web_scheme(scheme)?;
    let rest = rest.strip_prefix("//")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(end);
    let mut host = unquote(authority);
    let mut port = None;
    let colon = host.rfind(':');
    if let Some(i) = colon
        && host.rfind(']').is_none_or(|j| i > j)
    {
        let text = &host[i + 1..];
        if !text.is_empty() {
            port = Some(py_port(text)?);
        }
        host.truncate(i);
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        host = inner.to_string();
    }
    // `http.client` refuses a host with a control character or a space.
    if host.chars().any(|c| c <= ' ' || c == '\x7f') {
        return None;
    }
    Some(Reached {
        scheme,
        host: idna2003(&host),
        port,
        target: target.to_string(),
    })
}

/// `httpx.URL(raw)` (`httpx._urlparse`): `URL_REGEX`, then
/// `AUTHORITY_REGEX` (the user up to the last `@`, the host up to the
/// first `:` or a bracketed address, the rest the port).
fn httpx(raw: &str) -> Option<Reached> {
    if raw.chars().any(|c| c.is_ascii_control()) {
        return None;
    }
    let (scheme, rest) = crate::canon::split_scheme(raw)?;
    let scheme = web_scheme(scheme)?;
    let rest = rest.strip_prefix("//")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(end);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port_text) = if host_port.starts_with('[') {
        let close = host_port.rfind(']')?;
        let (h, p) = host_port.split_at(close + 1);
        (&h[1..h.len() - 1], p.strip_prefix(':').unwrap_or(p))
    } else {
        match host_port.split_once(':') {
            Some((h, p)) => (h, p),
            None => (host_port, ""),
        }
    };
    let port = if port_text.is_empty() {
        None
    } else {
        Some(py_port(port_text)?)
    };
    Some(Reached {
        scheme,
        host: host.to_lowercase(),
        port,
        target: target.to_string(),
    })
}

/// `requests.get(raw)`: `str.lstrip()`, then urllib3's RFC 3986 reading,
/// whose host is WHATWG's (a `\` ends the authority there too).
fn requests(raw: &str) -> Option<url::Url> {
    let stripped = raw.trim_start_matches(py_space);
    if stripped.len() == raw.len() {
        return None;
    }
    let (scheme, _) = crate::canon::split_scheme(stripped)?;
    web_scheme(scheme)?;
    url::Url::parse(stripped).ok()
}

/// The labels of a non-ASCII host as Python's `idna` codec encodes them
/// (IDNA 2003): each label with a non-ASCII character nameprepped (RFC
/// 3491: table B.1 mapped to nothing, case folded, NFKC), ASCII labels as
/// they are. What remains non-ASCII is left to the URL parser's own IDNA.
fn idna2003(host: &str) -> String {
    if host.is_ascii() {
        return host.to_string();
    }
    host.split(['.', '\u{3002}', '\u{ff0e}', '\u{ff61}'])
        .map(|label| {
            if label.is_ascii() {
                label.to_string()
            } else {
                nameprep(label)
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// RFC 3454 table B.1: code points nameprep maps to nothing.
fn mapped_to_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{1806}'
            | '\u{180b}'..='\u{180d}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
    )
}

/// Nameprep's mapping (close to Python's `encodings.idna.nameprep`:
/// table B.2 is case folding with NFKC, whose full folds include
/// `ß` → `ss`, which `char::to_lowercase` keeps).
fn nameprep(label: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let folded: String = label
        .chars()
        .filter(|&c| !mapped_to_nothing(c))
        .flat_map(|c| match c {
            'ß' | 'ẞ' => "ss".chars().collect::<Vec<_>>(),
            'ς' => vec!['σ'],
            c => c.to_lowercase().collect(),
        })
        .collect();
    let nfkc: String = folded.nfkc().collect();
    nfkc.to_lowercase().nfkc().collect()
}

/// Every place one of the Python clients above connects to for `raw`, as
/// URLs; empty when none reads it as an `http`/`https` URL.
pub(crate) fn reached(raw: &str) -> Vec<url::Url> {
    let mut out: Vec<url::Url> = Vec::new();
    let found = [urllib(raw), httpx(raw)]
        .into_iter()
        .flatten()
        .filter_map(|r| r.url())
        .chain(requests(raw));
    for u in found {
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(raw: &str) -> Vec<String> {
        reached(raw)
            .iter()
            .map(|u| {
                format!(
                    "{}:{}",
                    u.host_str().unwrap_or(""),
                    u.port_or_known_default().unwrap_or(0)
                )
            })
            .collect()
    }

    /// Each row was fetched from a loopback server with Python 3.11's
    /// `urlopen` and with httpx2 (the `PAGE` column of the probe in the
    /// commit that added this file): where either library reached
    /// `127.0.0.1:8080`, that place is here.
    #[test]
    fn the_places_python_clients_reach() {
        for (raw, expected) in [
            ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("<URL:http://127.0.0.1:8080/x>", "127.0.0.1:8080"),
            ("URL:http://127.0.0.1:8080/x", "127.0.0.1:8080"),
            (" <URL: http://127.0.0.1:8080/x > ", "127.0.0.1:8080"),
            ("\u{a0}http://127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("\u{2028}http://127.0.0.1:8080\u{2028}", "127.0.0.1:8080"),
            ("\x1chttp://127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("http://127.0.0.1%3a8080/x", "127.0.0.1:8080"),
            ("http://%31%32%37.0.0.1:8080/x", "127.0.0.1:8080"),
            ("http://127.0.0.1:+8080/x", "127.0.0.1:8080"),
            ("http://127.0.0.1: 8080/x", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080 /x", "127.0.0.1:8080"),
            ("http://127.0.0.1:80_80/x", "127.0.0.1:8080"),
            ("http://127.0.0.1:\u{ff18}\u{ff10}80/x", "127.0.0.1:8080"),
            ("http://evil.example\\@127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("http://a@b@127.0.0.1:8080/x", "127.0.0.1:8080"),
            (
                "http://%5B::ffff:127.0.0.1%5D:8080/x",
                "[::ffff:7f00:1]:8080",
            ),
            ("http://127.0.0.1:8080#@evil.example/", "127.0.0.1:8080"),
            ("HtTp://127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("http://loc\u{df}host:8080/x", "locsshost:8080"),
            ("http://local\u{200d}host:8080/x", "localhost:8080"),
        ] {
            let got = hosts(raw);
            assert!(
                got.iter().any(|h| h == expected),
                "{raw:?}: {got:?} lacks {expected}"
            );
        }
    }

    #[test]
    fn what_no_python_client_fetches_gives_no_place() {
        for raw in [
            "/etc/passwd",
            "notes://a/b",
            "http:127.0.0.1:8080/x",
            "http:/127.0.0.1/x",
            "http://127.0.0.1:80x80/",
            "http://127.0.0.1\t:8080/x",
            "ftp://host/x",
        ] {
            assert!(reached(raw).is_empty(), "{raw:?}: {:?}", reached(raw));
        }
    }

    #[test]
    fn ports_read_as_python_int() {
        assert_eq!(py_port("8080"), Some(8080));
        assert_eq!(py_port(" +0_8080\u{3000}"), Some(8080));
        assert_eq!(py_port("\u{0668}\u{0660}"), Some(80));
        assert_eq!(py_port("80__80"), None);
        assert_eq!(py_port("_80"), None);
        assert_eq!(py_port("80_"), None);
        assert_eq!(py_port("65536"), None);
        assert_eq!(py_port("-1"), None);
        assert_eq!(py_port(""), None);
    }
}
