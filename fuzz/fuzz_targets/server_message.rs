//! A server's stdout as warden reads it: the input is the byte stream a
//! stdio server writes, framed and deserialised by rmcp's
//! `AsyncRwTransport` (the transport `src/mcp/stdio.rs` wraps) as the
//! client role, until the stream ends. Properties: no panic, no hang, and
//! every message received re-serialises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;

fuzz_target!(|data: &[u8]| {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    runtime.block_on(async {
        let mut transport =
            AsyncRwTransport::<RoleClient, _, _>::new_client(data, tokio::io::sink());
        let mut received = 0usize;
        while let Some(message) = transport.receive().await {
            let _ = serde_json::to_string(&message).expect("a received message serialises");
            received += 1;
            assert!(received <= data.len(), "more messages than input bytes");
        }
    });
});
