//! Which paths a sandboxed server may read, execute and write.
//!
//! - System directories (`/usr`, `/bin`, `/lib*`, `/sbin`): read + execute.
//! - A short allow-list under `/etc` (dynamic loader, time zone, TLS roots,
//!   name service files); never all of `/etc` (`/etc/shadow`, ssh host keys).
//! - Device nodes by name: `/dev/null`, `/dev/zero`, `/dev/full`,
//!   `/dev/random`, `/dev/urandom`. Never all of `/dev` or `/proc`.
//! - The install prefix of the server's executable, found by following the
//!   symlink chain, `#!` interpreters (including `/usr/bin/env NAME`), and a
//!   Python venv's `pyvenv.cfg` `home`: read + execute.
//!
//! What real servers need (checked by `tests/sandbox_runs_real_servers.rs`):
//!
//! - `node_modules/.bin/NAME` (npm): the `.bin` symlink leads into
//!   `node_modules/<pkg>/…`; the outermost `node_modules` folder is granted
//!   (the package and its dependencies), and `#!/usr/bin/env node` resolves
//!   to `/usr/bin/node` (system). A node installed elsewhere (`/opt/node`,
//!   nvm) is found the same way through `env`. `npx -y PKG` downloads into
//!   HOME at start and needs the network: install the package first and
//!   point `command` at its `.bin` entry.
//! - `<venv>/bin/NAME` (pip, `python -m venv`, `uv tool install`, pipx):
//!   the venv, plus the prefix of the interpreter `pyvenv.cfg` names (for
//!   pyenv `~/.pyenv/versions/X.Y.Z`, never all of `~/.pyenv`). `uvx NAME`
//!   downloads at start like `npx`: use `uv tool install` and the tool's venv.
//! - Anything else a server reads (a data folder, a config file, a runtime
//!   installed outside these rules): grant it with `sandbox.read` (read +
//!   execute) or `sandbox.write` (read + write); `warden sandbox check
//!   --server NAME` lists what is granted. The host HOME, `/`, `/tmp` and
//!   similar folders are never granted automatically, only the single file.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use warden_core::path::normalize;

/// Read + execute system directories (missing ones are skipped).
pub(crate) const SYSTEM_RX: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Read-only files and folders under `/etc` that ordinary runtimes need.
pub(crate) const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/services",
    "/etc/protocols",
    "/etc/mime.types",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/debian_version",
    "/sys/devices/system/cpu",
];

/// Device nodes readable and writable.
pub(crate) const DEV_RW: &[&str] = &["/dev/null", "/dev/full"];
/// Device nodes readable only.
pub(crate) const DEV_READ: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// Folders never granted automatically as an install prefix: granting one
/// would open far more than the server's own files.
fn too_wide(dir: &Path, host_home: Option<&Path>) -> bool {
    const WIDE: &[&str] = &[
        "/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/opt", "/srv", "/mnt", "/media",
        "/run", "/etc", "/dev", "/proc", "/sys",
    ];
    if WIDE.iter().any(|w| Path::new(w) == dir) {
        return true;
    }
    // The user's home folder itself or any ancestor of it.
    host_home.is_some_and(|home| home.starts_with(dir))
}

/// The install prefixes (read + execute) of an executable: the executable
/// and every interpreter it names, with the folders their symlinks point to.
pub(crate) fn install_prefixes(program: &Path, path_var: &str) -> BTreeSet<PathBuf> {
    let host_home = std::env::var_os("HOME").map(PathBuf::from);
    let mut out = BTreeSet::new();
    let mut todo = vec![program.to_path_buf()];
    let mut seen = BTreeSet::new();
    while let Some(exe) = todo.pop() {
        if !seen.insert(exe.clone()) || seen.len() > 16 {
            continue;
        }
        // Every hop of the symlink chain: a venv's bin/python is a symlink
        // whose folder is the venv.
        for hop in symlink_chain(&exe) {
            if let Some(venv) = venv_root(&hop) {
                add(&mut out, &venv, host_home.as_deref());
                if let Some(home) = venv_home(&venv) {
                    add(&mut out, &prefix_of_dir(&home), host_home.as_deref());
                    if let Ok(real) = home.canonicalize() {
                        add(&mut out, &prefix_of_dir(&real), host_home.as_deref());
                    }
                }
            }
        }
        let Ok(real) = exe.canonicalize() else {
            continue;
        };
        match prefix_of_file(&real) {
            Some(prefix) if !too_wide(&prefix, host_home.as_deref()) => {
                out.insert(prefix);
            }
            // Too wide: grant only the file itself.
            _ => {
                out.insert(real.clone());
            }
        }
        if let Some(interp) = shebang_interpreter(&real, path_var) {
            todo.push(interp);
        }
    }
    // Drop entries already covered by another one.
    let all: Vec<PathBuf> = out.iter().cloned().collect();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
}

fn add(out: &mut BTreeSet<PathBuf>, dir: &Path, host_home: Option<&Path>) {
    if !too_wide(dir, host_home) && dir.exists() {
        out.insert(dir.to_path_buf());
    }
}

/// `p`, then what it links to, and so on (at most 16 hops), made absolute.
fn symlink_chain(p: &Path) -> Vec<PathBuf> {
    let mut chain = vec![p.to_path_buf()];
    let mut cur = p.to_path_buf();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&cur) else {
            break;
        };
        let next = match cur.parent() {
            Some(parent) if target.is_relative() => normalize(&parent.join(target)),
            _ => normalize(&target),
        };
        chain.push(next.clone());
        cur = next;
    }
    chain
}

/// `<venv>` when `p` is `<venv>/bin/NAME` and `<venv>/pyvenv.cfg` exists.
fn venv_root(p: &Path) -> Option<PathBuf> {
    let bin = p.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let root = bin.parent()?;
    root.join("pyvenv.cfg")
        .is_file()
        .then(|| root.to_path_buf())
}

/// The `home = …` folder of a venv's `pyvenv.cfg`: where its interpreter lives.
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })
}

/// The install prefix of a file (canonical path):
/// - inside `node_modules`: the outermost `node_modules` folder (the
///   package and all its dependencies);
/// - `<prefix>/bin/NAME` or `<prefix>/sbin/NAME`: `<prefix>`;
/// - otherwise the file's folder.
fn prefix_of_file(real: &Path) -> Option<PathBuf> {
    let mut outer_nm = None;
    for anc in real.ancestors().skip(1) {
        if anc.file_name().is_some_and(|n| n == "node_modules") {
            outer_nm = Some(anc.to_path_buf());
        }
    }
    if outer_nm.is_some() {
        return outer_nm;
    }
    Some(prefix_of_dir(real.parent()?))
}

fn prefix_of_dir(dir: &Path) -> PathBuf {
    match (dir.file_name(), dir.parent()) {
        (Some(name), Some(parent))
            if (name == "bin" || name == "sbin") && parent != Path::new("/") =>
        {
            parent.to_path_buf()
        }
        _ => dir.to_path_buf(),
    }
}

/// The interpreter named on a `#!` line, resolving `/usr/bin/env NAME`
/// through `path_var`.
fn shebang_interpreter(file: &Path, path_var: &str) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head.get(..n)?.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interp = PathBuf::from(words.next()?);
    if interp.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        return which_in(name, path_var);
    }
    Some(interp)
}

/// Resolves a command name on a `PATH`-style list (absolute names as is).
pub fn which_in(name: &str, path_var: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path_var)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_prefix_and_node_modules() {
        assert_eq!(
            prefix_of_file(Path::new("/opt/node/bin/node")),
            Some(PathBuf::from("/opt/node"))
        );
        assert_eq!(
            prefix_of_file(Path::new("/w/node_modules/@x/y/node_modules/z/dist/i.js")),
            Some(PathBuf::from("/w/node_modules"))
        );
        assert_eq!(
            prefix_of_file(Path::new("/usr/bin/true")),
            Some(PathBuf::from("/usr"))
        );
        assert_eq!(
            prefix_of_file(Path::new("/bin/true")),
            Some(PathBuf::from("/bin"))
        );
    }

    #[test]
    fn wide_folders_are_not_granted() {
        assert!(too_wide(Path::new("/"), None));
        assert!(too_wide(Path::new("/home"), Some(Path::new("/home/u"))));
        assert!(too_wide(Path::new("/home/u"), Some(Path::new("/home/u"))));
        assert!(!too_wide(
            Path::new("/home/u/.venv"),
            Some(Path::new("/home/u"))
        ));
    }

    #[test]
    fn script_in_tmp_grants_only_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("s.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
        let got = install_prefixes(&script, "/usr/bin:/bin");
        let real = script.canonicalize().expect("canon");
        assert!(got.contains(&real) || got.contains(real.parent().expect("parent")));
        assert!(
            got.iter()
                .any(|p| p.starts_with("/usr") || p.starts_with("/bin"))
        );
    }
}
