//! The form of a server's form-mode elicitation (MCP 2025-11-25: a flat
//! object of primitive properties): each field with its title,
//! description, type, default, choices and whether it is required, read
//! from the requested schema as JSON, and the check of an answer against
//! it. Used by whoever answers for the person: the terminal form
//! (`crate::terminal::form`) and an answers file (`super::answers`). An
//! answer is completed with the schema's defaults for the fields it leaves
//! out (SEP-1034: the client applies defaults), and refused when it does
//! not fit: warden never sends a server content its own schema rules out.

use serde_json::{Map, Value};

/// One property of the requested schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub kind: Kind,
    pub default: Option<Value>,
    pub required: bool,
}

/// A choice of an enum: the value sent and the title shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub value: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    String {
        min_length: Option<u64>,
        max_length: Option<u64>,
        format: Option<String>,
    },
    Number {
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Integer {
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// One of the choices (`enum`, `oneOf` with `const`/`title`, or the
    /// legacy `enumNames`).
    Choice(Vec<Choice>),
    /// Any of the choices (`type: array` with `items.enum` / `items.anyOf`).
    Choices {
        choices: Vec<Choice>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

impl Kind {
    /// The type as shown to the person.
    pub fn describe(&self) -> &'static str {
        match self {
            Kind::String { .. } => "text",
            Kind::Number { .. } => "number",
            Kind::Integer { .. } => "whole number",
            Kind::Boolean => "yes/no",
            Kind::Choice(_) => "one of",
            Kind::Choices { .. } => "any of",
        }
    }
}

/// The requested form, fields in the server's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub fields: Vec<Field>,
}

impl Form {
    /// Reads `schema` (the `requestedSchema` as JSON); `order` is the
    /// properties' wire order when known (a JSON object here is sorted).
    pub fn from_schema(schema: &Value, order: Option<&[String]>) -> Result<Form, String> {
        let properties = match schema.get("properties") {
            Some(Value::Object(map)) => map,
            None => return Ok(Form { fields: Vec::new() }),
            Some(_) => return Err("`properties` is not an object".into()),
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut names: Vec<&String> = Vec::new();
        if let Some(order) = order {
            names.extend(order.iter().filter(|n| properties.contains_key(n.as_str())));
        }
        for name in properties.keys() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let fields = names
            .into_iter()
            .map(|name| {
                field(
                    name,
                    &properties[name.as_str()],
                    required.contains(&name.as_str()),
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Form { fields })
    }

    /// `content` completed with the defaults of the fields it leaves out,
    /// and checked: every key a field of the form, every value of its
    /// field's type (choices among the offered ones, bounds kept), every
    /// required field present. `Err` says what does not fit.
    pub fn complete(&self, content: &Map<String, Value>) -> Result<Map<String, Value>, String> {
        if let Some(unknown) = content
            .keys()
            .find(|k| !self.fields.iter().any(|f| &f.name == *k))
        {
            return Err(format!("`{unknown}` is not a field of the requested form"));
        }
        let mut out = Map::new();
        for field in &self.fields {
            let value = content.get(&field.name).or(field.default.as_ref());
            match value {
                Some(value) => {
                    check(field, value).map_err(|why| format!("`{}`: {why}", field.name))?;
                    out.insert(field.name.clone(), value.clone());
                }
                None if field.required => {
                    return Err(format!("`{}` is required and has no default", field.name));
                }
                None => {}
            }
        }
        Ok(out)
    }
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn number(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// The choices of an `enum` (with the legacy `enumNames` as titles) or a
/// list of `{const, title}`.
fn choices(schema: &Value, list: &str) -> Option<Vec<Choice>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let titles = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| Choice {
                    value: v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    title: titles
                        .and_then(|t| t.get(i))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect(),
        );
    }
    let options = schema.get(list).and_then(Value::as_array)?;
    Some(
        options
            .iter()
            .filter_map(|o| {
                Some(Choice {
                    value: text(o, "const")?,
                    title: text(o, "title"),
                })
            })
            .collect(),
    )
}

fn field(name: &str, schema: &Value, required: bool) -> Result<Field, String> {
    let kind = match schema.get("type").and_then(Value::as_str) {
        Some("array") => {
            let items = schema.get("items").unwrap_or(&Value::Null);
            let choices = choices(items, "anyOf")
                .or_else(|| choices(items, "oneOf"))
                .ok_or_else(|| format!("`{name}`: an array field without choices"))?;
            Kind::Choices {
                choices,
                min_items: count(schema, "minItems"),
                max_items: count(schema, "maxItems"),
            }
        }
        Some("boolean") => Kind::Boolean,
        Some("number") => Kind::Number {
            minimum: number(schema, "minimum"),
            maximum: number(schema, "maximum"),
        },
        Some("integer") => Kind::Integer {
            minimum: number(schema, "minimum"),
            maximum: number(schema, "maximum"),
        },
        Some("string") | None => match choices(schema, "oneOf") {
            Some(choices) => Kind::Choice(choices),
            None => Kind::String {
                min_length: count(schema, "minLength"),
                max_length: count(schema, "maxLength"),
                format: text(schema, "format"),
            },
        },
        Some(other) => return Err(format!("`{name}`: type `{other}` is not a form field")),
    };
    Ok(Field {
        name: name.to_string(),
        title: text(schema, "title"),
        description: text(schema, "description"),
        kind,
        default: schema.get("default").cloned(),
        required,
    })
}

/// Whether `value` fits `field`.
pub fn check(field: &Field, value: &Value) -> Result<(), String> {
    let within = |n: f64, min: Option<f64>, max: Option<f64>| {
        if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
            Err(format!(
                "{n} is outside {}..{}",
                min.map_or(String::new(), |m| m.to_string()),
                max.map_or(String::new(), |m| m.to_string())
            ))
        } else {
            Ok(())
        }
    };
    let offered = |choices: &[Choice], v: &Value| match v.as_str() {
        Some(s) if choices.iter().any(|c| c.value == s) => Ok(()),
        _ => Err(format!(
            "{v} is not one of {}",
            choices
                .iter()
                .map(|c| c.value.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    match &field.kind {
        Kind::String {
            min_length,
            max_length,
            format,
        } => {
            let s = value
                .as_str()
                .ok_or_else(|| format!("expected text, got {value}"))?;
            let n = s.chars().count() as u64;
            if min_length.is_some_and(|m| n < m) || max_length.is_some_and(|m| n > m) {
                return Err(format!("{n} characters is outside the allowed length"));
            }
            match format.as_deref() {
                Some(format) if !fits_format(format, s) => {
                    Err(format!("{value} is not a valid {format}"))
                }
                _ => Ok(()),
            }
        }
        Kind::Number { minimum, maximum } => {
            let n = value
                .as_f64()
                .ok_or_else(|| format!("expected a number, got {value}"))?;
            within(n, *minimum, *maximum)
        }
        Kind::Integer { minimum, maximum } => {
            if !(value.is_i64() || value.is_u64()) {
                return Err(format!("expected a whole number, got {value}"));
            }
            within(value.as_f64().unwrap_or_default(), *minimum, *maximum)
        }
        Kind::Boolean => value
            .is_boolean()
            .then_some(())
            .ok_or_else(|| format!("expected true or false, got {value}")),
        Kind::Choice(choices) => offered(choices, value),
        Kind::Choices {
            choices,
            min_items,
            max_items,
        } => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("expected a list of choices, got {value}"))?;
            for item in items {
                offered(choices, item)?;
            }
            let n = items.len() as u64;
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err(format!("{n} choices is outside the allowed number"));
            }
            Ok(())
        }
    }
}

/// Whether `s` is what a string field's `format` asks for: the four an
/// elicitation form may name (MCP: `email`, `uri`, `date`, `date-time`);
/// any other format is an annotation and says nothing.
fn fits_format(format: &str, s: &str) -> bool {
    match format {
        // An address: one `@` between a local part and a dotted domain, no
        // spaces or controls (not every RFC 5322 form; what forms mean).
        "email" => s.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.contains('@')
                && domain.split('.').count() > 1
                && domain.split('.').all(|label| !label.is_empty())
                && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        }),
        // An absolute URI (with a scheme), as JSON Schema's `uri` means.
        "uri" => url::Url::parse(s).is_ok() && !s.chars().any(char::is_whitespace),
        // RFC 3339 full-date and date-time.
        "date" => s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        _ => true,
    }
}

/// Reads what a person typed for `field` (an empty line is handled by the
/// caller): `y`/`n` for yes/no, a number or a choice's value (or its
/// position in the list, from 1) for choices, comma-separated for several.
pub fn parse_typed(field: &Field, typed: &str) -> Result<Value, String> {
    let typed = typed.trim();
    let pick = |choices: &[Choice], word: &str| -> Result<Value, String> {
        let word = word.trim();
        if let Ok(i) = word.parse::<usize>()
            && (1..=choices.len()).contains(&i)
        {
            return Ok(Value::String(choices[i - 1].value.clone()));
        }
        choices
            .iter()
            .find(|c| c.value == word)
            .map(|c| Value::String(c.value.clone()))
            .ok_or_else(|| format!("`{word}` is not one of the choices"))
    };
    let value = match &field.kind {
        Kind::String { .. } => Value::String(typed.to_string()),
        Kind::Number { .. } => typed
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{typed}` is not a number"))?,
        Kind::Integer { .. } => typed
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{typed}` is not a whole number"))?,
        Kind::Boolean => match typed.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err(format!("`{typed}`: answer y or n")),
        },
        Kind::Choice(choices) => pick(choices, typed)?,
        Kind::Choices { choices, .. } => Value::Array(
            typed
                .split(',')
                .filter(|w| !w.trim().is_empty())
                .map(|w| pick(choices, w))
                .collect::<Result<_, _>>()?,
        ),
    };
    check(field, &value)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sep1034() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "default": 30, "minimum": 0},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "email": {"type": "string", "format": "email"}
        }, "required": ["email"]})
    }

    #[test]
    fn an_accept_without_fields_takes_the_defaults() {
        let form = Form::from_schema(&sep1034(), None).unwrap();
        let content = json!({"email": "a@b.c"});
        let done = form.complete(content.as_object().unwrap()).unwrap();
        assert_eq!(
            Value::Object(done),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active",
                   "verified": true, "email": "a@b.c"})
        );
    }

    #[test]
    fn what_the_schema_rules_out_is_refused() {
        let form = Form::from_schema(&sep1034(), None).unwrap();
        for (content, why) in [
            (json!({}), "`email` is required"),
            (
                json!({"email": "ada@example.org", "age": "old"}),
                "`age`: expected a whole number",
            ),
            (
                json!({"email": "ada@example.org", "age": 1.5}),
                "`age`: expected a whole number",
            ),
            (
                json!({"email": "ada@example.org", "age": -1}),
                "`age`: -1 is outside",
            ),
            (
                json!({"email": "ada@example.org", "status": "gone"}),
                "`status`: \"gone\" is not one of",
            ),
            (
                json!({"email": "ada@example.org", "verified": "yes"}),
                "`verified`: expected true",
            ),
            (
                json!({"email": "ada@example.org", "extra": 1}),
                "`extra` is not a field",
            ),
            (json!({"email": "x"}), "`email`: \"x\" is not a valid email"),
        ] {
            let err = form.complete(content.as_object().unwrap()).unwrap_err();
            assert!(err.contains(why), "{content}: {err}");
        }
    }

    /// The formats a form may name are held to what they mean; others
    /// are annotations.
    #[test]
    fn string_formats_are_checked() {
        let field = |format: &str| Field {
            name: "f".into(),
            title: None,
            description: None,
            kind: Kind::String {
                min_length: None,
                max_length: None,
                format: Some(format.into()),
            },
            default: None,
            required: true,
        };
        for (format, good, bad) in [
            (
                "email",
                &["ada@example.org", "a.b+c@mail.example.co.uk"][..],
                &[
                    "x",
                    "@example.org",
                    "ada@",
                    "ada@localhost",
                    "ada@ex..org",
                    "a b@example.org",
                    "a@b@example.org",
                ][..],
            ),
            (
                "uri",
                &[
                    "https://example.org/a?b#c",
                    "mailto:ada@example.org",
                    "urn:isbn:0451450523",
                ][..],
                &["example.org", "/relative/path", "", "https://exa mple.org"][..],
            ),
            (
                "date",
                &["2026-12-01", "2024-02-29"][..],
                &[
                    "2026-13-01",
                    "2023-02-29",
                    "2026-1-1",
                    "01.12.2026",
                    "2026-12-01T00:00:00Z",
                ][..],
            ),
            (
                "date-time",
                &["2026-12-01T13:30:00Z", "2026-12-01T13:30:00.5+01:00"][..],
                &["2026-12-01", "2026-12-01 13:30", "2026-12-01T25:00:00Z"][..],
            ),
            ("hostname", &["anything goes"][..], &[][..]),
        ] {
            for s in good {
                assert_eq!(check(&field(format), &json!(s)), Ok(()), "{format}: {s}");
            }
            for s in bad {
                let err = check(&field(format), &json!(s)).unwrap_err();
                assert!(err.contains(format), "{format}: {s}: {err}");
            }
        }
    }

    #[test]
    fn titled_and_multi_select_choices_are_read() {
        let schema = json!({"type": "object", "properties": {
            "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}, "maxItems": 1},
            "legacy": {"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]}
        }});
        let form = Form::from_schema(&schema, Some(&["tags".into(), "color".into()])).unwrap();
        let names: Vec<_> = form.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["tags", "color", "legacy"]);
        let color = &form.fields[1];
        assert_eq!(parse_typed(color, "2").unwrap(), json!("g"));
        assert_eq!(parse_typed(color, "r").unwrap(), json!("r"));
        assert!(parse_typed(color, "Red").is_err());
        let tags = &form.fields[0];
        assert_eq!(parse_typed(tags, "1").unwrap(), json!(["a"]));
        assert!(parse_typed(tags, "1,2").is_err(), "maxItems 1");
        assert_eq!(
            form.fields[2].kind,
            Kind::Choice(vec![
                Choice {
                    value: "x".into(),
                    title: Some("Ex".into())
                },
                Choice {
                    value: "y".into(),
                    title: Some("Why".into())
                },
            ])
        );
    }
}
