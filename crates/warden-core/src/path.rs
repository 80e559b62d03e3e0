//! The one lexical path normaliser. Rules (matching argument values), the
//! sandbox (symlink targets, granted paths) and the configuration (paths in
//! config files) all mean the same thing by a path because they all call
//! [`normalize`].
//!
//! Lexical means the file system is never consulted: symlinks are not
//! resolved (the sandbox, not the normaliser, is what enforces access), so
//! `/ws/link/../x` is `/ws/x` whatever `link` points to.
//!
//! Semantics:
//!
//! - `.` components and repeated or trailing separators disappear.
//! - `..` removes the component before it. `..` above `/` stays at `/`, as
//!   the kernel resolves it (`/../etc` is `/etc`), so `${WORKSPACE}/../x`
//!   can never be made to look like a path inside the workspace.
//! - In a relative path, a `..` with nothing before it to remove is kept
//!   (`../x` stays `../x`; `a/../../x` is `../x`): dropping it would change
//!   which file the path names once it is joined to a base. Callers that
//!   need an absolute path use [`absolutize`].
//! - A path that normalises to nothing is `.`.

use std::path::{Component, Path, PathBuf};

/// Removes `.`, `..` and repeated separators without touching the disk.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    // Normal components in `out` that a `..` may still remove.
    let mut removable = 0usize;
    for comp in path.components() {
        match comp {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir),
            Component::CurDir => {}
            Component::ParentDir => {
                if removable > 0 {
                    out.pop();
                    removable -= 1;
                } else if !out.has_root() {
                    out.push("..");
                }
                // At the root: stays at the root.
            }
            Component::Normal(c) => {
                out.push(c);
                removable += 1;
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `path` joined to `base` when relative, then [`normalize`]d. With an
/// absolute `base` the result is absolute.
pub fn absolutize(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        normalize(path)
    } else {
        normalize(&base.join(path))
    }
}

/// [`normalize`] of `path` taken from `/`, whether it is absolute or not:
/// `a/../../x` and `/a/../../x` are both `/x`. For paths below a root that
/// is not the file system's (the `~` of `~/…`), and for the path part of a
/// `file:` URI, which is absolute even when written without a leading `/`
/// after the authority.
pub fn rooted(path: &str) -> String {
    normalize(&Path::new("/").join(path))
        .to_string_lossy()
        .into_owned()
}

/// [`absolutize`] on strings: `path` joined to `base` when relative, then
/// normalised. With an absolute `base` the result is absolute.
pub fn absolutize_str(base: &str, path: &str) -> String {
    if !path.starts_with('/') && !base.starts_with('/') {
        return absolutize(Path::new(base), Path::new(path))
            .to_string_lossy()
            .into_owned();
    }
    // The result is absolute: [`normalize`] on segments, without building
    // a `PathBuf` (a 100 KB argument is read as a possible path on every
    // call; `Path::components` made that the decision's largest cost).
    // Same rules: empty and `.` segments vanish, `..` removes the one
    // before it and stays at `/`. Held equal to the `Path` version by the
    // `absolutize_str_is_absolutize` property test.
    let joined = if path.starts_with('/') { "" } else { base };
    let mut kept: Vec<&str> = Vec::new();
    for seg in joined.split('/').chain(path.split('/')) {
        match seg {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            s => kept.push(s),
        }
    }
    if kept.is_empty() {
        return "/".to_string();
    }
    let mut out = String::with_capacity(joined.len() + path.len() + 1);
    for s in kept {
        out.push('/');
        out.push_str(s);
    }
    out
}

/// Whether `path` has a `.` or `..` component (after splitting on `/`):
/// the only relative paths whose meaning depends on normalisation.
pub fn has_dot_segments(path: &str) -> bool {
    path.split('/').any(|seg| seg == "." || seg == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> String {
        normalize(Path::new(p)).display().to_string()
    }

    #[test]
    fn dots_and_separators() {
        assert_eq!(n("/a/./b//c/../d"), "/a/b/d");
        assert_eq!(n("/a/b/"), "/a/b");
        assert_eq!(n("/"), "/");
        assert_eq!(n("/w/..."), "/w/...");
        assert_eq!(n(""), ".");
        assert_eq!(n("a/.."), ".");
    }

    #[test]
    fn string_helpers() {
        assert_eq!(rooted("a/../../x"), "/x");
        assert_eq!(rooted("//etc//./shadow"), "/etc/shadow");
        assert_eq!(rooted(""), "/");
        assert_eq!(absolutize_str("/w", "../x"), "/x");
        assert_eq!(
            absolutize_str("/w", "/proc/self//environ"),
            "/proc/self/environ"
        );
        assert!(has_dot_segments("a/./b") && has_dot_segments(".."));
        assert!(!has_dot_segments(".env/..x/a.b"));
    }

    fn slow_absolutize_str(base: &str, path: &str) -> String {
        absolutize(Path::new(base), Path::new(path))
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn absolutize_str_edges() {
        for (base, path) in [
            ("/w", ""),
            ("/w", "."),
            ("/w", ".."),
            ("/", "../.."),
            ("/w/", "a//b/./c/"),
            ("//w", "x"),
            ("/w", "/"),
            ("/w", "//etc/../shadow"),
            ("w", "x"),
            ("", "x"),
        ] {
            assert_eq!(
                absolutize_str(base, path),
                slow_absolutize_str(base, path),
                "{base} + {path}"
            );
        }
    }

    #[test]
    fn parent_above_the_root_stays_at_the_root() {
        assert_eq!(n("/../.."), "/");
        assert_eq!(n("/w/../../../x"), "/x");
        assert_eq!(n("/w/../x"), "/x");
    }

    #[test]
    fn relative_parents_are_kept() {
        assert_eq!(n("../x"), "../x");
        assert_eq!(n("a/../../x"), "../x");
        assert_eq!(n("../../x"), "../../x");
        assert_eq!(n("./a/./b"), "a/b");
    }

    /// The cases of the three normalisers this one replaced (rules,
    /// sandbox symlink chains, config paths): same results for every
    /// absolute path.
    #[test]
    fn former_callers_cases() {
        // policy rules (`normalize_path`, with the workspace joined first).
        assert_eq!(
            absolutize(Path::new("/w"), Path::new("a/./b//c")),
            Path::new("/w/a/b/c")
        );
        assert_eq!(
            absolutize(Path::new("/w"), Path::new("../../..")),
            Path::new("/")
        );
        assert_eq!(
            absolutize(Path::new("/w"), Path::new("/w/../x")),
            Path::new("/x")
        );
        assert_eq!(
            absolutize(Path::new("/w"), Path::new("...")),
            Path::new("/w/...")
        );
        assert_eq!(
            normalize(Path::new("/w/../etc/passwd")),
            Path::new("/etc/passwd")
        );
        // config (`expand::normalize` / `absolutize`).
        assert_eq!(
            absolutize(Path::new("/ws"), Path::new("../etc")),
            Path::new("/etc")
        );
        // sandbox (symlink targets joined to their folder).
        assert_eq!(
            normalize(&Path::new("/venv/bin").join("../../usr/bin/python3")),
            Path::new("/usr/bin/python3")
        );
    }
}
