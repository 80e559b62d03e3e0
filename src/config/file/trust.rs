//! The trust boundary of CONTRACT §3: what a project file (a `.mcp.json`
//! shipped by a repository) may not do is refused at the key that tries,
//! with [`PROJECT_WHY`] appended; paths it names must stay inside the
//! workspace, also after symlinks are resolved.

use super::*;

/// Why project files are limited; appended to every trust-boundary error.
const PROJECT_WHY: &str = "a project `.mcp.json` is shipped by the repository, so it may only add \
servers (which need your approval), `ask`/`deny` rules and restrictive policies; put this in your \
own config file ($WARDEN_CONFIG_DIR/config.json) or pass --config";

impl Ctx<'_> {
    pub(super) fn boundary(&self, key: &str, pos: Pos, what: &str) -> ConfigError {
        self.err(
            ErrorKind::TrustBoundary,
            key,
            pos,
            format!("a project-scope file may not {what}"),
            Some(PROJECT_WHY.to_string()),
        )
    }

    /// Whether `path` (absolute, normalised) stays inside the workspace, also
    /// after resolving symlinks: a repository can ship `link -> /home/me`,
    /// and the sandbox would grant what the link points to.
    pub(super) fn inside_workspace(&self, path: &Path) -> bool {
        self.inside(path, self.workspace)
    }

    /// Whether `path` is under `root`, lexically and after resolving symlinks.
    pub(super) fn inside(&self, path: &Path, root: &Path) -> bool {
        let Ok(root) = std::fs::canonicalize(root) else {
            return false;
        };
        if !path.starts_with(&root) {
            return false;
        }
        let mut probe = path;
        loop {
            if let Ok(real) = std::fs::canonicalize(probe) {
                return real.starts_with(&root);
            }
            match probe.parent() {
                Some(parent) => probe = parent,
                None => return false,
            }
        }
    }
}
