//! `warden audit …`

use super::{AuditCommand, CliError, GlobalArgs};

pub fn run(_global: &GlobalArgs, _cmd: AuditCommand) -> anyhow::Result<u8> {
    Err(CliError::usage("`warden audit` is not built yet"))
}
