//! Which paths a sandboxed server may read, execute and write.
//!
//! - System folders (`/usr`, `/bin`, `/lib*`, `/sbin`): read + execute.
//! - A short allow-list under `/etc` (dynamic loader, time zone, TLS roots,
//!   name service files) and `/sys/devices/system/cpu`; never all of
//!   `/etc` (`/etc/shadow`, ssh host keys).
//! - Device nodes by name: `/dev/null`, `/dev/zero`, `/dev/full`,
//!   `/dev/random`, `/dev/urandom`.
//! - The install prefix of the server's executable: for the executable,
//!   every hop of its symlink chain and every `#!` interpreter (including
//!   `/usr/bin/env NAME`), its *recognised self-contained prefix*, else the
//!   file alone:
//!
//! | recognised | granted |
//! | --- | --- |
//! | `<v>/bin/X` with `<v>/pyvenv.cfg` | `<v>`, and the prefix of the interpreter its `home =` names |
//! | `…/.pyenv/versions/<ver>/…` | that version folder |
//! | `…/.nvm/versions/node/<ver>/…` | that version folder |
//! | `…/.rustup/toolchains/<name>/…` | that toolchain folder |
//! | `…/node_modules/…` | the outermost `node_modules` folder (packages only) |
//! | `/usr/…`, `/bin`, `/sbin`, `/lib*` | already granted as system folders |
//! | `/opt/<pkg>/…`, `/nix/store/<entry>/…`, `/snap/<name>/<rev>/…` | that package folder |
//! | anything else (`~/.cargo/bin/x`, `~/proj/bin/server`, `/tmp/x.sh`) | the file alone |
//!
//! A recognised folder is still refused (the file alone is granted) when
//! it is too wide (`/`, `/home`, the user's HOME or an ancestor, `/tmp`,
//! `/opt`, …) or holds credentials at its top level (`.env`,
//! `credentials.toml`, `.netrc`, `.npmrc`, `.pypirc`, `.git-credentials`,
//! `.ssh`, `.aws`, `.docker`, `.gnupg`, `.kube`). `warden sandbox check
//! --server NAME` lists each grant with its reason.
//!
//! What real servers need (checked by `tests/sandbox_runs_real_servers.rs`):
//! `node_modules/.bin/NAME` (npm) gets the outer `node_modules` and, through
//! `#!/usr/bin/env node`, the system node; `<venv>/bin/NAME` (pip, `python
//! -m venv`, `uv tool install`, pipx) gets the venv and its interpreter's
//! prefix (for pyenv `~/.pyenv/versions/X.Y.Z`, never all of `~/.pyenv`).
//! `npx -y PKG` and `uvx NAME` download at start and need the network:
//! install the package first and point `command` at its entry. Anything
//! else a server reads: grant it with `sandbox.read` or `sandbox.write`.

use std::collections::{BTreeMap, BTreeSet};
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

/// The host's own credentials, readable by root alone: password hashes
/// (and the `-` backups the shadow tools leave beside them and Debian's
/// daily `.bak` copies: the same hashes), sudo's rules, old passwords,
/// the ssh host keys, TLS private keys, Kerberos, Wi-Fi and WireGuard
/// secrets. Hidden inside any grant that covers them (an `/etc` read
/// grant, the view's own `/etc/ssl`): a server started by root runs as
/// the host's uid 0 and would read them (one started by another user is
/// refused by their modes anyway). `*` in the last part stands for any
/// text.
pub(crate) const HOST_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    // Debian's daily copies of them.
    "/var/backups/shadow.bak",
    "/var/backups/gshadow.bak",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssh/ssh_host_key",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/krb5.keytab",
    "/etc/NetworkManager/system-connections",
    "/etc/wireguard",
];

/// [`HOST_SECRETS`] with each `*` pattern expanded to the files present.
pub(crate) fn host_secrets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in HOST_SECRETS {
        let path = Path::new(entry);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let (Some(parent), Some((head, tail))) = (path.parent(), name.split_once('*')) else {
            out.push(path.to_path_buf());
            continue;
        };
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for e in entries.flatten() {
            let n = e.file_name();
            let Some(n) = n.to_str() else {
                continue;
            };
            if matches_pattern(n, head, tail) {
                out.push(parent.join(n));
            }
        }
    }
    out
}

/// Whether `name` is `head`, any text, then `tail` (the two never overlap).
fn matches_pattern(name: &str, head: &str, tail: &str) -> bool {
    name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
}

/// Device nodes readable and writable.
pub(crate) const DEV_RW: &[&str] = &["/dev/null", "/dev/full"];
/// Device nodes readable only.
pub(crate) const DEV_READ: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// Files or folders whose presence at the top of a folder means it holds
/// credentials: such a folder is never granted as an install prefix.
const CREDENTIAL_NAMES: &[&str] = &[
    ".env",
    "credentials.toml",
    "credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".ssh",
    ".aws",
    ".docker",
    ".gnupg",
    ".kube",
];

/// Folders never granted as an install prefix: granting one would open far
/// more than the server's own files.
fn too_wide(dir: &Path, host_home: Option<&Path>) -> bool {
    const WIDE: &[&str] = &[
        "/",
        "/home",
        "/root",
        "/tmp",
        "/var",
        "/var/tmp",
        "/opt",
        "/srv",
        "/mnt",
        "/media",
        "/run",
        "/etc",
        "/dev",
        "/proc",
        "/sys",
        "/nix",
        "/nix/store",
        "/snap",
    ];
    if WIDE.iter().any(|w| Path::new(w) == dir) {
        return true;
    }
    // The user's home folder itself or any ancestor of it.
    host_home.is_some_and(|home| home.starts_with(dir))
}

fn holds_credentials(dir: &Path) -> Option<&'static str> {
    CREDENTIAL_NAMES
        .iter()
        .find(|n| dir.join(n).symlink_metadata().is_ok())
        .copied()
}

/// The recognised self-contained prefix of a canonical file path and the
/// rule that recognised it; `None`: not recognised (the file alone is
/// granted).
fn recognised_prefix(real: &Path) -> Option<(PathBuf, &'static str)> {
    let comps: Vec<std::path::Component> = real.components().collect();
    let name = |i: usize| {
        comps
            .get(i)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
    };
    let upto = |i: usize| comps.iter().take(i + 1).collect::<PathBuf>();
    for sys in SYSTEM_RX {
        if real.starts_with(sys) {
            return Some((PathBuf::from(sys), "system folder"));
        }
    }
    // The outermost node_modules (the package and its dependencies).
    if let Some(i) =
        (0..comps.len().saturating_sub(1)).find(|&i| name(i).as_deref() == Some("node_modules"))
    {
        return Some((upto(i), "node_modules folder"));
    }
    for i in 0..comps.len() {
        match (name(i).as_deref(), name(i + 1).as_deref()) {
            (Some(".pyenv"), Some("versions")) if comps.len() > i + 3 => {
                return Some((upto(i + 2), "pyenv version folder"));
            }
            (Some(".nvm"), Some("versions"))
                if name(i + 2).as_deref() == Some("node") && comps.len() > i + 4 =>
            {
                return Some((upto(i + 3), "nvm version folder"));
            }
            (Some(".rustup"), Some("toolchains")) if comps.len() > i + 3 => {
                return Some((upto(i + 2), "rustup toolchain folder"));
            }
            _ => {}
        }
    }
    if real.starts_with("/opt") && comps.len() > 3 {
        return Some((upto(2), "/opt package folder"));
    }
    if real.starts_with("/nix/store") && comps.len() > 4 {
        return Some((upto(3), "nix store entry"));
    }
    if real.starts_with("/snap") && comps.len() > 4 {
        return Some((upto(3), "snap revision"));
    }
    None
}

/// Grants `dir` for `why`, unless it is too wide or holds credentials:
/// then only `file`.
fn grant_dir(out: &mut Prefixes, dir: &Path, why: &str, home: Option<&Path>, file: &Path) {
    if too_wide(dir, home) {
        out.insert(
            file.to_path_buf(),
            format!("file alone ({} is too wide)", dir.display()),
        );
    } else if let Some(c) = holds_credentials(dir) {
        out.insert(
            file.to_path_buf(),
            format!("file alone ({} holds {c})", dir.display()),
        );
    } else if dir.exists() {
        out.insert(dir.to_path_buf(), why.to_string());
    }
}

/// Install-prefix grants with the reason each was granted.
pub(crate) type Prefixes = BTreeMap<PathBuf, String>;

/// The install prefixes (read + execute) of an executable: for the
/// executable, every hop of its symlink chain and every `#!` interpreter,
/// its recognised self-contained prefix, else the file alone.
pub(crate) fn install_prefixes(
    program: &Path,
    path_var: &str,
    host_home: Option<&Path>,
) -> Prefixes {
    let mut out = Prefixes::new();
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
                grant_dir(&mut out, &venv, "python venv", host_home, &hop);
                if let Some(home) = venv_home(&venv) {
                    let home = home.canonicalize().unwrap_or(home);
                    match recognised_prefix(&home.join("python")) {
                        Some((p, why)) => grant_dir(&mut out, &p, why, host_home, &home),
                        None if !too_wide(&home, host_home) && home.exists() => {
                            out.insert(home.clone(), "venv interpreter folder".into());
                        }
                        None => {}
                    }
                }
            }
        }
        let Ok(real) = exe.canonicalize() else {
            continue;
        };
        match recognised_prefix(&real) {
            Some((p, why)) => grant_dir(&mut out, &p, why, host_home, &real),
            None => {
                out.insert(real.clone(), "file alone (no recognised prefix)".into());
            }
        }
        if let Some(interp) = shebang_interpreter(&real, path_var) {
            todo.push(interp);
        }
    }
    // Drop entries already covered by another one.
    let all: Vec<PathBuf> = out.keys().cloned().collect();
    out.retain(|p, _| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
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
    fn host_key_patterns_match_private_keys_only() {
        for (name, want) in [
            ("ssh_host_ed25519_key", true),
            ("ssh_host_rsa_key", true),
            ("ssh_host_rsa_key.pub", false),
            ("ssh_host_key", false),
            ("sshd_config", false),
        ] {
            assert_eq!(matches_pattern(name, "ssh_host_", "_key"), want, "{name}");
        }
    }

    fn exe(p: &Path, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, body).expect("write");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn canon(p: &Path) -> PathBuf {
        p.canonicalize().expect("canonicalize")
    }

    #[test]
    fn recognises_self_contained_prefixes_only() {
        let r = |p: &str| recognised_prefix(Path::new(p)).map(|(p, _)| p);
        assert_eq!(
            r("/home/u/.pyenv/versions/3.11.7/bin/python3.11"),
            Some("/home/u/.pyenv/versions/3.11.7".into())
        );
        assert_eq!(
            r("/home/u/.nvm/versions/node/v22.1.0/bin/node"),
            Some("/home/u/.nvm/versions/node/v22.1.0".into())
        );
        assert_eq!(
            r("/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/rustc"),
            Some("/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu".into())
        );
        assert_eq!(
            r("/w/node_modules/@x/y/node_modules/z/dist/i.js"),
            Some("/w/node_modules".into())
        );
        assert_eq!(r("/opt/node/bin/node"), Some("/opt/node".into()));
        assert_eq!(r("/usr/local/bin/x"), Some("/usr".into()));
        assert_eq!(r("/home/u/.cargo/bin/x"), None);
        assert_eq!(r("/home/u/proj/bin/server"), None);
        assert_eq!(r("/home/u/.pyenv/shims/python"), None);
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
    fn cargo_bin_grants_the_file_alone_never_the_credentials() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        let x = home.join(".cargo/bin/x");
        exe(&x, "#!/bin/sh\n");
        std::fs::write(home.join(".cargo/credentials.toml"), "token").expect("write");
        let g = install_prefixes(&x, "/usr/bin:/bin", Some(&home));
        assert!(g.contains_key(&canon(&x)), "{g:?}");
        assert!(
            !g.keys().any(|p| canon(&home.join(".cargo")).starts_with(p)),
            "{g:?}"
        );
    }

    #[test]
    fn project_bin_with_an_env_file_grants_the_file_alone() {
        let d = tempfile::tempdir().expect("tempdir");
        let srv = d.path().join("proj/bin/server");
        exe(&srv, "#!/bin/sh\n");
        std::fs::write(d.path().join("proj/.env"), "SECRET=1").expect("write");
        let g = install_prefixes(&srv, "/usr/bin:/bin", None);
        assert!(g.contains_key(&canon(&srv)), "{g:?}");
        assert!(
            !g.keys()
                .any(|p| canon(&d.path().join("proj")).starts_with(p)),
            "{g:?}"
        );
    }

    #[test]
    fn a_venv_gets_itself_and_its_interpreter_version_never_the_project() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        let py = home.join(".pyenv/versions/3.11.7/bin/python3.11");
        exe(&py, "\x7fELF");
        let venv = home.join("proj/.venv");
        std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", py.parent().expect("bin").display()),
        )
        .expect("write");
        std::os::unix::fs::symlink(&py, venv.join("bin/python")).expect("symlink");
        exe(
            &venv.join("bin/tool"),
            &format!("#!{}/bin/python\n", venv.display()),
        );
        std::fs::write(home.join("proj/.env"), "SECRET=1").expect("write");
        let g = install_prefixes(&venv.join("bin/tool"), "/usr/bin", Some(&home));
        assert!(g.contains_key(&canon(&venv)), "{g:?}");
        assert!(
            g.contains_key(&canon(&home.join(".pyenv/versions/3.11.7"))),
            "{g:?}"
        );
        assert!(!g.keys().any(|k| k.ends_with("proj")), "{g:?}");
    }

    #[test]
    fn node_modules_bin_grants_node_modules_and_the_system_interpreter() {
        let d = tempfile::tempdir().expect("tempdir");
        let nm = d.path().join("proj/node_modules");
        exe(&nm.join("@s/pkg/dist/index.js"), "#!/usr/bin/env sh\n");
        std::fs::create_dir_all(nm.join(".bin")).expect("mkdir");
        std::os::unix::fs::symlink("../@s/pkg/dist/index.js", nm.join(".bin/pkg"))
            .expect("symlink");
        std::fs::write(d.path().join("proj/.env"), "SECRET=1").expect("write");
        let g = install_prefixes(&nm.join(".bin/pkg"), "/usr/bin:/bin", None);
        assert!(g.contains_key(&canon(&nm)), "{g:?}");
        assert!(
            g.keys()
                .any(|k| k.starts_with("/usr") || k.starts_with("/bin")),
            "{g:?}"
        );
        assert!(!g.keys().any(|k| k.ends_with("proj")), "{g:?}");
    }

    #[test]
    fn a_script_in_tmp_grants_only_itself() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = d.path().join("s.sh");
        exe(&s, "#!/bin/sh\necho hi\n");
        let g = install_prefixes(&s, "/usr/bin:/bin", None);
        assert!(g.contains_key(&canon(&s)), "{g:?}");
        assert!(!g.contains_key(&canon(d.path())), "{g:?}");
        assert!(
            g.keys()
                .any(|p| p.starts_with("/usr") || p.starts_with("/bin")),
            "{g:?}"
        );
    }
}
