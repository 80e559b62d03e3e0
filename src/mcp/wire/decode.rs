//! A line → an rmcp message, typed in one step where the line says what
//! it is, and by rmcp's own decoder otherwise.
//!
//! rmcp reads every message through untagged enums: the message kind,
//! then (for a request) each of the 22 `ClientRequest` variants in turn,
//! or (for a response, which names no method) each of the 20
//! `ServerResult` variants until one parses. Every failed variant builds
//! and drops a `serde_json` error, and the message is buffered whole into
//! serde's `Content` first (and again for each flattened layer). In the
//! gateway that was 66 k of a 16 B call's 440 k instructions.
//!
//! The fast readings below give the value rmcp's decoder gives, not an
//! approximation of it:
//! - a `tools/call` request: in an untagged `ClientRequest` every variant
//!   but `CallToolRequest` (and the catch-all `CustomRequest`, tried
//!   last) fails on the method name, so the request is read the way
//!   rmcp's `Request<CallToolRequestMethod, _>` reads it (its parameters,
//!   which may have only the keys `CallToolRequestParams` knows, by rmcp's
//!   `CallToolRequestParams` deserialiser, their `_meta` moved into the
//!   request's extensions), and a line that fails goes to rmcp's decoder
//!   (which then falls to `CustomRequest` or refuses it the same way);
//! - a response whose `result` has only keys of a `CallToolResult`
//!   (`content`, `structuredContent`, `isError`, `resultType`, `_meta`):
//!   every `ServerResult` variant tried before `CallToolResult` requires
//!   a key outside that set, so none of them can match; the result is read
//!   with rmcp's `CallToolResult` deserialiser, and one it refuses goes to
//!   rmcp's decoder. `rmcp_result_variants_before_call_tool_result_need_other_keys`
//!   and the property tests hold this against rmcp.
//!
//! Each is one pass over the line, its values built as they are read (no
//! buffer of the whole message, no second look at a 100 KB string).
//! Anything else about the envelope that is unusual (a key JSON-RPC does
//! not define, a repeated key, an escaped key or method, no `jsonrpc`)
//! also goes to rmcp's decoder, as does a key the parameters' or the
//! result's type does not know (see [`OnlyKeys`]: a value skipped unread
//! would go unchecked), and so does every other kind of message:
//! its compatibility rules (non-MCP notifications ignored, a well-formed
//! message of no known shape answered with Invalid Request) stay rmcp's.

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use tokio_util::bytes::{BufMut, BytesMut};
use tokio_util::codec::Decoder;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    JsonRpcMessage, JsonRpcRequest, JsonRpcResponse, JsonRpcVersion2_0, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use rmcp::{RoleClient, RoleServer};

/// What a line was.
#[derive(Debug)]
pub(super) enum Decoded<T> {
    Message(T),
    /// A notification rmcp ignores for compatibility (not MCP's).
    Ignored,
    /// Not JSON: dropped, never answered (an answer could start an error
    /// storm with a peer that echoes it).
    Unparsable(serde_json::Error),
    /// JSON, but no message rmcp knows: answered with Invalid Request.
    Invalid(serde_json::Error),
}

/// The role-specific half: which lines have a fast reading.
pub(crate) trait ReadRole: ServiceRole {
    /// The message, read in one pass; `None` leaves the line to rmcp.
    fn read_fast(line: &[u8]) -> Option<RxJsonRpcMessage<Self>>;

    /// A message that reads but is answered with an error by the
    /// transport of a peer that reports refusals, not handed to rmcp.
    fn refused(_message: &RxJsonRpcMessage<Self>) -> Option<super::unreadable::Unreadable> {
        None
    }
}

/// Reads one line (without its newline) as rmcp would.
pub(super) fn decode<R: ReadRole>(line: &[u8]) -> Decoded<RxJsonRpcMessage<R>> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    match R::read_fast(line) {
        Some(message) => Decoded::Message(message),
        None => decode_with_rmcp::<R>(line),
    }
}

/// rmcp's own decoder (its line codec), for every line without a fast
/// reading: the same value, compatibility rules and errors as rmcp's
/// `AsyncRwTransport`.
pub(super) fn decode_with_rmcp<R: ServiceRole>(line: &[u8]) -> Decoded<RxJsonRpcMessage<R>> {
    let mut framed = BytesMut::with_capacity(line.len() + 1);
    framed.extend_from_slice(line);
    framed.put_u8(b'\n');
    let mut codec = JsonRpcMessageCodec::<RxJsonRpcMessage<R>>::default();
    match codec.decode(&mut framed) {
        Ok(Some(message)) => Decoded::Message(message),
        Ok(None) => Decoded::Ignored,
        Err(JsonRpcMessageCodecError::Serde(error)) => match error.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                Decoded::Unparsable(error)
            }
            serde_json::error::Category::Data | serde_json::error::Category::Io => {
                Decoded::Invalid(error)
            }
        },
        // The codec reports only serde errors for a whole line; anything
        // else is treated as unreadable input.
        Err(other) => Decoded::Unparsable(de::Error::custom(other)),
    }
}

impl ReadRole for RoleServer {
    /// A client's `tools/call`.
    fn read_fast(line: &[u8]) -> Option<ClientJsonRpcMessage> {
        serde_json::from_slice::<ToolsCall>(line)
            .ok()
            .map(|call| call.0)
    }

    /// An `initialize` rmcp could not read as one.
    fn refused(message: &ClientJsonRpcMessage) -> Option<super::unreadable::Unreadable> {
        match message {
            ClientJsonRpcMessage::Request(request) => super::unreadable::unread_initialize(request),
            _ => None,
        }
    }
}

impl ReadRole for RoleClient {
    /// A server's answer with a tool result.
    fn read_fast(line: &[u8]) -> Option<ServerJsonRpcMessage> {
        serde_json::from_slice::<ToolResult>(line)
            .ok()
            .map(|result| result.0)
    }
}

/// The keys rmcp's `CallToolRequestParams` reads (`_meta` included: the
/// fast reading moves it where rmcp's `Request` puts it); a call with any
/// other is left to rmcp.
pub(super) const CALL_TOOL_PARAMS_KEYS: [&str; 5] = [
    "name",
    "arguments",
    "_meta",
    "inputResponses",
    "requestState",
];

/// The keys a `CallToolResult` reads; a result with any other key is left
/// to rmcp (another `ServerResult` variant may be the one it is).
pub(super) const CALL_TOOL_RESULT_KEYS: [&str; 5] = [
    "content",
    "structuredContent",
    "isError",
    "resultType",
    "_meta",
];

/// A key from `allowed`, once each; any other, a repeated or an escaped
/// one fails the fast reading.
fn known_key<'de, A: MapAccess<'de>>(
    map: &mut A,
    allowed: &[&str],
    seen: &mut u8,
) -> Result<Option<&'de str>, A::Error> {
    let Some(key) = map.next_key::<&'de str>()? else {
        return Ok(None);
    };
    let bit = allowed
        .iter()
        .position(|k| *k == key)
        .ok_or_else(|| de::Error::custom("a key this reading does not take"))?;
    if *seen & (1 << bit) != 0 {
        return Err(de::Error::custom("a repeated key"));
    }
    *seen |= 1 << bit;
    Ok(Some(key))
}

/// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{…}}`, in any
/// order, read in one pass.
struct ToolsCall(ClientJsonRpcMessage);

impl<'de> Deserialize<'de> for ToolsCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CallVisitor;
        impl<'de> Visitor<'de> for CallVisitor {
            type Value = ToolsCall;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tools/call request")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolsCall, A::Error> {
                const KEYS: [&str; 4] = ["jsonrpc", "id", "method", "params"];
                let (mut seen, mut jsonrpc, mut id, mut params) = (0u8, None, None, None);
                while let Some(key) = known_key(&mut map, &KEYS, &mut seen)? {
                    match key {
                        "jsonrpc" => jsonrpc = Some(map.next_value::<JsonRpcVersion2_0>()?),
                        "id" => id = Some(map.next_value::<RequestId>()?),
                        "method" => {
                            if map.next_value::<&'de str>()? != "tools/call" {
                                return Err(de::Error::custom("another method"));
                            }
                        }
                        _ => {
                            params = Some(map.next_value_seed(
                                OnlyKeys::<CallToolRequestParams>::of(&CALL_TOOL_PARAMS_KEYS),
                            )?)
                        }
                    }
                }
                let (Some(jsonrpc), Some(id), Some(mut params), 0b1111) =
                    (jsonrpc, id, params, seen)
                else {
                    return Err(de::Error::custom("not a whole tools/call request"));
                };
                // rmcp's `Request` takes `params._meta` into its extensions
                // (the parameters' own `meta` stays empty).
                let meta = params.meta.take();
                let mut request = CallToolRequest::new(params);
                if let Some(meta) = meta {
                    request.extensions.insert(meta);
                }
                Ok(ToolsCall(JsonRpcMessage::Request(JsonRpcRequest {
                    jsonrpc,
                    id,
                    request: ClientRequest::CallToolRequest(request),
                })))
            }
        }
        deserializer.deserialize_map(CallVisitor)
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":{…}}` whose result has only a
/// `CallToolResult`'s keys, in any order, read in one pass.
struct ToolResult(ServerJsonRpcMessage);

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ResultVisitor;
        impl<'de> Visitor<'de> for ResultVisitor {
            type Value = ToolResult;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool result")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResult, A::Error> {
                const KEYS: [&str; 3] = ["jsonrpc", "id", "result"];
                let (mut seen, mut jsonrpc, mut id, mut result) = (0u8, None, None, None);
                while let Some(key) = known_key(&mut map, &KEYS, &mut seen)? {
                    match key {
                        "jsonrpc" => jsonrpc = Some(map.next_value::<JsonRpcVersion2_0>()?),
                        "id" => id = Some(map.next_value::<RequestId>()?),
                        _ => {
                            result = Some(map.next_value_seed(OnlyKeys::<CallToolResult>::of(
                                &CALL_TOOL_RESULT_KEYS,
                            ))?)
                        }
                    }
                }
                let (Some(jsonrpc), Some(id), Some(result)) = (jsonrpc, id, result) else {
                    return Err(de::Error::custom("not a whole response"));
                };
                Ok(ToolResult(JsonRpcMessage::Response(JsonRpcResponse {
                    jsonrpc,
                    id,
                    result: ServerResult::CallToolResult(result),
                })))
            }
        }
        deserializer.deserialize_map(ResultVisitor)
    }
}

/// rmcp's deserialiser for `T`, fed an object whose keys are checked as
/// they are read: any key outside `keys`, or one twice, fails it. This is
/// also what keeps the fast readings from skipping a value unread: serde
/// skips an unknown key's value without checking its strings are UTF-8 or
/// its nesting is within the depth limit, which rmcp (buffering the whole
/// line first) does check; with every key known, no value is skipped.
struct OnlyKeys<T> {
    keys: &'static [&'static str],
    _type: PhantomData<fn() -> T>,
}

impl<T> OnlyKeys<T> {
    fn of(keys: &'static [&'static str]) -> Self {
        Self {
            keys,
            _type: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for OnlyKeys<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(CheckedKeys {
            inner: deserializer,
            keys: self.keys,
        })
    }
}

struct CheckedKeys<D> {
    inner: D,
    keys: &'static [&'static str],
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for CheckedKeys<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let keys = self.keys;
        self.inner.deserialize_map(CheckedVisitor { visitor, keys })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct CheckedVisitor<V> {
    visitor: V,
    keys: &'static [&'static str],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for CheckedVisitor<V> {
    type Value = V::Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.visitor.expecting(f)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(CheckedMap {
            map,
            keys: self.keys,
            seen: 0,
        })
    }
}

struct CheckedMap<A> {
    map: A,
    keys: &'static [&'static str],
    seen: u8,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CheckedMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match known_key(&mut self.map, self.keys, &mut self.seen)? {
            Some(key) => seed
                .deserialize(de::value::BorrowedStrDeserializer::new(key))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
