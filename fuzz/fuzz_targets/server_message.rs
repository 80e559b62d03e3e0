//! A stdio peer's byte stream as warden reads it: the input is what a
//! server writes to its stdout (or a client to `warden gateway --stdio`),
//! read by warden's transport (`src/mcp/wire/`) and by rmcp's
//! `AsyncRwTransport`, as the client role and as the server role.
//! Properties: no panic, no hang, and both transports receive the same
//! messages and write back the same answers (the first input byte picks
//! the line limit, so that dropped lines are reached too).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&limit, stream)) = data.split_first() else {
        return;
    };
    let max_line = if limit < 128 { 16 + usize::from(limit) * 8 } else { 16 << 20 };
    warden::fuzzing::wire_matches_rmcp(stream, max_line);
});
