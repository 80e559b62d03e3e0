//! `warden sandbox …`

use super::{CliError, GlobalArgs, SandboxCommand};

pub fn run(_global: &GlobalArgs, _cmd: SandboxCommand) -> anyhow::Result<u8> {
    Err(CliError::usage("`warden sandbox` is not built yet"))
}
