//! Where `~NAME` leads: NAME's home directory.
//!
//! Python's `os.path.expanduser("~root/x")` (and so `Path.expanduser()`)
//! asks the password database, so `~root/.bashrc` is `/root/.bashrc` and
//! `~bin/ldd` is `/bin/ldd`; a deny on `/root/**` missed them. warden
//! reads the host's `/etc/passwd` (what a server sees in its sandbox, and
//! what an unsandboxed one asks) and, for a name it does not list (one a
//! directory service knows), `/home/NAME`.

use std::sync::OnceLock;

/// `(name, home)` of every entry of the host's `/etc/passwd`, read once.
fn passwd() -> &'static [(String, String)] {
    static ENTRIES: OnceLock<Vec<(String, String)>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        std::fs::read_to_string("/etc/passwd")
            .map(|text| parse(&text))
            .unwrap_or_default()
    })
}

fn parse(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                [name, _, _, _, _, home, ..] if !name.is_empty() && home.starts_with('/') => {
                    Some((name.to_string(), home.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

/// The home directories `~name` may stand for.
pub(crate) fn homes(name: &str) -> Vec<String> {
    let mut out: Vec<String> = passwd()
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, home)| home.clone())
        .collect();
    let fallback = format!("/home/{name}");
    if !out.contains(&fallback) {
        out.push(fallback);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_entries_give_homes() {
        let entries =
            parse("root:x:0:0:root:/root:/bin/bash\n\nbad\nsvc:x:9:9::/srv/svc:/bin/sh\n");
        assert_eq!(
            entries,
            [
                ("root".to_string(), "/root".to_string()),
                ("svc".to_string(), "/srv/svc".to_string())
            ]
        );
        assert!(homes("no-such-user-here").contains(&"/home/no-such-user-here".to_string()));
    }
}
