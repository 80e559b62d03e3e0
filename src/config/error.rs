//! Configuration errors: one message naming the file, the key path, the line
//! and column where known, and what to do about it. Values a user wrote are
//! never echoed when they could be secrets (`env`, `headers`, expanded
//! `${VAR}`s); only key names and JSON types are.

use std::fmt;
use std::path::PathBuf;

use super::json::Pos;

/// What kind of mistake; lets callers and tests tell errors apart without
/// matching on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not JSON: a syntax error.
    Syntax,
    DuplicateKey,
    UnknownKey,
    MissingKey,
    WrongType,
    /// A value of the right type that is not allowed (bad enum, out of range).
    InvalidValue,
    InvalidServerName,
    TimeoutOutOfRange,
    MissingExecutable,
    MissingCwd,
    UnsetVariable,
    InvalidUrl,
    /// Something a project-scope file may not do (CONTRACT §3 trust boundary).
    TrustBoundary,
    MissingPath,
}

/// One located configuration mistake.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub kind: ErrorKind,
    pub file: PathBuf,
    /// Key path such as `mcpServers.fs.timeout`; empty for the whole file.
    pub key: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// What to do next.
    pub help: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `file:line:column:` is what editors and terminals make clickable.
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.key.is_empty() {
            write!(f, "`{}`: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file that exists (or was named with `--config`) could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The workspace directory does not exist or cannot be resolved.
    #[error("workspace {}: {source}\n  help: pass an existing directory with --workspace", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A located mistake in a configuration file.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    /// `approvals.json` could not be read, parsed or written.
    #[error("approvals file {}: {message}", path.display())]
    Approvals { path: PathBuf, message: String },
}

impl ConfigError {
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            ConfigError::Invalid(d) => Some(d),
            _ => None,
        }
    }

    pub fn kind(&self) -> Option<ErrorKind> {
        self.diagnostic().map(|d| d.kind)
    }

    pub(crate) fn at(
        kind: ErrorKind,
        file: impl Into<PathBuf>,
        key: impl Into<String>,
        pos: Option<Pos>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        ConfigError::Invalid(Box::new(Diagnostic {
            kind,
            file: file.into(),
            key: key.into(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            message: message.into(),
            help,
        }))
    }
}
