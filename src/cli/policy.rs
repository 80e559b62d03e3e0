//! `warden policy …`

use super::{CliError, GlobalArgs, PolicyCommand};

pub fn run(_global: &GlobalArgs, _cmd: PolicyCommand) -> anyhow::Result<u8> {
    Err(CliError::usage("`warden policy` is not built yet"))
}
