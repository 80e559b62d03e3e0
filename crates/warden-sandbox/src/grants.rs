//! Step 3 of [`crate::prepare`]: what the server may see and touch. The
//! view's binds (system folders, the install prefix, the `/etc` list, the
//! configured grants, read-only binds of warden's own files inside write
//! grants, an empty folder over its credentials) and the Landlock paths.
//! Three rules keep the grants what the operator meant: a grant named
//! inside the workspace must resolve inside it ([`Workspace::confine`]), warden's own
//! files are never writable ([`own_files`]), and its credentials never
//! visible ([`hidden_paths`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::launch::LaunchContext;
use crate::paths::{self, Prefixes};
use crate::plan::{Bind, BindKind, LandlockPaths};
use crate::prepare::{PRIVATE_DIR, PRIVATE_HOME, PRIVATE_TMP};
use crate::spec::LaunchSpec;

/// What the server may see and touch.
#[derive(Debug)]
pub(crate) struct Grants {
    /// The view's binds (with a view).
    pub binds: Vec<Bind>,
    pub landlock: LandlockPaths,
    pub install_prefix: Prefixes,
    /// What could not be protected (best_effort without a view).
    pub gaps: Vec<String>,
    /// warden's own files made read-only or hidden inside the grants, in
    /// words.
    pub notes: Vec<String>,
    /// TMPDIR inside the view (`private_write_rules`).
    pub tmpdir: PathBuf,
}

/// Collects the grants. A configured path that does not exist is an error
/// (Landlock would skip it silently, hiding a typo), and so is one named
/// inside the workspace that a symlink leads outside it (see
/// [`Workspace::confine`]).
/// `host_dirs`: the private HOME and TMPDIR on the host when there is no
/// view.
pub(crate) fn grants(
    spec: &LaunchSpec,
    ctx: &LaunchContext,
    path_var: &str,
    view: bool,
    host_dirs: Option<(&Path, &Path)>,
) -> Result<Grants, SandboxError> {
    let workspace = Workspace::new(&ctx.workspace);
    let host_home = std::env::var_os("HOME").map(PathBuf::from);
    let install_prefix = paths::install_prefixes(&spec.program, path_var, host_home.as_deref());
    let mut binds: Vec<Bind> = Vec::new();
    let mut add = |src: PathBuf, kind: BindKind, optional: bool| {
        binds.push(Bind {
            src,
            kind,
            optional,
            confine: None,
        });
    };
    for p in paths::SYSTEM_RX {
        add(PathBuf::from(p), BindKind::ReadExec, true);
    }
    for p in install_prefix.keys() {
        add(p.clone(), BindKind::ReadExec, false);
    }
    for p in paths::ETC_READ {
        add(PathBuf::from(p), BindKind::Read, true);
    }
    let setup = |detail: String| SandboxError::Setup {
        server: spec.name.clone(),
        detail,
    };
    for (key, list, kind) in [
        ("sandbox.read", &spec.read, BindKind::ReadExec),
        ("sandbox.write", &spec.write, BindKind::Write),
    ] {
        for p in list {
            if p.symlink_metadata().is_err() || !p.exists() {
                return Err(setup(format!("{key} path {} does not exist", p.display())));
            }
            let confine = workspace
                .confine(p)
                .map_err(|detail| setup(format!("{key} path {detail}")))?;
            binds.push(Bind {
                src: p.clone(),
                kind,
                optional: false,
                confine,
            });
        }
    }
    let configured: Vec<&PathBuf> = spec.read.iter().chain(&spec.write).collect();
    let warden_hidden = hidden_paths(&configured, &ctx.hide).map_err(setup)?;
    // The host's own credentials inside any bind (the view's `/etc/ssl`
    // included): a server started by root would read them.
    let host = host_secret_paths(&binds).map_err(setup)?;
    let mut hidden: Vec<PathBuf> = warden_hidden.iter().chain(&host).cloned().collect();
    hidden.sort();
    hidden.dedup();
    // What is hidden is protected too: its folders are pinned like those
    // of any of warden's files, so none can be moved aside and refilled.
    let protected: Vec<PathBuf> = ctx.protect.iter().chain(&ctx.hide).cloned().collect();
    let mut own = own_files(&spec.write, &protected).map_err(setup)?;
    // The repositories' control files run code on the host (crate::git).
    let mut repos = repository_files(&spec.write, &ctx.workspace).map_err(setup)?;
    // Nothing is mounted inside a hidden folder: it shows nothing at all.
    let visible = |p: &PathBuf| !hidden.iter().any(|h| p.starts_with(h));
    for files in [&mut own, &mut repos] {
        files.read_only.retain(visible);
        files.pinned.retain(visible);
    }
    let (mut gaps, mut notes) = (Vec::new(), Vec::new());
    // The host's credentials are root's alone: without a view they are a
    // gap only for a server started by root.
    let root = nix::unistd::geteuid().is_root();
    for (paths, what, gap) in [
        (
            &own.read_only,
            "warden's own files, read-only inside the write grants",
            true,
        ),
        (
            &warden_hidden,
            "hidden from the server (warden's credentials)",
            true,
        ),
        (
            &host,
            "hidden from the server (the host's credentials)",
            root,
        ),
        (
            &repos.read_only,
            "git control files, read-only inside the write grants (they run code on the host)",
            true,
        ),
    ] {
        if paths.is_empty() {
            continue;
        }
        let list = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if view {
            notes.push(format!("{what}: {list}"));
        } else if gap {
            gaps.push(format!(
                "{what}: not enforced without the mount view: {list}"
            ));
        }
    }
    own.merge(&repos);
    let own_binds = own
        .read_only
        .iter()
        .map(|p| (p, BindKind::Read))
        .chain(own.pinned.iter().map(|p| (p, BindKind::Write)))
        .chain(hidden.iter().map(|p| (p, BindKind::Hidden)));
    for (src, kind) in own_binds {
        let confine = workspace
            .confine(src)
            .map_err(|detail| setup(format!("warden's own {detail}")))?;
        binds.push(Bind {
            src: src.clone(),
            kind,
            optional: false,
            confine,
        });
    }
    binds.retain(|b| !b.optional || b.src.symlink_metadata().is_ok());
    // The program's own path (a symlink outside the grants, e.g. ~/bin/x ->
    // a version folder) must exist in the view for the exec.
    if !binds
        .iter()
        .any(|b| b.kind == BindKind::ReadExec && spec.program.starts_with(&b.src))
    {
        binds.push(Bind {
            src: spec.program.clone(),
            kind: BindKind::ReadExec,
            optional: false,
            confine: None,
        });
    }
    let binds = dedup_binds(binds, &own.pinned);

    let mut landlock = LandlockPaths::default();
    for b in &binds {
        match b.kind {
            BindKind::ReadExec => landlock.read_exec.push(b.src.clone()),
            BindKind::Read => landlock.read.push(b.src.clone()),
            BindKind::Write => landlock.write.push(b.src.clone()),
            // An empty folder of the view's own: the grant above it covers it.
            BindKind::Hidden => {}
        }
        // With a view, Landlock sees the view's copy of each bind, checked
        // when it was taken; without one it opens the host path itself.
        if let (false, Some(root)) = (view, &b.confine) {
            landlock.confine.push((b.src.clone(), root.clone()));
        }
    }
    landlock
        .read
        .extend(paths::DEV_READ.iter().map(PathBuf::from));
    landlock
        .write
        .extend(paths::DEV_RW.iter().map(PathBuf::from));
    let mut tmpdir = PathBuf::from(PRIVATE_DIR);
    if view {
        // The sandbox's own /proc (its pid namespace), never the host's.
        landlock.read.push(PathBuf::from("/proc"));
        landlock.list.push(PathBuf::from("/"));
        let (write, private, tmp) = private_write_rules(&binds);
        landlock.write.extend(write);
        landlock.private.extend(private);
        tmpdir = tmp;
    } else if let Some((home, tmp)) = host_dirs {
        landlock.private.push(home.to_path_buf());
        landlock.private.push(tmp.to_path_buf());
    }
    Ok(Grants {
        binds,
        landlock,
        install_prefix,
        gaps,
        notes,
        tmpdir,
    })
}

/// Landlock's rules for the private tmpfs: the folders that take the
/// write grants' rule, those that take the private rule (FIFOs and unix
/// sockets too), and TMPDIR.
///
/// A Landlock rule covers everything beneath its folder, across mounts, so
/// a write rule on the view's `/tmp` also covered every grant bound under
/// it: a read grant such as `/tmp/ci/ws` kept only its read-only bind,
/// which does not stop a write to a FIFO or a connect to a socket (a
/// red-team review wrote to a host FIFO through a read grant), and a
/// write grant such as `/tmp/ws` would get the private rule's FIFOs and
/// sockets. So when a grant lies under `/tmp`, the private rule goes to
/// HOME and a TMPDIR folder of their own; `/tmp` itself keeps the write
/// grants' rule when only write grants lie under it (files straight in
/// `/tmp` still work), and no rule at all when another grant does
/// (writing there is then refused; well-behaved programs use `$TMPDIR`).
fn private_write_rules(binds: &[Bind]) -> (Vec<PathBuf>, Vec<PathBuf>, PathBuf) {
    let private = Path::new(PRIVATE_DIR);
    let under = |b: &&Bind| b.src.starts_with(private);
    if !binds.iter().any(|b| under(&b)) {
        return (vec![], vec![private.to_path_buf()], private.to_path_buf());
    }
    let tmp = PathBuf::from(PRIVATE_TMP);
    let only_write = binds
        .iter()
        .filter(under)
        .all(|b| b.kind == BindKind::Write);
    let write = if only_write {
        vec![private.to_path_buf()]
    } else {
        vec![]
    };
    (write, vec![PathBuf::from(PRIVATE_HOME), tmp.clone()], tmp)
}

/// warden's own files inside the write grants, as the view shows them.
#[derive(Debug, Default, PartialEq, Eq)]
struct OwnFiles {
    /// Bound read-only over their grant: the server can read them but not
    /// write, truncate, replace or remove them (a mount point cannot be
    /// unlinked or renamed).
    read_only: Vec<PathBuf>,
    /// The folders between a grant and one of them, each bound onto itself
    /// (still writable): a mount point cannot be renamed, so the server
    /// cannot move a folder holding warden's files away and put its own
    /// files in its place for the next session.
    pinned: BTreeSet<PathBuf>,
}

/// Where warden's own files ([`LaunchContext::protect`]) lie inside the
/// write grants (see [`OwnFiles`]). A write grant that *is*, or lies
/// inside, one of them is refused: nothing of it would be the server's to
/// write. A protected path that does not exist yet protects nothing.
fn own_files(write: &[PathBuf], protect: &[PathBuf]) -> Result<OwnFiles, String> {
    let found = inside_grants(
        write.iter(),
        protect,
        |_| true,
        |grant, named| {
            format!(
                "sandbox.write path {} is warden's own {} or inside it (warden's configuration, policies, pins and audit log are never a server's to write); grant a folder beside it",
                grant.display(),
                named.display()
            )
        },
    )?;
    Ok(read_only_binds(found))
}

/// The git folders and `.git` files inside the write grants
/// ([`crate::git::control_paths`]), bound read-only like warden's own
/// files.
fn repository_files(write: &[PathBuf], workspace: &Path) -> Result<OwnFiles, String> {
    let paths = crate::git::control_paths(write, workspace);
    // A write grant deeper inside one of them is its own bind, which wins
    // for its subtree (mount order is by depth); it holds none of them.
    let outer: Vec<PathBuf> = write
        .iter()
        .filter(|g| {
            g.canonicalize()
                .is_ok_and(|g| !paths.iter().any(|p| g.starts_with(p)))
        })
        .cloned()
        .collect();
    let found = inside_grants(
        outer.iter(),
        &paths,
        |_| true,
        |grant, named| {
            format!(
                "sandbox.write path {} lies inside the git folder {}",
                grant.display(),
                named.display()
            )
        },
    )?;
    Ok(read_only_binds(found))
}

/// Read-only binds of `found` (a grant and a path below it), with the
/// folders between each grant and its path pinned.
fn read_only_binds(found: Vec<(&PathBuf, PathBuf)>) -> OwnFiles {
    let mut out = OwnFiles::default();
    for (grant, rest) in found {
        let mut folder = grant.clone();
        let parts: Vec<_> = rest.components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            folder.push(part);
            out.pinned.insert(folder.clone());
        }
        out.read_only.push(grant.join(rest));
    }
    out.read_only.sort();
    out.read_only.dedup();
    // A folder that is itself read-only (the configuration folder), or
    // inside one, needs no pin: its mount already cannot be moved, and a
    // writable pin must not take its place.
    let read_only = &out.read_only;
    out.pinned
        .retain(|p| !read_only.iter().any(|r| p.starts_with(r)));
    out
}

impl OwnFiles {
    fn merge(&mut self, other: &OwnFiles) {
        self.read_only.extend(other.read_only.iter().cloned());
        self.read_only.sort();
        self.read_only.dedup();
        self.pinned.extend(other.pinned.iter().cloned());
        let read_only = &self.read_only;
        self.pinned
            .retain(|p| !read_only.iter().any(|r| p.starts_with(r)));
    }
}

/// Where warden's credentials ([`LaunchContext::hide`]: folders and files)
/// lie inside the configured grants, as paths under each grant (an empty
/// read-only folder, or an unopenable device node, is mounted over each).
/// A grant that is one of them, or lies inside one, is refused.
fn hidden_paths(grants: &[&PathBuf], hide: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    covered_inside(grants.iter().copied(), hide, |grant, named| {
        format!(
            "the grant {} is warden's own {} or inside it, which no server may see (credentials, OAuth logins, the audit log, pins)",
            grant.display(),
            named.display()
        )
    })
}

/// The host's credentials ([`paths::HOST_SECRETS`]) inside any of the
/// view's read or write binds, as paths below the bind; a configured grant
/// that is one of them or lies inside one is refused.
fn host_secret_paths(binds: &[Bind]) -> Result<Vec<PathBuf>, String> {
    covered_inside(
        binds.iter().map(|b| &b.src),
        &paths::host_secrets(),
        |grant, named| {
            format!(
                "the grant {} is the host's credential {} or inside it (password hashes, sudo rules, host and TLS keys), which no server may read",
                grant.display(),
                named.display()
            )
        },
    )
}

/// The folders and files of `covered` that lie inside `grants`, as full
/// paths below each grant, sorted and once each (what is mounted over);
/// `refuse` words a grant that is one of them or lies inside one.
fn covered_inside<'a>(
    grants: impl Iterator<Item = &'a PathBuf>,
    covered: &[PathBuf],
    refuse: impl Fn(&Path, &Path) -> String,
) -> Result<Vec<PathBuf>, String> {
    let found = inside_grants(
        grants,
        covered,
        |p: &Path| p.is_dir() || p.is_file(),
        refuse,
    )?;
    let mut out: Vec<PathBuf> = found
        .into_iter()
        .map(|(grant, rest)| grant.join(rest))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Each of `paths` (resolved; missing ones and those `keep` refuses
/// skipped) that lies inside one of `grants`, as the grant and the rest of
/// the path below it. `Err(refuse(grant, path))` for a grant that is one
/// of `paths` or lies inside one.
fn inside_grants<'a>(
    grants: impl Iterator<Item = &'a PathBuf>,
    paths: &[PathBuf],
    keep: impl Fn(&Path) -> bool,
    refuse: impl Fn(&Path, &Path) -> String,
) -> Result<Vec<(&'a PathBuf, PathBuf)>, String> {
    let paths: Vec<(&PathBuf, PathBuf)> = paths
        .iter()
        .filter_map(|p| p.canonicalize().ok().map(|real| (p, real)))
        .filter(|(_, real)| keep(real))
        .collect();
    let mut out = Vec::new();
    for grant in grants {
        let Ok(grant_real) = grant.canonicalize() else {
            continue;
        };
        for (named, real) in &paths {
            if grant_real.starts_with(real) {
                return Err(refuse(grant, named));
            }
            if let Ok(rest) = real.strip_prefix(&grant_real) {
                out.push((grant, rest.to_path_buf()));
            }
        }
    }
    Ok(out)
}

/// The workspace a configured grant named inside it must stay under,
/// because what the workspace holds is the repository's to choose, not
/// the operator's. A grant of `${WORKSPACE}/data` must not become `~/.ssh`
/// because the repository made `data` a symlink (a project file's grants
/// are checked the same way when loaded, but the workspace can change
/// after that). The helper checks again on the object it binds, so a
/// symlink swapped in after this check is caught too.
struct Workspace<'a> {
    /// As the context names it (grants are written with this prefix).
    named: &'a Path,
    /// Resolved once per launch.
    root: PathBuf,
}

impl<'a> Workspace<'a> {
    fn new(named: &'a Path) -> Self {
        let root = named.canonicalize().unwrap_or_else(|_| named.to_path_buf());
        Workspace { named, root }
    }

    /// The folder `path` must stay under (the resolved workspace), if it is
    /// named inside the workspace. `Err`: it already leads outside (the
    /// message names both paths).
    fn confine(&self, path: &Path) -> Result<Option<PathBuf>, String> {
        if !path.starts_with(self.named) && !path.starts_with(&self.root) {
            return Ok(None);
        }
        let real = path
            .canonicalize()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !real.starts_with(&self.root) {
            return Err(format!(
                "{} is inside the workspace but leads outside it through a symbolic link (to {}); grant the target itself if the server should have it",
                path.display(),
                real.display()
            ));
        }
        Ok(Some(self.root.clone()))
    }
}

/// One bind per path (hidden beats everything; then write beats read-exec
/// beats read: the operator asked for the wider access), and none inside
/// another of the same kind,
/// except the `pinned` folders ([`OwnFiles::pinned`]).
fn dedup_binds(mut binds: Vec<Bind>, pinned: &BTreeSet<PathBuf>) -> Vec<Bind> {
    let rank = |k: BindKind| match k {
        BindKind::Hidden => 0,
        BindKind::Write => 1,
        BindKind::ReadExec => 2,
        BindKind::Read => 3,
    };
    binds.sort_by(|a, b| a.src.cmp(&b.src).then(rank(a.kind).cmp(&rank(b.kind))));
    let mut seen = BTreeSet::new();
    binds.retain(|b| seen.insert(b.src.clone()));
    let all = binds.clone();
    // Redundant: inside another of its kind with no bind of another kind
    // between them (a write grant inside a read-only git folder inside a
    // write grant stays: it is what makes its subtree writable again).
    let between = |o: &Bind, b: &Bind| {
        all.iter().any(|x| {
            x.kind != b.kind
                && x.src != o.src
                && x.src.starts_with(&o.src)
                && b.src.starts_with(&x.src)
        })
    };
    binds.retain(|b| {
        pinned.contains(&b.src)
            || !all.iter().any(|o| {
                o.src != b.src && o.kind == b.kind && b.src.starts_with(&o.src) && !between(o, b)
            })
    });
    // A system bind (optional: the system folders, the `/etc` list) inside
    // a configured grant of wider access is that grant's already. Bound
    // again it needed a mount point made inside the read-only grant, which
    // cannot be done for a symlink (`/etc/os-release`): an `/etc` or `/`
    // read grant never started.
    binds.retain(|b| {
        !b.optional
            || !all.iter().any(|o| {
                !o.optional
                    && o.kind != BindKind::Hidden
                    && rank(o.kind) < rank(b.kind)
                    && o.src != b.src
                    && b.src.starts_with(&o.src)
            })
    });
    binds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{EnvInputs, Limits, Network};

    fn spec() -> LaunchSpec {
        LaunchSpec {
            name: "t".into(),
            program: PathBuf::from("/bin/sh"),
            argv0: None,
            args: vec![],
            env: EnvInputs::default(),
            cwd: None,
            enabled: true,
            trusted: false,
            read: vec![],
            write: vec![],
            network: Network::None,
            limits: Limits::default(),
            best_effort: false,
        }
    }

    #[test]
    fn grants_named_in_the_workspace_are_confined_to_it() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = ws.path().canonicalize().expect("canonical");
        let ctx = crate::LaunchContext::new(ws.path(), "/tmp");
        std::fs::create_dir(ws.path().join("in")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).expect("symlink");
        let mut s = spec();
        s.read = vec![ws.path().join("in"), outside.path().to_path_buf()];
        for view in [true, false] {
            let g = grants(&s, &ctx, "/usr/bin:/bin", view, None).expect("grants");
            let confine_of = |p: &Path| g.binds.iter().find(|b| b.src == p).map(|b| &b.confine);
            assert_eq!(confine_of(&ws.path().join("in")), Some(&Some(root.clone())));
            // The operator's own path outside the workspace is not confined.
            assert_eq!(confine_of(outside.path()), Some(&None));
            // Landlock opens host paths only without a view.
            let expected = if view {
                vec![]
            } else {
                vec![(ws.path().join("in"), root.clone())]
            };
            assert_eq!(g.landlock.confine, expected, "view: {view}");
        }
        s.write = vec![ws.path().join("out")];
        match grants(&s, &ctx, "/usr/bin:/bin", true, None) {
            Err(SandboxError::Setup { detail, .. }) => {
                assert!(detail.starts_with("sandbox.write path"), "{detail}");
                assert!(detail.contains("leads outside"), "{detail}");
            }
            other => panic!("a grant leading outside the workspace was accepted: {other:?}"),
        }
    }

    #[test]
    fn only_private_folders_get_the_rules_that_make_fifos_and_sockets() {
        let under_tmp = tempfile::Builder::new()
            .tempdir_in("/tmp")
            .expect("tempdir");
        // A folder outside /tmp: the sources may be checked out under /tmp
        // (a CI clone), so the first of these that is not.
        let elsewhere = [env!("CARGO_MANIFEST_DIR"), "/var/tmp", "/dev/shm"]
            .into_iter()
            .filter(|d| !Path::new(d).starts_with("/tmp"))
            .find_map(|d| tempfile::Builder::new().tempdir_in(d).ok())
            .expect("a writable folder outside /tmp");
        let ctx = crate::LaunchContext::new(elsewhere.path(), "/tmp");
        let private = |p: &str| PathBuf::from(p);
        // A write grant under /tmp moves the private tmpfs's private rule,
        // which would cover it, to HOME and a TMPDIR folder (/tmp keeps
        // the grants' rule); a read grant there leaves /tmp no rule.
        let split = vec![private(PRIVATE_HOME), private(PRIVATE_TMP)];
        for (write, read, expected, tmp_writable, tmpdir) in [
            (under_tmp.path(), None, &split, true, PRIVATE_TMP),
            (
                elsewhere.path(),
                Some(under_tmp.path()),
                &split,
                false,
                PRIVATE_TMP,
            ),
            (
                elsewhere.path(),
                None,
                &vec![private(PRIVATE_DIR)],
                false,
                PRIVATE_DIR,
            ),
        ] {
            let mut s = spec();
            s.write = vec![write.to_path_buf()];
            s.read = read.iter().map(|r| r.to_path_buf()).collect();
            let g = grants(&s, &ctx, "/usr/bin:/bin", true, None).expect("grants");
            let at = write.display();
            assert_eq!(&g.landlock.private, expected, "{at}");
            assert_eq!(g.tmpdir, Path::new(tmpdir), "{at}");
            assert!(g.landlock.write.iter().any(|w| w == write), "{at}");
            let tmp = Path::new(PRIVATE_DIR);
            assert_eq!(
                g.landlock.write.iter().any(|w| w == tmp),
                tmp_writable,
                "{at}"
            );
            for p in &g.landlock.private {
                assert!(!g.landlock.write.contains(p), "{}", p.display());
            }
        }
        // Without a view, the host HOME and TMPDIR are the private ones.
        let mut s = spec();
        s.write = vec![elsewhere.path().to_path_buf()];
        let (home, tmp) = (Path::new("/h"), Path::new("/t"));
        let g = grants(&s, &ctx, "/usr/bin:/bin", false, Some((home, tmp))).expect("grants");
        assert_eq!(
            g.landlock.private,
            vec![home.to_path_buf(), tmp.to_path_buf()]
        );
        assert!(!g.landlock.write.iter().any(|w| w == home || w == tmp));
    }

    #[test]
    fn binds_are_deduplicated_and_nested_ones_of_the_same_kind_dropped() {
        let b = |p: &str, kind| Bind {
            src: PathBuf::from(p),
            kind,
            optional: false,
            confine: None,
        };
        let out = dedup_binds(
            vec![
                b("/usr", BindKind::ReadExec),
                b("/usr/lib/node_modules", BindKind::ReadExec),
                b("/w", BindKind::Write),
                b("/w", BindKind::ReadExec),
                b("/w/ro", BindKind::ReadExec),
                b("/w/pinned", BindKind::Write),
                b("/w/nested", BindKind::Write),
                // A write grant inside a read-only folder inside a write
                // grant is what makes its subtree writable again.
                b("/w/.git", BindKind::Read),
                b("/w/.git/objects", BindKind::Write),
            ],
            &BTreeSet::from([PathBuf::from("/w/pinned")]),
        );
        let got: Vec<(&str, BindKind)> = out
            .iter()
            .map(|b| (b.src.to_str().unwrap_or(""), b.kind))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/usr", BindKind::ReadExec),
                ("/w", BindKind::Write),
                ("/w/.git", BindKind::Read),
                ("/w/.git/objects", BindKind::Write),
                ("/w/pinned", BindKind::Write),
                ("/w/ro", BindKind::ReadExec)
            ]
        );
    }

    #[test]
    fn system_binds_inside_a_wider_configured_grant_are_dropped() {
        let b = |p: &str, kind, optional| Bind {
            src: PathBuf::from(p),
            kind,
            optional,
            confine: None,
        };
        let out = dedup_binds(
            vec![
                b("/etc", BindKind::ReadExec, false),
                // The `/etc` list (a symlink among them) is the grant's.
                b("/etc/os-release", BindKind::Read, true),
                b("/etc/ssl", BindKind::Read, true),
                // A hidden file stays, whatever covers it.
                b("/etc/shadow", BindKind::Hidden, false),
                // warden's own read-only file inside a write grant stays.
                b("/w", BindKind::Write, false),
                b("/w/warden.json", BindKind::Read, false),
                b("/usr", BindKind::ReadExec, true),
            ],
            &BTreeSet::new(),
        );
        let got: Vec<&str> = out.iter().map(|b| b.src.to_str().unwrap_or("")).collect();
        assert_eq!(
            got,
            vec!["/etc", "/etc/shadow", "/usr", "/w", "/w/warden.json"]
        );
    }

    #[test]
    fn the_hosts_credentials_in_a_grant_are_hidden_and_no_grant_is_one() {
        let etc = Bind {
            src: PathBuf::from("/etc"),
            kind: BindKind::ReadExec,
            optional: false,
            confine: None,
        };
        let hidden = host_secret_paths(std::slice::from_ref(&etc)).expect("hidden");
        for p in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssl/private",
        ] {
            let p = Path::new(p);
            if p.exists() {
                assert!(
                    hidden.iter().any(|h| h == p),
                    "{} not hidden: {hidden:?}",
                    p.display()
                );
            }
        }
        assert!(hidden.iter().all(|h| !h.ends_with(".pub")), "{hidden:?}");
        if Path::new("/etc/shadow").exists() {
            let shadow = Bind {
                src: PathBuf::from("/etc/shadow"),
                ..etc
            };
            let e = host_secret_paths(&[shadow]).expect_err("refused");
            assert!(e.contains("host's credential"), "{e}");
        }
    }

    #[test]
    fn credentials_inside_any_grant_are_hidden_and_no_grant_enters_them() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path();
        let config = h.join(".config/warden");
        std::fs::create_dir_all(config.join("oauth")).expect("mkdir");
        std::fs::write(h.join("file"), "x").expect("write");
        let hide = vec![config.clone(), h.join("file"), h.join("missing")];
        let home_grant = h.to_path_buf();
        assert_eq!(
            hidden_paths(&[&home_grant], &hide).expect("hidden"),
            vec![config.clone(), h.join("file")],
            "a folder and a file inside the grant; a missing path hides nothing"
        );
        let beside = h.join(".config");
        std::fs::create_dir_all(beside.join("other")).expect("mkdir");
        let other = beside.join("other");
        assert!(hidden_paths(&[&other], &hide).expect("ok").is_empty());
        for grant in [config.clone(), config.join("oauth"), h.join("file")] {
            let e = hidden_paths(&[&grant], &hide).expect_err("refused");
            assert!(e.contains("credentials"), "{e}");
        }
    }

    #[test]
    fn warden_files_inside_a_write_grant_become_read_only_binds() {
        let ws = tempfile::tempdir().expect("tempdir");
        let w = ws.path();
        std::fs::create_dir_all(w.join(".warden")).expect("mkdir");
        std::fs::write(w.join(".warden/audit.jsonl"), "").expect("write");
        std::fs::write(w.join("warden.json"), "{}").expect("write");
        std::fs::create_dir_all(w.join("config")).expect("mkdir");
        std::fs::write(w.join("config/pins.json"), "{}").expect("write");
        let protect = vec![
            w.join(".warden/audit.jsonl"),
            w.join("warden.json"),
            w.join("config"),
            w.join("config/pins.json"),
            w.join("not-yet.lock"),
            PathBuf::from("/nonexistent/warden-config"),
        ];
        let got = own_files(&[w.to_path_buf()], &protect).expect("own files");
        assert_eq!(
            got,
            OwnFiles {
                read_only: vec![
                    w.join(".warden/audit.jsonl"),
                    w.join("config"),
                    w.join("config/pins.json"),
                    w.join("warden.json")
                ],
                pinned: BTreeSet::from([w.join(".warden")]),
            }
        );
        // A grant beside them protects nothing.
        std::fs::create_dir(w.join("out")).expect("mkdir");
        assert_eq!(
            own_files(&[w.join("out")], &protect).expect("ok"),
            OwnFiles::default()
        );
        // A grant that is one of them, or inside one, is refused.
        let config_dir = w.join("config");
        std::fs::create_dir_all(config_dir.join("sub")).expect("mkdir");
        for grant in [w.join("warden.json"), config_dir.join("sub")] {
            let e = own_files(
                std::slice::from_ref(&grant),
                &[config_dir.clone(), w.join("warden.json")],
            )
            .expect_err("refused");
            assert!(e.contains("warden's own"), "{e}");
            assert!(e.contains(&grant.display().to_string()), "{e}");
        }
    }
}
