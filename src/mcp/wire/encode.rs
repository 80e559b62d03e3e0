//! An rmcp message → one line, written straight into the frame.
//!
//! rmcp serialises a request's `params` by converting them to a
//! `serde_json::Value` first (to merge the `_meta` of its extensions into
//! them), which copies every argument: 100 KB of arguments are built
//! twice before a byte is written. For a `tools/call`, the one request
//! warden sends with large arguments, the merge is done on the output
//! instead: the parameters are written as they are, then `_meta`.
//! A call whose parameters carry a `_meta` of their own, or whose
//! extensions carry rmcp's legacy `MetaObject`, needs rmcp's merge and is
//! serialised by rmcp. Every other message is serialised by rmcp as it is.
//! The JSON value written is rmcp's (`fast_tools_call_is_rmcps_value`);
//! only the order of keys in `params` may differ.

use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, MetaObject, RequestId,
    RequestMetaObject,
};
use rmcp::service::{ServiceRole, TxJsonRpcMessage};
use rmcp::{RoleClient, RoleServer};

/// The role-specific half: which messages are written without rmcp's
/// serialiser.
pub(crate) trait WriteRole: ServiceRole {
    /// Writes `item` into `frame` if it has a faster form; `false` leaves
    /// `frame` untouched for rmcp's.
    fn write_fast(
        _item: &TxJsonRpcMessage<Self>,
        _frame: &mut Vec<u8>,
    ) -> serde_json::Result<bool> {
        Ok(false)
    }
}

impl WriteRole for RoleServer {}

impl WriteRole for RoleClient {
    fn write_fast(item: &ClientJsonRpcMessage, frame: &mut Vec<u8>) -> serde_json::Result<bool> {
        match item {
            JsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::CallToolRequest(call) => write_tools_call(&request.id, call, frame),
                _ => Ok(false),
            },
            _ => Ok(false),
        }
    }
}

/// One message as a line, `\n` included.
pub(super) fn encode<R: WriteRole>(item: &TxJsonRpcMessage<R>) -> serde_json::Result<Vec<u8>> {
    let mut frame = Vec::with_capacity(256);
    if !R::write_fast(item, &mut frame)? {
        warden_core::json::write(&mut frame, item)?;
    }
    frame.push(b'\n');
    Ok(frame)
}

/// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{…,"_meta":…}}`
fn write_tools_call(
    id: &RequestId,
    call: &CallToolRequest,
    frame: &mut Vec<u8>,
) -> serde_json::Result<bool> {
    if call.params.meta.is_some() || call.extensions.get::<MetaObject>().is_some() {
        return Ok(false);
    }
    frame.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    warden_core::json::write(frame, id)?;
    frame.extend_from_slice(br#","method":"tools/call","params":"#);
    warden_core::json::write(frame, &call.params)?;
    if let Some(meta) = call.extensions.get::<RequestMetaObject>() {
        // `_meta` joins the parameters' object as its last key: the
        // closing `}` is taken off and put back after it.
        if frame.pop() != Some(b'}') {
            return Err(serde::ser::Error::custom(
                "tool call parameters did not serialise as an object",
            ));
        }
        if frame.last() != Some(&b'{') {
            frame.push(b',');
        }
        frame.extend_from_slice(br#""_meta":"#);
        warden_core::json::write(frame, meta)?;
        frame.push(b'}');
    }
    frame.push(b'}');
    Ok(true)
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
