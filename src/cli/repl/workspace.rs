//! `/workspace [DIR]`: shows the session's workspace and the root servers
//! are given, or narrows that root to DIR (the workspace or a folder in
//! it), telling connected servers with `notifications/roots/list_changed`.
//!
//! Only the root changes. The rules' `${WORKSPACE}`, the policy's
//! `context.workspace` and every sandboxed server's grants stay those of
//! the workspace the session started with (Landlock grants cannot change
//! once a server runs, and a narrower root needs no new grant), so a root
//! can narrow what a server is pointed at, never widen what it may touch.
//! To work in another folder, start warden there (`--workspace DIR`).

use std::path::Path;

use super::Repl;
use warden_core::display;

impl Repl {
    pub(super) async fn workspace(&self, dir: Option<&str>) {
        let started = self.host.workspace().to_path_buf();
        let Some(dir) = dir else {
            println!(
                "workspace: {}",
                display::line(&started.display().to_string())
            );
            println!(
                "root given to servers (roots/list): {}",
                display::line(&self.host.manager().roots().display().to_string())
            );
            return;
        };
        // A relative folder is taken from the current root.
        let wanted = self.host.manager().roots().join(Path::new(dir));
        match self.host.set_roots(&wanted).await {
            Ok((told, failed)) => {
                println!(
                    "root given to servers is now {}",
                    display::line(&self.host.manager().roots().display().to_string())
                );
                if told.is_empty() {
                    println!("(no server connected to tell)");
                } else {
                    println!("told: {}", display::line(&told.join(", ")));
                }
                for (server, error) in failed {
                    eprintln!(
                        "could not tell `{}`: {}",
                        display::line(&server),
                        display::line(&error)
                    );
                }
            }
            Err(error) => eprintln!("/workspace: {}", display::line(&error)),
        }
    }
}
