//! An event serialised straight to canonical JSON, scrubbed on the way.
//!
//! The general path ([`super::line::value_line`]) builds a `serde_json::Value`
//! tree, scrubs it, and writes it out: a `BTreeMap` insert and a `String`
//! per field, then a second pass. [`Encoder::record`] writes the same bytes
//! in one pass from the event's own `Serialize` impl: each object's members
//! are written as they come, then put in key order when the object ends;
//! strings and numbers are scrubbed as they are written, with the same
//! per-value rules as [`Scrubber::scrub`] and [`crate::scrub::redact_urls`].
//!
//! What it does not handle it refuses with [`Fallback`], and the caller takes
//! the general path instead, so the result is always exactly what that path
//! writes: a key holding a secret (renaming keys can merge two members, and
//! that merge is the general path's business), two members with one key,
//! and serde shapes no record uses (bytes, 128-bit integers, tuple and
//! struct variants, non-string map keys).

use std::ops::Range;

use serde::ser::{self, Serialize};

use crate::scrub::{Scrubber, has_url};

/// "Take the general path": not an error, the record is written either way.
#[derive(Debug)]
pub(crate) struct Fallback;

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not encodable in one pass")
    }
}

impl std::error::Error for Fallback {}

impl ser::Error for Fallback {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        Fallback
    }
}

type Result<T> = std::result::Result<T, Fallback>;

/// Reusable buffers (one per log, kept under its chain lock, so a record
/// costs no allocation once they have grown).
#[derive(Default)]
pub(crate) struct Encoder {
    /// The objects being built: each member as `"key":value`, in the order
    /// it came; rewritten in key order when its object ends.
    out: Vec<u8>,
    /// Members of the objects still open (a stack of frames).
    members: Vec<Member>,
    /// Their keys, unescaped (what the canonical order compares).
    keys: Vec<u8>,
    /// Where an ending object is put in order.
    scratch: Vec<u8>,
}

struct Member {
    /// The key's first 8 bytes, big-endian, zero-padded: orders most
    /// pairs of keys without comparing the keys themselves.
    prefix: u64,
    key: Range<usize>,
    bytes: Range<usize>,
}

impl Member {
    fn new(keys: &[u8], key: Range<usize>, bytes: Range<usize>) -> Member {
        let mut first = [0u8; 8];
        let text = &keys[key.clone()];
        let n = text.len().min(8);
        first[..n].copy_from_slice(&text[..n]);
        Member {
            prefix: u64::from_be_bytes(first),
            key,
            bytes,
        }
    }
}

/// Where an object's members begin in each buffer.
#[derive(Clone, Copy)]
struct Frame {
    out: usize,
    members: usize,
    keys: usize,
}

/// How a value is treated: [`crate::scrub::MemberRule`], by the member
/// it is in.
use crate::scrub::MemberRule as Rule;

/// A chain field's value, written after the event's own members.
pub(crate) enum ChainValue<'a> {
    Number(u64),
    Str(&'a str),
}

impl Encoder {
    /// Writes the record line of `event` (its members, scrubbed, and the
    /// chain fields `chain`, all in canonical order, with `"hash":"…"`
    /// spliced in where it sorts, and `\n`) to `line`, returning the hash
    /// `hash_of` computed over the canonical JSON without `hash`. Leaves
    /// `line` as it was when it returns [`Fallback`].
    pub(crate) fn record<T: Serialize + ?Sized>(
        &mut self,
        event: &T,
        chain: &[(&'static str, ChainValue<'_>)],
        scrubber: &Scrubber,
        line: &mut Vec<u8>,
        hash_of: impl FnOnce(&[u8]) -> [u8; 64],
    ) -> Result<[u8; 64]> {
        self.clear();
        let result = self.record_inner(event, chain, scrubber, line, hash_of);
        self.clear();
        result
    }

    fn clear(&mut self) {
        self.out.clear();
        self.members.clear();
        self.keys.clear();
        self.scratch.clear();
    }

    fn record_inner<T: Serialize + ?Sized>(
        &mut self,
        event: &T,
        chain: &[(&'static str, ChainValue<'_>)],
        scrubber: &Scrubber,
        line: &mut Vec<u8>,
        hash_of: impl FnOnce(&[u8]) -> [u8; 64],
    ) -> Result<[u8; 64]> {
        let frame = self.frame();
        event.serialize(Ser {
            enc: self,
            scrubber,
            rule: Rule::Text,
            top: true,
        })?;
        // The event must have been an object, leaving its members open.
        if self.members.is_empty() {
            return Err(Fallback);
        }
        for (key, value) in chain {
            let k = push_key(&mut self.keys, key);
            let start = self.out.len();
            write_str(&mut self.out, key);
            self.out.push(b':');
            match value {
                ChainValue::Number(n) => write_json(&mut self.out, n)?,
                ChainValue::Str(s) => write_str(&mut self.out, s),
            }
            let member = Member::new(&self.keys, k, start..self.out.len());
            self.members.push(member);
        }
        let splice = self.order(frame, Some("hash"))?;
        let canonical = &self.scratch;
        let hash = hash_of(canonical);
        // `"hash":"…"` goes where the first key that sorts after it begins
        // (at its comma, or right after `{` with a comma after it); or
        // last, with a comma before it.
        let (at, comma_before, comma_after) = match splice {
            Some((at, true)) => (at, true, false),
            Some((at, false)) => (at, false, true),
            None => (canonical.len() - 1, canonical.len() > 2, false),
        };
        line.reserve(canonical.len() + 80);
        line.extend_from_slice(&canonical[..at]);
        if comma_before {
            line.push(b',');
        }
        line.extend_from_slice(b"\"hash\":\"");
        line.extend_from_slice(&hash);
        line.push(b'"');
        if comma_after {
            line.push(b',');
        }
        line.extend_from_slice(&canonical[at..]);
        line.push(b'\n');
        Ok(hash)
    }

    fn frame(&self) -> Frame {
        Frame {
            out: self.out.len(),
            members: self.members.len(),
            keys: self.keys.len(),
        }
    }

    /// Puts the members of the object begun at `frame` in key order, as
    /// `{…}`, into `scratch`, and drops them from the buffers. With
    /// `splice` (a key no member may have), returns where in `scratch` the
    /// first member whose key sorts after it begins: the offset of its
    /// comma (`true`), or of itself when it is the first member (`false`).
    fn order(&mut self, frame: Frame, splice: Option<&str>) -> Result<Option<(usize, bool)>> {
        let keys = &self.keys;
        let members = &mut self.members[frame.members..];
        // Bytewise order: the prefixes decide unless they are equal (zero
        // padding ties "ab" with "ab\0", which the keys then tell apart).
        members.sort_unstable_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| keys[a.key.clone()].cmp(&keys[b.key.clone()]))
        });
        if members
            .windows(2)
            .any(|w| w[0].prefix == w[1].prefix && keys[w[0].key.clone()] == keys[w[1].key.clone()])
        {
            // Two members with one key: whichever the general path keeps.
            return Err(Fallback);
        }
        let mut at = None;
        self.scratch.clear();
        self.scratch.push(b'{');
        for (i, member) in members.iter().enumerate() {
            if at.is_none()
                && let Some(splice) = splice
            {
                let key = &keys[member.key.clone()];
                if key == splice.as_bytes() {
                    return Err(Fallback);
                }
                if key > splice.as_bytes() {
                    at = Some((self.scratch.len(), i > 0));
                }
            }
            if i > 0 {
                self.scratch.push(b',');
            }
            self.scratch
                .extend_from_slice(&self.out[member.bytes.clone()]);
        }
        self.scratch.push(b'}');
        self.out.truncate(frame.out);
        self.members.truncate(frame.members);
        self.keys.truncate(frame.keys);
        Ok(at)
    }

    /// Ends a nested object: its members, in order, replace what was
    /// written of it.
    fn close(&mut self, frame: Frame) -> Result<()> {
        self.order(frame, None)?;
        self.out.extend_from_slice(&self.scratch);
        Ok(())
    }
}

fn push_key(keys: &mut Vec<u8>, key: &str) -> Range<usize> {
    let start = keys.len();
    keys.extend_from_slice(key.as_bytes());
    start..keys.len()
}

/// A JSON string exactly as `serde_json` escapes it (runs without
/// escapes copied whole).
fn write_str(out: &mut Vec<u8>, s: &str) {
    warden_core::digest::write_json_str(out, s);
}

fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(out, value).map_err(|_| Fallback)
}

struct Ser<'e, 's> {
    enc: &'e mut Encoder,
    scrubber: &'s Scrubber,
    rule: Rule,
    /// The record itself: its members stay open for the chain fields.
    top: bool,
}

impl<'e, 's> Ser<'e, 's> {
    /// A string value, scrubbed by its rule (as `Scrubber::scrub`, then
    /// `redact_urls` outside the arguments).
    fn string(self, s: &str) -> Result<()> {
        if self.top {
            return Err(Fallback);
        }
        let out = &mut self.enc.out;
        if self.rule == Rule::Exempt {
            write_str(out, s);
            return Ok(());
        }
        let scrubbed = self.scrubber.scrub_str(s);
        let s = scrubbed.as_deref().unwrap_or(s);
        if self.rule == Rule::Text && has_url(s) {
            write_str(out, &warden_core::redact::urls_in(s));
        } else {
            write_str(out, s);
        }
        Ok(())
    }

    /// A number: its decimal form, or `"[REDACTED]"` when that holds a
    /// secret (as `Scrubber::scrub`).
    fn number<T: Serialize>(self, n: T) -> Result<()> {
        if self.top {
            return Err(Fallback);
        }
        let out = &mut self.enc.out;
        let start = out.len();
        write_json(out, &n)?;
        if self.rule != Rule::Exempt && self.scrubber.number_holds_secret(&out[start..]) {
            out.truncate(start);
            write_str(out, crate::REDACTED);
        }
        Ok(())
    }

    fn literal(self, text: &[u8]) -> Result<()> {
        if self.top {
            return Err(Fallback);
        }
        self.enc.out.extend_from_slice(text);
        Ok(())
    }

    fn object(self) -> Obj<'e, 's> {
        let frame = self.enc.frame();
        Obj {
            frame,
            enc: self.enc,
            scrubber: self.scrubber,
            rule: self.rule,
            top: self.top,
            key: None,
        }
    }

    fn array(self) -> Result<Arr<'e, 's>> {
        if self.top {
            return Err(Fallback);
        }
        self.enc.out.push(b'[');
        Ok(Arr {
            enc: self.enc,
            scrubber: self.scrubber,
            rule: self.rule,
            first: true,
        })
    }
}

impl<'e, 's> ser::Serializer for Ser<'e, 's> {
    type Ok = ();
    type Error = Fallback;
    type SerializeSeq = Arr<'e, 's>;
    type SerializeTuple = Arr<'e, 's>;
    type SerializeTupleStruct = Arr<'e, 's>;
    type SerializeTupleVariant = ser::Impossible<(), Fallback>;
    type SerializeMap = Obj<'e, 's>;
    type SerializeStruct = Obj<'e, 's>;
    type SerializeStructVariant = ser::Impossible<(), Fallback>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.literal(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        self.number(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        self.number(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        self.number(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        self.number(v)
    }
    fn serialize_i128(self, _v: i128) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.number(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        self.number(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        self.number(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        self.number(v)
    }
    fn serialize_u128(self, _v: u128) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_f32(self, v: f32) -> Result<()> {
        // As `serde_json::Value` holds it: widened to f64.
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<()> {
        if v.is_finite() {
            self.number(v)
        } else {
            self.literal(b"null")
        }
    }
    fn serialize_char(self, v: char) -> Result<()> {
        self.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        self.string(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_none(self) -> Result<()> {
        self.literal(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        self.literal(b"null")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.literal(b"null")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        if self.top {
            return Err(Fallback);
        }
        let mut obj = self.object();
        ser::SerializeStruct::serialize_field(&mut obj, variant, value)?;
        ser::SerializeStruct::end(obj)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Arr<'e, 's>> {
        self.array()
    }
    fn serialize_tuple(self, _len: usize) -> Result<Arr<'e, 's>> {
        self.array()
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Arr<'e, 's>> {
        self.array()
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Fallback)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Obj<'e, 's>> {
        Ok(self.object())
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Obj<'e, 's>> {
        // serde_json's `RawValue` travels as a struct of this name.
        if name.starts_with("$serde_json") {
            return Err(Fallback);
        }
        Ok(self.object())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Fallback)
    }
}

pub(crate) struct Arr<'e, 's> {
    enc: &'e mut Encoder,
    scrubber: &'s Scrubber,
    rule: Rule,
    first: bool,
}

impl Arr<'_, '_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !std::mem::take(&mut self.first) {
            self.enc.out.push(b',');
        }
        value.serialize(Ser {
            enc: self.enc,
            scrubber: self.scrubber,
            rule: self.rule,
            top: false,
        })
    }

    fn finish(self) -> Result<()> {
        self.enc.out.push(b']');
        Ok(())
    }
}

impl ser::SerializeSeq for Arr<'_, '_> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTuple for Arr<'_, '_> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Arr<'_, '_> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

pub(crate) struct Obj<'e, 's> {
    enc: &'e mut Encoder,
    scrubber: &'s Scrubber,
    rule: Rule,
    top: bool,
    frame: Frame,
    /// A map key given by `serialize_key`, waiting for its value.
    key: Option<Range<usize>>,
}

impl Obj<'_, '_> {
    /// Writes a member's value after its `"key":` (begun at `start`) and
    /// records the member.
    fn value<T: Serialize + ?Sized>(
        &mut self,
        key: Range<usize>,
        start: usize,
        rule: Rule,
        value: &T,
    ) -> Result<()> {
        value.serialize(Ser {
            enc: &mut *self.enc,
            scrubber: self.scrubber,
            rule,
            top: false,
        })?;
        let member = Member::new(&self.enc.keys, key, start..self.enc.out.len());
        self.enc.members.push(member);
        Ok(())
    }

    fn finish(self) -> Result<()> {
        if self.top {
            // The record: left open for the chain fields.
            return Ok(());
        }
        self.enc.close(self.frame)
    }
}

/// Writes `"key":` and returns the rule for the member's value, unless the
/// key holds a secret: then the general path renames it, and what it
/// merges with is its business.
fn open_member(
    out: &mut Vec<u8>,
    scrubber: &Scrubber,
    top: bool,
    inherited: Rule,
    key: &str,
) -> Result<Rule> {
    if inherited.scrubs_keys() && !top && scrubber.scrub_str(key).is_some() {
        return Err(Fallback);
    }
    write_str(out, key);
    out.push(b':');
    Ok(Rule::of((!top).then_some(inherited), key))
}

impl ser::SerializeStruct for Obj<'_, '_> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        let start = self.enc.out.len();
        let rule = open_member(&mut self.enc.out, self.scrubber, self.top, self.rule, key)?;
        let key = push_key(&mut self.enc.keys, key);
        self.value(key, start, rule, value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeMap for Obj<'_, '_> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        let start = self.enc.keys.len();
        key.serialize(KeySer(&mut self.enc.keys))?;
        self.key = Some(start..self.enc.keys.len());
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self.key.take().ok_or(Fallback)?;
        let enc = &mut *self.enc;
        let start = enc.out.len();
        // `KeySer` wrote a `&str`'s bytes.
        let text = std::str::from_utf8(&enc.keys[key.clone()]).map_err(|_| Fallback)?;
        let rule = open_member(&mut enc.out, self.scrubber, self.top, self.rule, text)?;
        self.value(key, start, rule, value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// A map key, written to `keys`: only strings (and chars), as every
/// record's maps have.
struct KeySer<'a>(&'a mut Vec<u8>);

macro_rules! refuse {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(fn $name(self, _v: $ty) -> Result<()> { Err(Fallback) })*
    };
}

impl ser::Serializer for KeySer<'_> {
    type Ok = ();
    type Error = Fallback;
    type SerializeSeq = ser::Impossible<(), Fallback>;
    type SerializeTuple = ser::Impossible<(), Fallback>;
    type SerializeTupleStruct = ser::Impossible<(), Fallback>;
    type SerializeTupleVariant = ser::Impossible<(), Fallback>;
    type SerializeMap = ser::Impossible<(), Fallback>;
    type SerializeStruct = ser::Impossible<(), Fallback>;
    type SerializeStructVariant = ser::Impossible<(), Fallback>;

    fn serialize_str(self, v: &str) -> Result<()> {
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<()> {
        self.0
            .extend_from_slice(v.encode_utf8(&mut [0u8; 4]).as_bytes());
        Ok(())
    }
    refuse!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_f32: f32, serialize_f64: f64, serialize_bytes: &[u8],
    );
    fn serialize_none(self) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_unit(self) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<()> {
        Err(Fallback)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(Fallback)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
        Err(Fallback)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(Fallback)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Fallback)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        Err(Fallback)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
        Err(Fallback)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Fallback)
    }
}
