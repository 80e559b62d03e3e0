//! Opening the files warden keeps (the audit log, its head, the pin file)
//! so that a missing one is created where its path says, never where a
//! symlink in its place points.
//!
//! A log or pin file may be a link to where it is kept (README, "The audit
//! log"), so an existing link is followed. But a link to nothing is a
//! different thing: whoever could write the folder (a server whose write
//! grant holds a configured `audit.path`, in an earlier session) could
//! leave `audit.jsonl -> ~/.bash_profile`, and warden would create that
//! file and fill it with lines of text servers choose. So a missing file
//! is created with `O_CREAT | O_EXCL`, which never follows a link, and a
//! link found there is refused by name.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// How many times a file that vanishes between "missing" and "exists"
/// (another process creating and removing it) is tried again before the
/// open gives up.
const TRIES: usize = 4;

/// Opens `path` with `options` (which say how, not whether, to create):
/// an existing file (through a link, if one leads to it) is opened as it
/// is; a missing one is created, but not through a link.
pub fn open_or_create(path: &Path, options: &OpenOptions) -> io::Result<File> {
    for _ in 0..TRIES {
        match options.clone().create(false).create_new(false).open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            opened => return opened,
        }
        match options.clone().create_new(true).open(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if path.symlink_metadata()?.file_type().is_symlink() {
                    return Err(dangling(path));
                }
                // Another process created it meanwhile: open theirs.
            }
            created => return created,
        }
    }
    Err(io::Error::other(format!(
        "{} kept appearing and disappearing while warden opened it",
        path.display()
    )))
}

fn dangling(path: &Path) -> io::Error {
    let target = std::fs::read_link(path)
        .map(|t| format!(" (to {})", t.display()))
        .unwrap_or_default();
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it is a symbolic link{target} to a file that does not exist; warden creates no \
             file where a link points (remove the link, or create the file it names)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn writable() -> OpenOptions {
        let mut o = OpenOptions::new();
        o.append(true);
        o
    }

    #[test]
    fn a_missing_file_is_created_and_an_existing_link_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        open_or_create(&path, &writable())
            .unwrap()
            .write_all(b"a")
            .unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        open_or_create(&link, &writable())
            .unwrap()
            .write_all(b"b")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"ab");
    }

    #[test]
    fn a_link_to_nothing_is_refused_and_its_target_never_made() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("profile");
        let link = dir.path().join("log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = open_or_create(&link, &writable()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!target.exists(), "created through the link");
    }
}
