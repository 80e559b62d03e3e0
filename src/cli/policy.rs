//! `warden policy …`

use super::{PolicyCommand, CliError, GlobalArgs};

pub fn run(_global: &GlobalArgs, _cmd: PolicyCommand) -> anyhow::Result<u8> {
    Err(CliError::usage("`warden policy` is not built yet"))
}
