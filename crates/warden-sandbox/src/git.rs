//! The git repositories a write grant would otherwise let a server
//! rewrite: their control files run code on the host. A server that can
//! write `.git/config` sets `core.fsmonitor` (run by the next `git status`,
//! which many shell prompts call on every line), `core.pager`,
//! `core.hooksPath` or a filter; one that can write `.git/hooks/` plants a
//! hook; one that can rename `.git` or rewrite a `.git` file
//! (`gitdir: …`) points git at a folder of its own. All of it runs as the
//! person, outside every sandbox, the next time they use git there.
//!
//! [`control_paths`] finds, when a launch is prepared, the git folders and
//! `.git` files of the workspace's repository and of one at the root of
//! each write grant, with the submodules and linked worktrees git records
//! for them. Each that lies inside a write grant is bound read-only over
//! it (`grants`), unless the operator granted that path itself
//! (`write: ["${WORKSPACE}/.git"]` for a server that commits); a write
//! grant deeper inside one keeps only its own subtree writable.
//! A repository the server creates itself, anywhere in its grant, is its
//! own code: git there is as safe as running that code (README says so).

use std::path::{Path, PathBuf};

/// How deep submodules of submodules are followed (git nests their git
/// folders under `modules/`); deeper ones are rare and left out.
const MAX_MODULE_DEPTH: usize = 4;

/// The repository control paths (resolved) that lie inside one of `write`
/// (resolved) with no write grant at or inside them.
pub(crate) fn control_paths(write: &[PathBuf], workspace: &Path) -> Vec<PathBuf> {
    let grants: Vec<PathBuf> = write.iter().filter_map(|w| w.canonicalize().ok()).collect();
    if grants.is_empty() {
        return Vec::new();
    }
    let mut starts: Vec<PathBuf> = grants.clone();
    starts.push(workspace.to_path_buf());
    let mut found = Vec::new();
    for start in &starts {
        if let Some(dotgit) = discover(start) {
            repository(&dotgit, 0, &mut found);
        }
    }
    let found: Vec<PathBuf> = found
        .into_iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    // A grant of a control path itself is the operator's choice, which
    // covers everything below it. A grant deeper inside one (say
    // `.git/objects`) keeps the rest read-only: its own bind, deeper, wins
    // for its subtree only.
    let explicit: Vec<&PathBuf> = grants
        .iter()
        .filter(|g| found.iter().any(|p| p == *g))
        .collect();
    let mut out: Vec<PathBuf> = found
        .iter()
        .filter(|p| grants.iter().any(|g| p.starts_with(g) && p != &g))
        .filter(|p| !explicit.iter().any(|g| p.starts_with(g)))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    // A path inside another one already read-only needs no bind of its own.
    let all = out.clone();
    out.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
    out
}

/// The `.git` that git finds from `start`: in it or its nearest ancestor.
fn discover(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.symlink_metadata().is_ok())
}

/// The control paths of the repository whose `.git` is `dotgit`: the
/// `.git` itself, the git folder a `.git` file names and its common folder
/// (a linked worktree's), and the same for the submodules and linked
/// worktrees that folder records.
fn repository(dotgit: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    out.push(dotgit.to_path_buf());
    let Some(gitdir) = git_folder(dotgit) else {
        return;
    };
    out.push(gitdir.clone());
    if let Some(common) = pointer(&gitdir.join("commondir"), &gitdir) {
        out.push(common);
    }
    // Linked worktrees: `worktrees/<id>/gitdir` names their `.git` file.
    for entry in read_dir(&gitdir.join("worktrees")) {
        if let Some(file) = pointer(&entry.join("gitdir"), &entry) {
            out.push(file);
        }
    }
    // Submodules: `modules/<name>/config` names their work tree, whose
    // `.git` file points back here.
    if depth < MAX_MODULE_DEPTH {
        for module in modules(&gitdir.join("modules")) {
            if let Some(tree) = worktree_of(&module) {
                repository(&tree.join(".git"), depth + 1, out);
            }
        }
    }
}

/// The git folder of a `.git`: itself, or where its `gitdir:` line points.
fn git_folder(dotgit: &Path) -> Option<PathBuf> {
    let meta = dotgit.symlink_metadata().ok()?;
    if meta.is_dir() {
        return Some(dotgit.to_path_buf());
    }
    let text = std::fs::read_to_string(dotgit).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(dotgit.parent()?.join(target))
}

/// A path written in `file` (relative to `base`), as git's `commondir` and
/// `gitdir` files hold it.
fn pointer(file: &Path, base: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| base.join(line))
}

fn read_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries.filter_map(|e| e.ok().map(|e| e.path())).collect()
}

/// The git folders below `modules/` (a module's name may hold slashes,
/// so a folder without a `config` is searched further).
fn modules(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = todo.pop() {
        for entry in read_dir(&d) {
            if entry.join("config").is_file() {
                out.push(entry);
            } else if entry.is_dir() && depth < MAX_MODULE_DEPTH {
                todo.push((entry, depth + 1));
            }
        }
    }
    out
}

/// `core.worktree` of a submodule's git folder, resolved against it.
fn worktree_of(gitdir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(gitdir.join("config")).ok()?;
    let value = text.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("worktree")
            .then(|| value.trim().trim_matches('"').to_string())
    })?;
    Some(gitdir.join(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(dir: &Path) {
        for d in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(dir.join(".git").join(d)).expect("mkdir");
        }
        std::fs::write(dir.join(".git/config"), "[core]\n").expect("config");
    }

    #[test]
    fn the_workspace_repository_its_submodules_and_worktrees_are_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().canonicalize().expect("canonical").join("ws");
        init(&ws);
        // A submodule at ws/lib, its git folder under .git/modules.
        let module = ws.join(".git/modules/lib");
        std::fs::create_dir_all(&module).expect("mkdir");
        std::fs::write(module.join("config"), "[core]\n\tworktree = ../../../lib\n")
            .expect("config");
        std::fs::create_dir_all(ws.join("lib")).expect("mkdir");
        std::fs::write(ws.join("lib/.git"), "gitdir: ../.git/modules/lib\n").expect(".git");
        // A linked worktree beside the workspace, inside the same grant.
        let wt = tmp.path().canonicalize().expect("canonical").join("wt");
        std::fs::create_dir_all(ws.join(".git/worktrees/wt")).expect("mkdir");
        std::fs::create_dir_all(&wt).expect("mkdir");
        std::fs::write(wt.join(".git"), "gitdir: ../ws/.git/worktrees/wt\n").expect(".git");
        std::fs::write(
            ws.join(".git/worktrees/wt/gitdir"),
            format!("{}\n", wt.join(".git").display()),
        )
        .expect("gitdir");
        std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../..\n").expect("commondir");

        let parent = tmp.path().canonicalize().expect("canonical");
        let got = control_paths(std::slice::from_ref(&parent), &ws);
        assert_eq!(
            got,
            vec![ws.join(".git"), ws.join("lib/.git"), wt.join(".git")],
            "the git folder (modules and worktrees inside it) and each .git file"
        );
        // A grant of the git folder is the operator's choice.
        let got = control_paths(&[ws.clone(), ws.join(".git")], &ws);
        assert_eq!(got, vec![ws.join("lib/.git")]);
        // One deeper inside it leaves the rest of it read-only.
        let got = control_paths(&[ws.clone(), ws.join(".git/objects")], &ws);
        assert_eq!(got, vec![ws.join(".git"), ws.join("lib/.git")]);
        // A repository outside every write grant needs nothing.
        std::fs::create_dir_all(ws.join("out")).expect("mkdir");
        assert!(control_paths(&[ws.join("out")], &tmp.path().join("elsewhere")).is_empty());
    }

    #[test]
    fn a_git_file_of_the_grant_and_the_folder_it_names_are_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("canonical");
        let real = root.join("store/repo.git");
        std::fs::create_dir_all(&real).expect("mkdir");
        std::fs::create_dir_all(root.join("ws")).expect("mkdir");
        std::fs::write(root.join("ws/.git"), "gitdir: ../store/repo.git\n").expect(".git");
        let got = control_paths(std::slice::from_ref(&root), &root.join("ws"));
        assert_eq!(got, vec![real, root.join("ws/.git")]);
    }
}
