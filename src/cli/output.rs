//! Human-readable output shared by commands.

use serde_json::Value;

use crate::host::CallReport;
use warden_audit::Outcome;

/// Prints a call's result for a person: text blocks as they are, other
/// blocks summarised on one line each, then the decision on stderr.
pub fn print_call_report(report: &CallReport) {
    if let Some(result) = &report.result {
        for line in render_result(result) {
            println!("{line}");
        }
    }
    match report.outcome {
        Outcome::Ok => {}
        Outcome::Denied => match &report.decision {
            Some(d) => eprintln!("denied by the {} stage: {}", d.stage, d.reasons.join("; ")),
            None => eprintln!("denied"),
        },
        Outcome::ToolError => eprintln!("the tool reported an error"),
        outcome if outcome.is_refusal() => {
            eprintln!("warden: {}", report.error.as_deref().unwrap_or("refused"));
        }
        other => eprintln!(
            "{}: {}",
            other.as_str(),
            report.error.as_deref().unwrap_or("no detail")
        ),
    }
}

/// One line (or a text block) per content block of a `CallToolResult`.
pub fn render_result(result: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
        let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
        lines.push(match kind {
            "text" => str_of("text").to_string(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes base64]",
                str_of("mimeType"),
                str_of("data").len()
            ),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!("[resource {uri} (binary)]"),
                }
            }
            "resource_link" => format!("[resource link {} {}]", str_of("uri"), str_of("name")),
            other => format!("[{other} content]"),
        });
    }
    if let Some(structured) = result.get("structuredContent")
        && lines.is_empty()
    {
        lines.push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    lines
}
