//! A small strict JSON reader that keeps the line and column of every value
//! and rejects duplicate keys.
//!
//! Why not `serde_json::from_str` directly: serde keeps the last of two equal
//! keys in a map (`mcpServers`, `env`, `headers`), so a second `"fs"` entry
//! would silently replace the first, and once a document is a `Value` every
//! later error (a bad timeout, a missing executable) has lost its position.
//! Scalars are still decoded by `serde_json`, so string escapes and number
//! syntax follow it exactly.

use std::cell::Cell;
use std::collections::HashMap;

use serde_json::{Map, Number, Value};

/// 1-based line and column (in characters) of a value or key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Node>),
    Object(Vec<Member>),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub pos: Pos,
}

impl Node {
    /// The JSON type's name, for "expected X, found Y" messages. Values are
    /// never echoed: they may be secrets.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Number(_) => "a number",
            Kind::String(_) => "a string",
            Kind::Array(_) => "an array",
            Kind::Object(_) => "an object",
        }
    }

    pub fn to_value(&self) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Number(n) => Value::Number(n.clone()),
            Kind::String(s) => Value::String(s.clone()),
            Kind::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Kind::Object(members) => {
                let mut map = Map::new();
                for m in members {
                    map.insert(m.key.clone(), m.value.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum JsonError {
    Syntax {
        pos: Pos,
        message: String,
    },
    Duplicate {
        /// Key path of the repeated key, e.g. `mcpServers.fs`.
        path: String,
        pos: Pos,
        first: Pos,
    },
}

/// Nesting deeper than this is refused: project files come from
/// repositories, and unbounded recursion would let one crash warden.
const MAX_DEPTH: usize = 64;

/// Larger files are refused before parsing: a configuration is a few KiB.
pub const MAX_LEN: usize = 4 << 20;

pub fn parse(text: &str) -> Result<Node, JsonError> {
    if text.len() > MAX_LEN {
        return Err(JsonError::Syntax {
            pos: Pos { line: 1, column: 1 },
            message: format!("file is larger than {} MiB", MAX_LEN >> 20),
        });
    }
    // Editors on some systems write a byte-order mark; it carries no meaning.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut p = Parser {
        src: text,
        bytes: text.as_bytes(),
        i: 0,
        path: Vec::new(),
        cursor: Cell::new((0, 1, 1)),
    };
    p.skip_ws()?;
    let node = p.value(0)?;
    p.skip_ws()?;
    if p.i < p.bytes.len() {
        return Err(p.syntax("unexpected text after the end of the JSON document"));
    }
    Ok(node)
}

/// Formats a key path the way error messages show it: `a.b[2].c`, with
/// keys that are not plain identifiers quoted (`env["A.B"]`).
pub fn push_key(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!(
            "{path}[{}]",
            serde_json::to_string(key).unwrap_or_else(|_| "\"?\"".into())
        ),
    }
}

pub fn push_index(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

enum Seg {
    Key(String),
    Index(usize),
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    i: usize,
    path: Vec<Seg>,
    /// Byte offset, line and column of the last position computed.
    cursor: Cell<(usize, usize, usize)>,
}

impl Parser<'_> {
    fn pos_at(&self, i: usize) -> Pos {
        let mut i = i.min(self.src.len());
        // An error can be raised in the middle of a multi-byte character
        // (after a bad escape); count from the character's start.
        while !self.src.is_char_boundary(i) {
            i -= 1;
        }
        // Positions are asked for in increasing order, so counting on from
        // the last one keeps parsing linear: project files come from
        // repositories, and a large one must not stall warden.
        let (mut at, mut line, mut column) = self.cursor.get();
        if i < at {
            (at, line, column) = (0, 1, 1);
        }
        for c in self.src[at..i].chars() {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        self.cursor.set((i, line, column));
        Pos { line, column }
    }

    fn syntax(&self, message: impl Into<String>) -> JsonError {
        JsonError::Syntax {
            pos: self.pos_at(self.i),
            message: message.into(),
        }
    }

    fn path_string(&self) -> String {
        let mut out = String::new();
        for seg in &self.path {
            out = match seg {
                Seg::Key(k) => push_key(&out, k),
                Seg::Index(i) => push_index(&out, *i),
            };
        }
        out
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.i).copied()
    }

    fn skip_ws(&mut self) -> Result<(), JsonError> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.i += 1,
                b'/' => {
                    return Err(self.syntax("comments are not allowed in JSON; remove the comment"));
                }
                _ => break,
            }
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Node, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.syntax(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        let pos = self.pos_at(self.i);
        let kind = match self.peek() {
            None => return Err(self.syntax("unexpected end of file; expected a value")),
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b't') => self.literal("true", Kind::Bool(true))?,
            Some(b'f') => self.literal("false", Kind::Bool(false))?,
            Some(b'n') => self.literal("null", Kind::Null)?,
            Some(b'\'') => {
                return Err(self.syntax("strings must use double quotes (\"), not single quotes"));
            }
            Some(_) => {
                return Err(self.syntax(
                    "expected a value (string, number, object, array, true, false or null)",
                ));
            }
        };
        Ok(Node { kind, pos })
    }

    fn literal(&mut self, word: &str, kind: Kind) -> Result<Kind, JsonError> {
        let end = self.i + word.len();
        let followed_by_word = self
            .bytes
            .get(end)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
        if self.bytes.get(self.i..end) == Some(word.as_bytes()) && !followed_by_word {
            self.i = end;
            Ok(kind)
        } else {
            Err(self.syntax("expected a value; bare words must be quoted strings"))
        }
    }

    fn number(&mut self) -> Result<Kind, JsonError> {
        let start = self.i;
        while let Some(b) = self.peek() {
            if b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.i += 1;
            } else {
                break;
            }
        }
        let text = &self.src[start..self.i];
        serde_json::from_str::<Number>(text)
            .map(Kind::Number)
            .map_err(|_| JsonError::Syntax {
                pos: self.pos_at(start),
                message: format!("invalid number `{text}`"),
            })
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.i;
        self.i += 1; // opening quote
        loop {
            match self.peek() {
                None => {
                    self.i = start;
                    return Err(self.syntax("unterminated string"));
                }
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(b'\\') => self.i += 2,
                Some(b) if b < 0x20 => {
                    return Err(self.syntax(
                        "control character (e.g. a raw newline or tab) inside a string; write it as an escape like \\n",
                    ));
                }
                Some(_) => self.i += 1,
            }
        }
        let raw = self.src.get(start..self.i).unwrap_or("");
        serde_json::from_str::<String>(raw).map_err(|e| JsonError::Syntax {
            pos: self.pos_at(start),
            message: format!("invalid string: {}", strip_serde_position(&e.to_string())),
        })
    }

    fn array(&mut self, depth: usize) -> Result<Kind, JsonError> {
        self.i += 1;
        let mut items = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Kind::Array(items));
        }
        loop {
            self.path.push(Seg::Index(items.len()));
            self.skip_ws()?;
            if self.peek() == Some(b']') {
                return Err(self.syntax("trailing comma before `]`; remove it"));
            }
            let item = self.value(depth + 1)?;
            self.path.pop();
            items.push(item);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Kind::Array(items));
                }
                _ => return Err(self.syntax("expected `,` or `]` in array")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Kind, JsonError> {
        self.i += 1;
        let mut members: Vec<Member> = Vec::new();
        let mut seen: HashMap<String, Pos> = HashMap::new();
        self.skip_ws()?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Kind::Object(members));
        }
        loop {
            self.skip_ws()?;
            match self.peek() {
                Some(b'"') => {}
                Some(b'}') => return Err(self.syntax("trailing comma before `}`; remove it")),
                _ => return Err(self.syntax("expected a key in double quotes")),
            }
            let key_pos = self.pos_at(self.i);
            let key = self.string()?;
            if let Some(first) = seen.insert(key.clone(), key_pos) {
                let path = push_key(&self.path_string(), &key);
                return Err(JsonError::Duplicate {
                    path,
                    pos: key_pos,
                    first,
                });
            }
            self.skip_ws()?;
            if self.peek() != Some(b':') {
                return Err(self.syntax("expected `:` after the key"));
            }
            self.i += 1;
            self.skip_ws()?;
            self.path.push(Seg::Key(key.clone()));
            let value = self.value(depth + 1)?;
            self.path.pop();
            members.push(Member {
                key,
                key_pos,
                value,
            });
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Kind::Object(members));
                }
                _ => return Err(self.syntax("expected `,` or `}` after a value in an object")),
            }
        }
    }
}

/// serde_json appends " at line 1 column 7" relative to the snippet it was
/// given; our own position is the useful one.
fn strip_serde_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_values() {
        let node = parse("{\n  \"a\": [1, \"x\\n\"],\n  \"b\": {\"c\": null}\n}").unwrap();
        let Kind::Object(m) = &node.kind else {
            panic!()
        };
        assert_eq!(m[0].key_pos, Pos { line: 2, column: 3 });
        assert_eq!(m[1].value.pos, Pos { line: 3, column: 8 });
        assert_eq!(
            node.to_value(),
            serde_json::json!({"a": [1, "x\n"], "b": {"c": null}})
        );
    }

    #[test]
    fn duplicate_keys_are_found_with_their_path() {
        let err = parse("{\"m\": {\"fs\": {}, \"x.y\": 1,\n \"fs\": 2}}").unwrap_err();
        match err {
            JsonError::Duplicate { path, pos, first } => {
                assert_eq!(path, "m.fs");
                assert_eq!(pos.line, 2);
                assert_eq!(first.line, 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn syntax_errors_have_positions() {
        for (text, line) in [
            ("{\"a\": 1,}", 1),
            ("{\n\"a\": tru}", 2),
            ("{\"a\": 01}", 1),
            ("// c\n{}", 1),
            ("{} x", 1),
            ("{\"a\": \"\\ud800\"}", 1),
        ] {
            match parse(text) {
                Err(JsonError::Syntax { pos, .. }) => assert_eq!(pos.line, line, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let text = "[".repeat(10_000);
        assert!(parse(&text).is_err());
    }

    #[test]
    fn large_files_parse_in_linear_time() {
        let mut text = String::from("{");
        for i in 0..100_000 {
            text.push_str(&format!("\"k{i}\": [1, \"v\"],"));
        }
        text.push_str("\"end\": {\"x\": 1, \"x\": 2}}");
        let start = std::time::Instant::now();
        match parse(&text) {
            Err(JsonError::Duplicate { path, .. }) => assert_eq!(path, "end.x"),
            other => panic!("{other:?}"),
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn key_paths_quote_odd_keys() {
        assert_eq!(push_key("", "mcpServers"), "mcpServers");
        assert_eq!(push_key("env", "A.B"), "env[\"A.B\"]");
        assert_eq!(push_index("args", 2), "args[2]");
    }
}
