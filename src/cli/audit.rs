//! `warden audit …`: `verify` checks a log's chain, `show` prints it.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde_json::{Value, json};

use super::{AuditCommand, CliError, GlobalArgs, exit};
use warden_audit::{self as audit, ExpectedHead, VerifyOptions, VerifyReport};

pub fn run(global: &GlobalArgs, cmd: AuditCommand) -> anyhow::Result<u8> {
    match cmd {
        AuditCommand::Verify {
            file,
            key,
            heads,
            accept_head,
        } => verify(global, &file, key.as_deref(), &heads, accept_head),
        AuditCommand::Head { file, key } => head(global, &file, key.as_deref()),
        AuditCommand::Show {
            file,
            session,
            tool,
            effect,
        } => {
            let filter = Filter::new(session, tool.as_deref(), effect.as_deref())?;
            show(global.json, &file, &filter)
        }
    }
}

/// How many unfinished calls the text output lists (`--json` lists all).
const UNFINISHED_SHOWN: usize = 20;

fn verify(
    global: &GlobalArgs,
    file: &Path,
    key_file: Option<&Path>,
    given: &[String],
    accept_head: bool,
) -> anyhow::Result<u8> {
    let key = audit::load_key(key_file).map_err(|e| CliError::config(e.to_string()))?;
    let heads = given
        .iter()
        .map(|spec| ExpectedHead::parse(spec, "--head"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(format!("--head {e}")))?;
    // Accepting first: the verification below then checks the log against
    // the head just written, and prints what it always prints.
    let accepted = if accept_head {
        match audit::accept_head(file, key.as_deref()) {
            Ok(accepted) => Some(accepted),
            Err(e @ audit::AuditError::AcceptRefused { .. }) => {
                return Err(CliError::kind(
                    exit::FAILED,
                    "head_not_accepted",
                    e.to_string(),
                ));
            }
            Err(e) => return Err(CliError::kind(exit::USAGE, "unreadable", e.to_string())),
        }
    } else {
        None
    };
    let accepted_text = accepted
        .as_ref()
        .map_or_else(String::new, |a| match &a.replaced {
            Some(replaced) => format!(
                "head accepted: {} now names seq {} (replacing {replaced}); records cut off before \
             now cannot be detected\n",
                audit::head_path(file).display(),
                a.head.seq
            ),
            None => format!(
                "head accepted: the log matches its head file, now at seq {}\n",
                a.head.seq
            ),
        });
    let accepted_json = accepted.as_ref().map_or(
        Value::Null,
        |a| json!({"seq": a.head.seq, "hash": a.head.hash, "replaced": a.replaced}),
    );
    let report = audit::verify_with(
        file,
        &VerifyOptions {
            key: key.as_deref(),
            head_file: true,
            heads,
            keyed: false,
        },
    );
    let name = file.display();
    let heads_json = |heads: &[ExpectedHead]| -> Value {
        heads
            .iter()
            .map(|h| json!({"source": h.source, "seq": h.seq, "hash": h.hash, "authenticated": h.authenticated}))
            .collect()
    };
    let heads_text = |heads: &[ExpectedHead], count: u64| -> String {
        if heads.is_empty() {
            return format!(
                "\nno head file ({}): records cut off the end would not be noticed{}",
                audit::head_path(file).display(),
                if count > 0 {
                    format!(
                        "; warden does not append to it until its end is accepted \
                         (`warden audit verify {} --accept-head`)",
                        file.display()
                    )
                } else {
                    String::new()
                }
            );
        }
        heads
            .iter()
            .map(|h| {
                format!(
                    "\nhead: seq {} reached, hash matches ({}{})",
                    h.seq,
                    h.source,
                    if h.authenticated {
                        ""
                    } else {
                        "; keyed head, not authenticated without the key"
                    }
                )
            })
            .collect()
    };
    // Calls written ahead with no result: a warning, not a failure (the
    // log is intact; warden was killed, or the calls are still running).
    let unfinished_text = |unfinished: &[audit::Unfinished]| -> String {
        if unfinished.is_empty() {
            return String::new();
        }
        let n = unfinished.len();
        let mut text = format!(
            "\nwarning: {n} call{} with no recorded outcome (a pending record and no result: \
             warden was killed, or {} still running; the server may or may not have acted):",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it is" } else { "they are" }
        );
        for u in unfinished.iter().take(UNFINISHED_SHOWN) {
            text.push_str(&format!(
                "\n  seq {} {} call_id {}",
                u.seq,
                u.event,
                warden_core::display::line(&u.call_id)
            ));
        }
        if n > UNFINISHED_SHOWN {
            text.push_str(&format!(
                "\n  … and {} more (--json lists all)",
                n - UNFINISHED_SHOWN
            ));
        }
        text
    };
    let unfinished_json = |unfinished: &[audit::Unfinished]| -> Value {
        json!({
            "count": unfinished.len(),
            "calls": unfinished
                .iter()
                .map(|u| json!({"seq": u.seq, "call_id": u.call_id, "event": u.event}))
                .collect::<Vec<_>>(),
        })
    };
    let (code, text, value) = match &report {
        VerifyReport::Ok {
            count,
            last_hash,
            mode,
            heads,
            unfinished,
        } => {
            let caveats = caveats(*mode, heads, *count);
            // `no_head` has its own line already (with how to go on).
            let caveats_text: String = caveats
                .iter()
                .filter(|(kind, _)| *kind != "no_head")
                .map(|(kind, why)| format!("\ncannot show ({kind}): {why}"))
                .collect();
            (
                exit::OK,
                format!(
                    "{accepted_text}ok: {name}: {count} records, chain intact ({mode})\nlast hash: {last_hash}{}{caveats_text}{}",
                    heads_text(heads, *count),
                    unfinished_text(unfinished)
                ),
                json!({"ok": true, "file": file, "count": count, "last_hash": last_hash,
                       "mode": mode.as_str(), "heads": heads_json(heads),
                       "unfinished": unfinished_json(unfinished),
                       "caveats": caveats.iter()
                           .map(|(kind, why)| json!({"kind": kind, "message": why}))
                           .collect::<Vec<_>>(),
                       "accepted_head": accepted_json}),
            )
        }
        VerifyReport::KeyRequired {
            count,
            last_hash,
            heads,
            unfinished,
        } => {
            let message = format!(
                "{name}: the log is keyed (hmac-sha256); give the key with --key FILE or {}. \
                 Without it only the structure and links of {count} records were checked (last hash {last_hash}).",
                audit::KEY_ENV
            );
            (
                exit::USAGE,
                format!("{message}{}", unfinished_text(unfinished)),
                json!({"ok": false, "file": file, "mode": "hmac-sha256", "count": count,
                       "last_hash": last_hash, "heads": heads_json(heads),
                       "unfinished": unfinished_json(unfinished),
                       "outcome": "key_required", "error": message}),
            )
        }
        VerifyReport::Bad(f) => {
            let mode = f.mode.map_or("unknown", audit::HashMode::as_str);
            (
                exit::FAILED,
                format!(
                    "FAILED: {name}: seq {} (line {}): {}\n{} record{} before it verified ({mode}); last good hash: {}",
                    f.seq,
                    f.line,
                    f.problem,
                    f.verified,
                    if f.verified == 1 { "" } else { "s" },
                    f.last_good_hash
                ),
                json!({
                    "ok": false, "file": file, "seq": f.seq, "line": f.line,
                    "problem": f.problem.kind(), "message": f.problem.to_string(),
                    "verified": f.verified, "last_good_hash": f.last_good_hash, "mode": mode,
                }),
            )
        }
        VerifyReport::Unreadable { message } => {
            return Err(CliError::kind(
                exit::USAGE,
                "unreadable",
                format!("cannot read audit log {message}"),
            ));
        }
    };
    if global.json {
        // An error in the object is on stderr too (CONTRACT §2).
        if let Some(message) = value["error"].as_str() {
            eprintln!("warden: {}", warden_core::display::text(message));
        }
        super::json::print("audit verify", value)?;
    } else {
        write_stdout(&format!("{text}\n"))?;
    }
    Ok(code)
}

/// What a whole chain cannot show, as `(kind, why)`: an auditor must not
/// read "chain intact" as "not altered" where the file cannot prove it.
/// `unkeyed`: anyone who can write the files can edit, re-chain and
/// re-head them. `no_head`: a cut end is not noticed. `rollback`: the log
/// and its head put back together to an earlier copy look the same, until
/// a head kept elsewhere (`--head`) reaches the end.
fn caveats(
    mode: audit::HashMode,
    heads: &[ExpectedHead],
    count: u64,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if mode == audit::HashMode::Sha256 {
        out.push((
            "unkeyed",
            "the records agree with each other and with the head, but the log is unkeyed \
             (sha256): anyone who can write it and its head can edit, re-chain and re-head \
             them, so this cannot show the records were not rewritten (a key, WARDEN_AUDIT_KEY, \
             can)"
                .to_string(),
        ));
    }
    let kept_elsewhere = heads.iter().any(|h| h.source == "--head" && h.seq == count);
    if heads.iter().all(|h| h.source == "--head") && !kept_elsewhere {
        out.push((
            "no_head",
            "no head file: records cut off the end would not be noticed".to_string(),
        ));
    } else if !kept_elsewhere {
        out.push((
            "rollback",
            "the log and its head put back together to an earlier copy (later records \
             dropped) look the same: check the end against a head kept elsewhere (`warden \
             audit head FILE` → `warden audit verify FILE --head SEQ:HASH`)"
                .to_string(),
        ));
    }
    out
}

/// `warden audit head FILE`: the head file's `SEQ:HASH` on stdout (for
/// `verify --head`), details on stderr.
fn head(global: &GlobalArgs, file: &Path, key_file: Option<&Path>) -> anyhow::Result<u8> {
    let key = audit::load_key(key_file).map_err(|e| CliError::config(e.to_string()))?;
    let head_file = audit::head_path(file);
    let read = match audit::read_head(file, key.as_deref()) {
        Ok(Some(read)) => read,
        Ok(None) => {
            return Err(CliError::kind(
                exit::FAILED,
                "no_head",
                format!(
                    "{} has no head file ({}): it was written by a warden without one, or the \
                     file was removed; `warden audit verify {} --accept-head` checks the log \
                     and writes one for its end as it is",
                    file.display(),
                    head_file.display(),
                    file.display()
                ),
            ));
        }
        Err(e @ audit::HeadError::Unreadable { .. }) => {
            return Err(CliError::kind(exit::USAGE, "unreadable", e.to_string()));
        }
        Err(e @ audit::HeadError::Invalid { .. }) => {
            return Err(CliError::kind(exit::FAILED, "head_invalid", e.to_string()));
        }
    };
    let h = &read.head;
    if global.json {
        super::json::print(
            "audit head",
            json!({
                "file": file, "head_file": head_file, "seq": h.seq, "hash": h.hash,
                "spec": h.spec(), "alg": h.mode.as_str(),
                "keyed": h.mode == audit::HashMode::HmacSha256,
                "generation": h.generation, "authenticated": read.authenticated,
            }),
        )?;
    } else {
        write_stdout(&format!("{}\n", h.spec()))?;
        eprintln!(
            "{}: seq {}, {}{}",
            head_file.display(),
            h.seq,
            h.mode,
            if read.authenticated {
                ""
            } else {
                " (keyed; not authenticated: no key given)"
            }
        );
    }
    Ok(exit::OK)
}

/// `show` filters.
struct Filter {
    session: Option<String>,
    tool: Option<globset::GlobMatcher>,
    effect: Option<String>,
}

impl Filter {
    fn new(
        session: Option<String>,
        tool: Option<&str>,
        effect: Option<&str>,
    ) -> anyhow::Result<Filter> {
        let tool = tool
            .map(|g| {
                globset::Glob::new(g)
                    .map(|g| g.compile_matcher())
                    .map_err(|e| CliError::usage(format!("--tool {g:?}: {e}")))
            })
            .transpose()?;
        if let Some(e) = effect
            && !matches!(e, "allow" | "ask" | "deny")
        {
            return Err(CliError::usage(format!(
                "--effect {e:?}: expected allow, ask or deny"
            )));
        }
        Ok(Filter {
            session,
            tool,
            effect: effect.map(str::to_string),
        })
    }

    fn accepts(&self, r: &Value) -> bool {
        if let Some(s) = &self.session
            && !r["session"]
                .as_str()
                .is_some_and(|v| v.starts_with(s.as_str()))
        {
            return false;
        }
        if let Some(m) = &self.tool
            && !r["qualified"].as_str().is_some_and(|q| m.is_match(q))
        {
            return false;
        }
        if let Some(e) = &self.effect
            && r["decision"]["effect"].as_str() != Some(e.as_str())
        {
            return false;
        }
        true
    }
}

fn show(json_out: bool, file: &Path, filter: &Filter) -> anyhow::Result<u8> {
    let f = File::open(file).map_err(|e| {
        CliError::kind(
            exit::USAGE,
            "unreadable",
            format!("cannot read audit log {}: {e}", file.display()),
        )
    })?;
    let mut reader = BufReader::new(f);
    let mut rows: Vec<[String; 8]> = Vec::new();
    let mut records: Vec<Value> = Vec::new();
    // call_id → the `tool_call`'s name and decision, shown (and filtered
    // on) with its `tool_result`.
    let mut calls: std::collections::HashMap<String, (Value, Value)> = Default::default();
    let mut line_no = 0u64;
    let mut buf = Vec::new();
    let read_err =
        |e: std::io::Error| CliError::with_code(exit::FAILED, format!("{}: {e}", file.display()));
    loop {
        buf.clear();
        // At most a line's limit is taken in: a 1 GB line (no record is
        // near the limit) is skipped, not read into memory.
        let n = std::io::Read::take(&mut reader, audit::MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(read_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.last() != Some(&b'\n') && buf.len() > audit::MAX_LINE_BYTES {
            tracing::warn!(
                "{}: line {line_no} is longer than {} bytes, not a record; not shown",
                file.display(),
                audit::MAX_LINE_BYTES
            );
            buf = Vec::new();
            reader.skip_until(b'\n').map_err(read_err)?;
            continue;
        }
        if buf.last() != Some(&b'\n') {
            tracing::warn!(
                "{}: line {line_no} is a torn tail, not shown",
                file.display()
            );
            break;
        }
        let record: Value = match serde_json::from_slice(&buf) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                tracing::warn!(
                    "{}: line {line_no} is not a record, not shown",
                    file.display()
                );
                continue;
            }
        };
        let id = record["call_id"].as_str().unwrap_or_default().to_string();
        let mut shown = record.clone();
        match record["event"].as_str() {
            Some("tool_call") => {
                calls.insert(
                    id,
                    (record["qualified"].clone(), record["decision"].clone()),
                );
            }
            // Requests of the other kinds (CONTRACT §8): the target and
            // what it names (a URI, a prompt's arguments are in the record).
            Some("request") => {
                let subject = match record["arguments"]["uri"].as_str() {
                    Some(uri) => format!("{} {uri}", record["target"].as_str().unwrap_or("?")),
                    None => record["target"].as_str().unwrap_or("?").to_string(),
                };
                shown["qualified"] = Value::String(subject.clone());
                calls.insert(id, (Value::String(subject), record["decision"].clone()));
            }
            Some("tool_result" | "request_result") => {
                if let Some((qualified, decision)) = calls.get(&id) {
                    shown["qualified"] = qualified.clone();
                    shown["decision"] = decision.clone();
                }
            }
            _ => {}
        }
        if !filter.accepts(&shown) {
            continue;
        }
        if json_out {
            records.push(record);
        } else {
            rows.push(row(&shown));
        }
    }
    // What is shown is only as good as the chain: a record edited in place
    // (a deny made an allow, a key given twice) reads as any other.
    let checked = chain_check(file);
    if let Some(warning) = &checked.1 {
        eprintln!("warden: warning: {}", warden_core::display::text(warning));
    }
    if json_out {
        super::json::print(
            "audit show",
            json!({"file": file, "records": records, "verified": checked.0}),
        )?;
    } else {
        write_stdout(&table(&rows))?;
    }
    Ok(exit::OK)
}

/// `show`'s check of the chain (with `WARDEN_AUDIT_KEY` when set): the
/// `verified` field of `--json` (`{"ok", "seq", "problem"}`) and a warning
/// for a log that does not verify.
fn chain_check(file: &Path) -> (Value, Option<String>) {
    let key = audit::load_key(None).ok().flatten();
    match audit::verify(file, key.as_deref()) {
        VerifyReport::Ok { .. } => (json!({"ok": true, "seq": null, "problem": null}), None),
        VerifyReport::KeyRequired { .. } => (
            json!({"ok": null, "seq": null, "problem": "key_required"}),
            Some(format!(
                "{} is keyed and {} is not set: its records' hashes were not checked",
                file.display(),
                audit::KEY_ENV
            )),
        ),
        VerifyReport::Bad(f) => (
            json!({"ok": false, "seq": f.seq, "problem": f.problem.kind()}),
            Some(format!(
                "{} does not verify from seq {} ({}): records from there on may be altered, \
                 inserted or missing; `warden audit verify` says more",
                file.display(),
                f.seq,
                f.problem.kind()
            )),
        ),
        VerifyReport::Unreadable { message } => (
            json!({"ok": null, "seq": null, "problem": "unreadable"}),
            Some(format!("the chain could not be checked: {message}")),
        ),
    }
}

const HEADER: [&str; 8] = [
    "SEQ", "TIME", "SESSION", "EVENT", "TOOL", "DECISION", "OUTCOME", "DURATION",
];

fn row(r: &Value) -> [String; 8] {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let seq = r["seq"]
        .as_u64()
        .map_or_else(String::new, |n| n.to_string());
    let ts = r["ts"].as_str().unwrap_or("");
    let time = chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|_| ts.to_string());
    let session: String = s(&r["session"]).chars().take(8).collect();
    let event = s(&r["event"]);
    let (mut tool, mut decision, mut outcome, mut duration) =
        (String::new(), String::new(), String::new(), String::new());
    match event.as_str() {
        "tool_call" | "tool_result" | "request" | "request_result" => {
            tool = s(&r["qualified"]);
            if r["decision"].is_object() {
                decision = format!(
                    "{}/{}",
                    s(&r["decision"]["effect"]),
                    s(&r["decision"]["stage"])
                );
            }
            outcome = s(&r["outcome"]);
            // Who answered a server's own request, and what warden capped.
            if let Some(by) = r["answered_by"].as_str() {
                outcome.push_str(&format!(" (by {by})"));
            }
            if r["capped"].is_object() {
                outcome.push_str(" (capped)");
            }
            if let Some(ms) = r["duration_ms"].as_u64() {
                duration = format!("{ms} ms");
            }
        }
        "policy_reload" => {
            outcome = if r["ok"] == Value::Bool(true) {
                format!("reloaded, {} rules", r["rules"].as_u64().unwrap_or(0))
            } else {
                format!("refused (previous kept): {}", s(&r["error"]))
            };
        }
        "audit_gap" => {
            outcome = format!(
                "{} records lost since {}",
                r["lost"].as_u64().unwrap_or(0),
                s(&r["since"])
            );
        }
        "server_start" => {
            tool = s(&r["server"]);
            outcome = r["pid"]
                .as_u64()
                .map_or_else(|| s(&r["transport"]), |p| format!("pid {p}"));
        }
        "server_exit" => {
            tool = s(&r["server"]);
            outcome = match (r["status"].as_i64(), r["signal"].as_i64()) {
                (_, Some(sig)) => format!("signal {sig}"),
                (Some(code), None) => format!("exit {code}"),
                (None, None) => s(&r["reason"]),
            };
        }
        "approval" => {
            tool = s(&r["server"]);
            outcome = s(&r["action"]);
        }
        "session_start" => {
            outcome = format!("warden {}", s(&r["warden_version"]));
            decision = s(&r["mode"]);
        }
        "session_end" => {
            outcome = format!(
                "{} calls, {} denied",
                r["tool_calls"].as_u64().unwrap_or(0),
                r["denied"].as_u64().unwrap_or(0)
            );
        }
        _ => {}
    }
    // A record's strings come from servers (names, reasons) and from
    // whoever wrote the file: each cell is one neutralised field, its runs
    // of spaces one space, so that only the table's own gaps (two or more)
    // set columns apart (`x  allow/default  ok` inside a URI once read as
    // a decision of its own).
    [seq, time, session, event, tool, decision, outcome, duration]
        .map(|c| one_space(&warden_core::display::line(&c)))
}

/// `text` with every run of whitespace (spaces of any width included) as
/// one space.
fn one_space(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        out.push(c);
    }
    out
}

fn table(rows: &[[String; 8]]) -> String {
    let mut widths = HEADER.map(|h| h.chars().count());
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let header = HEADER.map(str::to_string);
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in r.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w - cell.chars().count();
            // Numbers right-aligned, text left-aligned.
            if i == 0 || i == 7 {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::with_code(
            exit::FAILED,
            format!("writing to stdout: {e}"),
        )),
        _ => Ok(()),
    }
}
