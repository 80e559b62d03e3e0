//! Compact JSON for any `Serialize` value, byte for byte what
//! `serde_json::to_writer` writes, with strings escaped by
//! [`write_json_str`](crate::digest::write_json_str) (eight bytes at a
//! time) instead of `serde_json`'s byte loop.
//!
//! Why: every message warden relays is written once more than it is read
//! (to the server, then to the client), and `serde_json` escapes a string
//! at about 1 ns a byte: 85 µs for each 100 KB argument or result, the
//! largest cost of a large call after hashing. Numbers are still written by
//! `serde_json` (the same digits). What `serde_json` treats specially (its
//! private raw-value and number structs, map keys that are not strings) is
//! refused with [`Unsupported`], and the caller writes that value with
//! `serde_json` instead; so the output is always `serde_json`'s
//! (`tests::writes_what_serde_json_writes`).

use std::fmt;

use serde::ser::{self, Serialize};

use crate::digest::write_json_str;

/// A value this writer leaves to `serde_json` (or that failed to
/// serialise: the same error `serde_json` would report, as text).
#[derive(Debug)]
pub struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

/// Appends `value` as compact JSON. On `Err`, `out` may hold part of it:
/// truncate to its length before and write it another way.
pub fn to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Unsupported> {
    value.serialize(Writer { out })
}

/// Appends `value` as compact JSON: this writer's, or `serde_json`'s where
/// this one refuses it. The two write the same bytes.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    let start = out.len();
    if to_writer(out, value).is_err() {
        out.truncate(start);
        serde_json::to_writer(&mut *out, value)?;
    }
    Ok(())
}

/// The names `serde_json` gives its own raw-value and number structs.
fn is_serde_json_private(name: &str) -> bool {
    name.starts_with("$serde_json::private::")
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    /// A scalar as `serde_json` writes it.
    fn scalar<T: Serialize>(self, value: T) -> Result<(), Unsupported> {
        serde_json::to_writer(&mut *self.out, &value).map_err(ser::Error::custom)
    }
}

/// An array or object being written: whether an element was written yet.
struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// What closes it: `]`, `}`, or `}}` for a variant's inner value.
    close: &'static [u8],
}

impl Compound<'_> {
    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.comma();
        value.serialize(Writer { out: self.out })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Unsupported> {
        self.comma();
        write_json_str(self.out, key);
        self.out.push(b':');
        value.serialize(Writer { out: self.out })
    }

    fn end(self) -> Result<(), Unsupported> {
        self.out.extend_from_slice(self.close);
        Ok(())
    }
}

fn open<'a>(out: &'a mut Vec<u8>, opening: &[u8], close: &'static [u8]) -> Compound<'a> {
    out.extend_from_slice(opening);
    Compound {
        out,
        first: true,
        close,
    }
}

/// `{"variant":` before a variant's value.
fn open_variant(out: &mut Vec<u8>, variant: &str) {
    out.push(b'{');
    write_json_str(out, variant);
    out.push(b':');
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        write_json_str(self.out, v.encode_utf8(&mut [0u8; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        write_json_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unsupported> {
        self.scalar(v)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        if is_serde_json_private(name) {
            return Err(Unsupported(name.to_string()));
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        open_variant(self.out, variant);
        value.serialize(Writer { out: self.out })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Unsupported> {
        Ok(open(self.out, b"[", b"]"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>, Unsupported> {
        Ok(open(self.out, b"[", b"]"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        Ok(open(self.out, b"[", b"]"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        open_variant(self.out, variant);
        Ok(open(self.out, b"[", b"]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, Unsupported> {
        Ok(open(self.out, b"{", b"}"))
    }
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        if is_serde_json_private(name) {
            return Err(Unsupported(name.to_string()));
        }
        Ok(open(self.out, b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        open_variant(self.out, variant);
        Ok(open(self.out, b"{", b"}}"))
    }
}

/// The array-like compounds: each element after a comma.
macro_rules! elements {
    ($($trait:ident :: $method:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
                self.element(value)
            }
            fn end(self) -> Result<(), Unsupported> {
                Compound::end(self)
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

/// The struct-like compounds: each field as `"key":value`.
macro_rules! fields {
    ($($trait:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Unsupported> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Unsupported> {
                Compound::end(self)
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        self.comma();
        key.serialize(KeyWriter { out: self.out })?;
        self.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(Writer { out: self.out })
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

/// A map key: a string (or what serialises as one) is written; any other
/// key is left to `serde_json`, whose rules for them are its own.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

fn not_a_string() -> Unsupported {
    Unsupported("a map key that is not a string".into())
}

/// Key methods refused: serde_json's rules for such keys are its own.
macro_rules! refuse {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(fn $name(self, _: $ty) -> Result<(), Unsupported> { Err(not_a_string()) })*
    };
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<(), Unsupported>;
    type SerializeTuple = ser::Impossible<(), Unsupported>;
    type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
    type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
    type SerializeMap = ser::Impossible<(), Unsupported>;
    type SerializeStruct = ser::Impossible<(), Unsupported>;
    type SerializeStructVariant = ser::Impossible<(), Unsupported>;

    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        write_json_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        if is_serde_json_private(name) {
            return Err(not_a_string());
        }
        value.serialize(self)
    }

    refuse!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f32: f32,
        serialize_f64: f64,
        serialize_bytes: &[u8],
        serialize_unit_struct: &'static str,
    );
    fn serialize_none(self) -> Result<(), Unsupported> {
        Err(not_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Unsupported> {
        Err(not_a_string())
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        Err(not_a_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        Err(not_a_string())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        Err(not_a_string())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        Err(not_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::{Value, json};

    use super::*;

    fn both<T: Serialize + ?Sized>(value: &T) -> (Vec<u8>, Vec<u8>) {
        let mut ours = Vec::new();
        write(&mut ours, value).unwrap();
        (ours, serde_json::to_vec(value).unwrap())
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { a: Option<f64>, b: Vec<char> },
    }

    #[derive(Serialize)]
    struct Everything {
        unit: (),
        none: Option<u8>,
        some: Option<&'static str>,
        shapes: Vec<Shape>,
        tuple: (bool, u128, i128, f32),
        bytes: &'static [u8],
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
        char_key: BTreeMap<char, u8>,
        float: f64,
        nan: f64,
    }

    #[derive(Serialize)]
    struct Special {
        int_key: BTreeMap<i32, u8>,
        raw: Box<serde_json::value::RawValue>,
    }

    /// Every kind of value serde has written by this writer alone, as
    /// serde_json writes it.
    #[test]
    fn writes_what_serde_json_writes() {
        let everything = Everything {
            unit: (),
            none: None,
            some: Some("s\u{0}\u{1f}\"\\/\u{7f}\u{e9}\u{2028}"),
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(7),
                Shape::Tuple(-3, "t".into()),
                Shape::Struct {
                    a: Some(1e300),
                    b: vec!['\n', 'é'],
                },
                Shape::Struct { a: None, b: vec![] },
            ],
            tuple: (true, u128::MAX, i128::MIN, 1.5),
            bytes: b"\x00\xff",
            rest: [("k\n".to_string(), json!({"x": [1, -2.5e-7, null]}))]
                .into_iter()
                .collect(),
            char_key: [('q', 1)].into_iter().collect(),
            float: -0.0,
            nan: f64::NAN,
        };
        let long = json!({"a": [1, "b", {"c": null, "d": 1.25}], "e": "x\"".repeat(50_000)});
        let mut direct = Vec::new();
        to_writer(&mut direct, &long).unwrap();
        assert_eq!(direct, serde_json::to_vec(&long).unwrap());
        let mut direct = Vec::new();
        to_writer(&mut direct, &everything).unwrap();
        let theirs = serde_json::to_vec(&everything).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&direct),
            String::from_utf8_lossy(&theirs)
        );
    }

    /// What serde_json treats specially (integer keys, its raw value) is
    /// refused here and written by serde_json.
    #[test]
    fn what_serde_json_treats_specially_is_left_to_it() {
        let special = Special {
            int_key: [(-4, 2)].into_iter().collect(),
            raw: serde_json::value::RawValue::from_string("{\"raw\" : 1}".into()).unwrap(),
        };
        assert!(to_writer(&mut Vec::new(), &special.int_key).is_err());
        assert!(to_writer(&mut Vec::new(), &special.raw).is_err());
        let (ours, theirs) = both(&special);
        assert_eq!(ours, theirs);
        let mut prefixed = b"kept".to_vec();
        write(&mut prefixed, &special).unwrap();
        assert_eq!(prefixed[..4], *b"kept", "what was there before stays");
    }

    #[test]
    fn every_string_is_escaped_as_serde_json_escapes_it() {
        let mut text = String::new();
        for c in (0u32..0x100).chain([0x2028, 0x1F600, 0xFFFD]) {
            if let Some(c) = char::from_u32(c) {
                text.push(c);
                let (ours, theirs) = both(&text);
                assert_eq!(ours, theirs, "{text:?}");
            }
        }
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x20\"\\\\a-z\u{7f}\u{e9}\u{2028}]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn any_value_is_written_as_serde_json_writes_it(value in any_json()) {
            let mut ours = Vec::new();
            to_writer(&mut ours, &value).unwrap();
            proptest::prop_assert_eq!(ours, serde_json::to_vec(&value).unwrap());
        }
    }
}
