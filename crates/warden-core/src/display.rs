//! How text that warden does not control (a server's results, names,
//! descriptions and errors, a model's answer, an argument a person is asked
//! to approve, an audit record) is shown to a person at a terminal.
//!
//! A person reading that text is part of warden's security: they approve
//! calls and judge results. So such text must neither drive their terminal
//! (set its title, clear it, write the clipboard with OSC 52, move the
//! cursor to overwrite a line) nor hide from them (bidi overrides that
//! reorder what is read, zero-width characters that hide what is there).
//! This module is the one place that decides; every output edge calls
//! [`neutralise`] (or [`text`], [`line`], [`bytes`]).
//!
//! What is shown, and why character by character rather than by parsing
//! escape sequences: neutralising the *introducer* of every sequence (ESC,
//! or the 8-bit C1 code point) makes the rest of the sequence inert,
//! printable text, whatever its kind (CSI, OSC with a BEL or ST end, DCS,
//! SOS/PM/APC), its length or nesting, and wherever a stream was split. A
//! parser would have to agree with every terminal about where a sequence
//! ends; this needs no agreement.
//!
//! - C0 control characters and DEL in caret notation, as `cat -v` and
//!   `less` show them: ESC is `^[`, BEL `^G`, a lone CR `^M`, DEL `^?`.
//!   In [`Layout::Block`] `\n` and `\t` stay (line structure) and a CR
//!   right before LF is dropped (a CRLF line end cannot overwrite
//!   anything); in [`Layout::Line`] they are `^J`, `^I` and `^M`.
//! - Every other hidden code point as `<U+XXXX>`: C1 controls (U+0080 to
//!   U+009F, e.g. the 8-bit CSI `<U+009B>`), bidi controls (U+061C,
//!   U+200E/F, U+202A to U+202E, U+2066 to U+2069), zero-width and
//!   invisible characters (U+200B to U+200D, U+2060 to U+2064, U+FEFF,
//!   U+180E, U+00AD, fillers…), line and paragraph separators, tag
//!   characters (U+E0000 to U+E007F) and variation selectors, except one
//!   U+FE0E/U+FE0F right after a visible non-ASCII character (the emoji
//!   presentation selector of ordinary text; a second one, or one after
//!   ASCII, is shown: runs of selectors can smuggle hidden data).
//! - Bytes that are not UTF-8 (only [`bytes`] takes bytes) as `<0xNN>`:
//!   a terminal not in UTF-8 mode reads a lone 0x9B as CSI.

use std::borrow::Cow;
use std::fmt::Write as _;

/// How line structure is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Multi-line text (a tool's result, a model's answer, a log line):
    /// `\n` and `\t` are kept, CRLF becomes LF.
    Block,
    /// One field of a one-line layout (a table cell, an argument in an
    /// approval question, a name): every control character is shown, so
    /// the field cannot start a line that looks like warden's own.
    Line,
}

/// `text` as it may be shown on a terminal or in a CI job's log: borrowed
/// when nothing needed neutralising (the common case costs one scan).
pub fn neutralise(text: &str, layout: Layout) -> Cow<'_, str> {
    match neutralise_chars(text, layout) {
        Cow::Borrowed(shown) => workflow_commands(shown),
        Cow::Owned(shown) => Cow::Owned(workflow_commands(&shown).into_owned()),
    }
}

/// `text` with every CI workflow command broken by a backslash, so a CI
/// runner reading the log takes none of them for its own: a line that
/// starts, after blanks, with `::` (GitHub Actions, Gitea and Forgejo:
/// `::add-mask::`, `::set-output`, `::stop-commands::`, `::error …::`)
/// becomes `:\:`, and `##[` (GitHub's older form) or `##vso[` (Azure
/// Pipelines), read anywhere in a line, become `#\#[` and `#\#vso[`.
/// A person still reads the text; a runner sees no command. The blanks
/// skipped are every Unicode space and, to be safe where a runner
/// compares culture-sensitively (some marks weigh nothing there), every
/// non-ASCII character that is not a letter or digit.
pub fn workflow_commands(text: &str) -> Cow<'_, str> {
    // Most text has no command (log lines are full of `warden::mcp`): one
    // look before anything is copied.
    let commands = (text.contains("::") || text.contains("##"))
        && text.split('\n').any(|line| {
            line[lead_len(line)..].starts_with("::")
                || line
                    .match_indices("##")
                    .any(|(at, _)| hash_command(line, at))
        });
    if !commands {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut changed = false;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (blank, rest) = line.split_at(lead_len(line));
        out.push_str(blank);
        let rest = match rest.strip_prefix("::") {
            Some(after) => {
                out.push_str(":\\:");
                changed = true;
                after
            }
            None => rest,
        };
        let mut last = 0;
        for (at, _) in rest.match_indices("##") {
            if hash_command(rest, at) && at >= last {
                out.push_str(&rest[last..=at]);
                out.push('\\');
                last = at + 1;
                changed = true;
            }
        }
        out.push_str(&rest[last..]);
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// The blanks a runner skips before looking for `::` (see
/// [`workflow_commands`]), in bytes.
fn lead_len(line: &str) -> usize {
    line.char_indices()
        .find(|&(_, c)| !(c.is_whitespace() || (!c.is_ascii() && !c.is_alphanumeric())))
        .map_or(line.len(), |(at, _)| at)
}

/// Whether the `##` at byte `at` of `line` opens `##[` or `##vso[`.
fn hash_command(line: &str, at: usize) -> bool {
    let tail = line.as_bytes().get(at + 2..).unwrap_or_default();
    tail.first() == Some(&b'[')
        || tail
            .get(..4)
            .is_some_and(|t| t.eq_ignore_ascii_case(b"vso["))
}

/// [`neutralise`] without [`workflow_commands`]: characters only.
fn neutralise_chars(text: &str, layout: Layout) -> Cow<'_, str> {
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if shown_as(c, previous, next, layout).is_some() {
            let mut out = String::with_capacity(text.len() + 16);
            out.push_str(&text[..at]);
            push_neutralised(&mut out, &text[at..], previous, layout);
            return Cow::Owned(out);
        }
        previous = Some(c);
    }
    Cow::Borrowed(text)
}

/// [`neutralise`] in [`Layout::Block`].
pub fn text(text: &str) -> Cow<'_, str> {
    neutralise(text, Layout::Block)
}

/// [`neutralise`] in [`Layout::Line`].
pub fn line(text: &str) -> Cow<'_, str> {
    neutralise(text, Layout::Line)
}

/// Bytes that may not be UTF-8 (a process's stderr, a log writer's
/// buffer): valid runs as [`neutralise`], every other byte as `<0xNN>`.
pub fn bytes(raw: &[u8], layout: Layout) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut previous = None;
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid();
        push_neutralised(&mut out, valid, previous, layout);
        previous = valid.chars().next_back();
        for b in chunk.invalid() {
            let _ = write!(out, "<0x{b:02X}>");
            previous = None;
        }
    }
    out
}

/// [`neutralise`] on every string inside a JSON value, keys included: for
/// a document whose fields are then laid out for a person (`mcp status`).
pub fn neutralise_json(value: &mut serde_json::Value, layout: Layout) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let Cow::Owned(shown) = neutralise(s, layout) {
                *s = shown;
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| neutralise_json(item, layout)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                neutralise_json(&mut item, layout);
                map.insert(neutralise(&key, layout).into_owned(), item);
            }
        }
        _ => {}
    }
}

/// JSON text (as serde_json writes it) with every code point a terminal
/// would act on or hide written as a `\uXXXX` escape: DEL, C1 controls,
/// bidi, invisible and tag characters, variation selectors. serde_json
/// escapes only C0 controls, so a raw U+009B or U+202E would otherwise
/// reach a terminal from `--json`. The JSON value is the same (a parser
/// reads the escape back as the character); outside strings serde_json
/// writes only ASCII and no `#`, so every replaced character is inside a
/// string. A `#` followed by another is written `\u0023` too, so no CI
/// runner finds a `##[` or `##vso[` command in the line
/// ([`workflow_commands`]; the pretty layout never starts a line with
/// `::`).
pub fn json_inert(json: &str) -> Cow<'_, str> {
    let escaped = |c: char| c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) || hidden(c);
    if !json.chars().any(escaped) && !json.contains("##") {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        // `#` before `#`: no `##[` or `##vso[` (a CI runner's command,
        // read anywhere in a line) is left in the text ([`workflow_commands`]).
        if escaped(c) || (c == '#' && chars.peek() == Some(&'#')) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Appends `text` neutralised; `previous` is the character shown just
/// before it (for the variation-selector rule).
fn push_neutralised(out: &mut String, text: &str, mut previous: Option<char>, layout: Layout) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match shown_as(c, previous, chars.peek().copied(), layout) {
            None => out.push(c),
            Some(Shown::Dropped) => {}
            Some(Shown::Caret(letter)) => {
                out.push('^');
                out.push(letter);
            }
            Some(Shown::CodePoint) => {
                let _ = write!(out, "<U+{:04X}>", u32::from(c));
            }
        }
        previous = Some(c);
    }
}

/// What a character becomes instead of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// A CR of a CRLF line end in [`Layout::Block`].
    Dropped,
    /// `^` and this letter (C0 controls, DEL).
    Caret(char),
    /// `<U+XXXX>`.
    CodePoint,
}

/// `None` when `c` may be written as it is.
fn shown_as(c: char, previous: Option<char>, next: Option<char>, layout: Layout) -> Option<Shown> {
    let block = layout == Layout::Block;
    match c {
        '\n' | '\t' if block => None,
        '\r' if block && next == Some('\n') => Some(Shown::Dropped),
        '\u{0}'..='\u{1f}' => Some(Shown::Caret(char::from(c as u8 + 0x40))),
        '\u{7f}' => Some(Shown::Caret('?')),
        '\u{80}'..='\u{9f}' => Some(Shown::CodePoint),
        '\u{FE0E}' | '\u{FE0F}' if previous.is_some_and(carries_presentation) => None,
        c if hidden(c) => Some(Shown::CodePoint),
        _ => None,
    }
}

/// A character an emoji presentation selector may follow: visible, not
/// ASCII (no ASCII character needs one in ordinary text), not itself a
/// selector or hidden.
fn carries_presentation(c: char) -> bool {
    !c.is_ascii() && !c.is_control() && !hidden(c)
}

/// Code points a terminal shows as nothing, or that change how the text
/// around them is ordered or broken: what a person would not see.
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{00AD}'                      // soft hyphen
        | '\u{034F}'                    // combining grapheme joiner
        | '\u{061C}'                    // Arabic letter mark (bidi)
        | '\u{115F}' | '\u{1160}'       // Hangul fillers
        | '\u{17B4}' | '\u{17B5}'       // Khmer invisible vowels
        | '\u{180B}'..='\u{180F}'       // Mongolian selectors, vowel separator
        | '\u{200B}'..='\u{200F}'       // zero-width space/joiners, LRM, RLM
        | '\u{2028}'..='\u{202E}'       // line/paragraph separators, bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}'       // word joiner, invisible operators, bidi isolates, deprecated format
        | '\u{3164}' | '\u{FFA0}'       // Hangul fillers
        | '\u{FE00}'..='\u{FE0F}'       // variation selectors
        | '\u{FEFF}'                    // byte order mark, zero-width no-break space
        | '\u{FFF9}'..='\u{FFFB}'       // interlinear annotation
        | '\u{FFFE}' | '\u{FFFF}'       // noncharacters
        | '\u{1D173}'..='\u{1D17A}'     // musical format characters
        | '\u{E0000}'..='\u{E007F}'     // tag characters
        | '\u{E0100}'..='\u{E01EF}'     // variation selectors supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No byte of the output can drive a terminal or hide.
    fn assert_inert(shown: &str) {
        let mut previous = None;
        for c in shown.chars() {
            let selector =
                matches!(c, '\u{FE0E}' | '\u{FE0F}') && previous.is_some_and(carries_presentation);
            assert!(
                c == '\n' || c == '\t' || selector || (!c.is_control() && !hidden(c)),
                "{c:?} left in {shown:?}"
            );
            previous = Some(c);
        }
    }

    #[test]
    fn workflow_commands_are_broken_for_ci_runners() {
        let hostile = "ok\n::add-mask::x\n \t\u{3000}::set-output name=a::b\nsee ##[error]x and ##VSO[task]y\na::b ## [ #vso[";
        let shown = text(hostile);
        assert_eq!(
            shown,
            "ok\n:\\:add-mask::x\n \t\u{3000}:\\:set-output name=a::b\nsee #\\#[error]x and #\\#VSO[task]y\na::b ## [ #vso["
        );
        // One-line fields too, and a field that starts a line.
        assert_eq!(line("::warning::w"), ":\\:warning::w");
        assert_eq!(line("x^J::y"), "x^J::y");
        // Nothing else changes, and plain text stays borrowed.
        assert!(matches!(text("a::b\n# ## #[x]"), Cow::Borrowed(_)));
        // JSON: the same value, with no `##` left in the text.
        let value = serde_json::json!({"t": "##[set-output]x ##vso[ ###"});
        let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
        let inert = json_inert(&pretty);
        assert!(!inert.contains("##"), "{inert}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&inert).ok(),
            Some(value)
        );
    }

    #[test]
    fn plain_text_is_borrowed() {
        let s = "héllo wörld ✓ 日本語\n\tindented";
        assert!(matches!(text(s), Cow::Borrowed(_)));
        assert!(matches!(line("a b c"), Cow::Borrowed(_)));
    }

    #[test]
    fn csi_is_shown() {
        assert_eq!(text("a\x1b[2Jb\x1b[1;31mred"), "a^[[2Jb^[[1;31mred");
    }

    #[test]
    fn osc_title_and_clipboard_with_bel_and_st() {
        let bel = "before\x1b]0;TITLE\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07after";
        assert_eq!(text(bel), "before^[]0;TITLE^G^[[2J^[]52;c;cHduZWQ=^Gafter");
        let st = "\x1b]52;c;cHduZWQ=\x1b\\";
        assert_eq!(text(st), "^[]52;c;cHduZWQ=^[\\");
        // 8-bit OSC ended by the 8-bit ST.
        assert_eq!(text("\u{9d}0;t\u{9c}"), "<U+009D>0;t<U+009C>");
        assert_inert(&text(bel));
    }

    #[test]
    fn dcs_sos_pm_apc() {
        assert_eq!(text("\x1bP1$r\x1b\\"), "^[P1$r^[\\");
        assert_eq!(
            text("\x1bXsos\x1b^pm\x1b_apc\u{90}\u{98}\u{9e}\u{9f}"),
            "^[Xsos^[^pm^[_apc<U+0090><U+0098><U+009E><U+009F>"
        );
    }

    #[test]
    fn c1_csi_in_utf8() {
        assert_eq!(text("x\u{9b}2Jy"), "x<U+009B>2Jy");
        assert_eq!(line("\u{85}"), "<U+0085>");
    }

    #[test]
    fn bidi_controls_are_visible() {
        for c in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}'] {
            assert_eq!(line(&format!("a{c}b")), format!("a<U+{:04X}>b", c as u32));
        }
        for c in ['\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{061C}'] {
            assert_eq!(line(&c.to_string()), format!("<U+{:04X}>", c as u32));
        }
        assert_eq!(line("rm -rf /\u{202E}txt.exe"), "rm -rf /<U+202E>txt.exe");
    }

    #[test]
    fn zero_width_and_bom_are_visible() {
        assert_eq!(
            text("a\u{200B}b\u{200C}c\u{200D}d\u{200E}\u{200F}"),
            "a<U+200B>b<U+200C>c<U+200D>d<U+200E><U+200F>"
        );
        assert_eq!(
            text("\u{FEFF}x\u{2060}\u{2061}\u{2064}\u{180E}"),
            "<U+FEFF>x<U+2060><U+2061><U+2064><U+180E>"
        );
        assert_eq!(text("\u{E0041}\u{E007F}"), "<U+E0041><U+E007F>");
    }

    #[test]
    fn a_lone_cr_cannot_overwrite_a_line() {
        assert_eq!(text("approve: yes\rdeny"), "approve: yes^Mdeny");
        assert_eq!(text("a\r\nb"), "a\nb");
        assert_eq!(text("a\r\r\nb"), "a^M\nb");
        assert_eq!(text("end\r"), "end^M");
        assert_eq!(line("a\r\nb\tc"), "a^M^Jb^Ic");
    }

    #[test]
    fn other_c0_and_del() {
        assert_eq!(text("\0\x08\x0b\x0c\x7f"), "^@^H^K^L^?");
        assert_eq!(line("\n"), "^J");
    }

    #[test]
    fn variation_selectors() {
        // Emoji presentation after an emoji stays; after ASCII, in a run,
        // or from the supplement, it is shown.
        assert_eq!(text("\u{2764}\u{FE0F}"), "\u{2764}\u{FE0F}");
        assert_eq!(text("a\u{FE0F}"), "a<U+FE0F>");
        assert_eq!(text("\u{2764}\u{FE0F}\u{FE0F}"), "\u{2764}\u{FE0F}<U+FE0F>");
        assert_eq!(text("\u{FE00}"), "<U+FE00>");
        assert_eq!(text("\u{1F600}\u{E0100}"), "\u{1F600}<U+E0100>");
        assert_eq!(text("\u{FE0F}"), "<U+FE0F>");
    }

    #[test]
    fn nested_and_long_sequences() {
        let nested = "\x1b]0;\x1b]52;c;x\x07\x07\x1b[\x1b[2J";
        let shown = text(nested);
        assert_inert(&shown);
        assert_eq!(shown, "^[]0;^[]52;c;x^G^G^[[^[[2J");
        let long = format!("\x1b[{}m", "1;".repeat(100_000));
        let shown = text(&long);
        assert_inert(&shown);
        assert_eq!(shown.len(), long.len() + 1);
    }

    #[test]
    fn a_sequence_split_across_chunks_is_inert_in_each() {
        // Output written in pieces: each piece alone carries no ESC.
        let whole = "x\x1b]52;c;cHduZWQ=\x07y";
        for cut in 0..=whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_inert(&text(a));
            assert_inert(&text(b));
        }
    }

    #[test]
    fn invalid_utf8_bytes_are_shown() {
        assert_eq!(bytes(b"a\x9b2Jb", Layout::Block), "a<0x9B>2Jb");
        assert_eq!(bytes(b"\xff\x1b[0m\n", Layout::Block), "<0xFF>^[[0m\n");
        assert_eq!(bytes("ok \u{202E}".as_bytes(), Layout::Line), "ok <U+202E>");
        // A truncated UTF-8 sequence is bytes, not a character.
        assert_eq!(bytes(b"\xe2\x80", Layout::Block), "<0xE2><0x80>");
    }

    #[test]
    fn json_strings_and_keys() {
        let mut v = serde_json::json!({"k\u{1b}": ["a\u{202E}b", 1, {"x": "\r"}]});
        neutralise_json(&mut v, Layout::Line);
        assert_eq!(
            v,
            serde_json::json!({"k^[": ["a<U+202E>b", 1, {"x": "^M"}]})
        );
    }

    #[test]
    fn json_keeps_its_value_and_is_inert() {
        let value =
            serde_json::json!({"t\u{202e}": "a\u{9b}2J\u{7f}\u{200b}\u{E0041}\u{2764}\u{FE0F} ok"});
        let text = serde_json::to_string(&value).unwrap();
        let inert = json_inert(&text);
        assert!(
            inert.is_ascii() || inert.chars().all(|c| !hidden(c) && !c.is_control()),
            "{inert}"
        );
        assert!(
            inert.contains("\\u202e") && inert.contains("\\udb40\\udc41"),
            "{inert}"
        );
        let back: serde_json::Value = serde_json::from_str(&inert).unwrap();
        assert_eq!(back, value);
        assert!(matches!(json_inert("{\"a\":\"é\"}"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_code_point_comes_out_inert() {
        let all: String = (0u32..=0x10FFFF).filter_map(char::from_u32).collect();
        assert_inert(&text(&all));
        let shown = line(&all);
        assert!(!shown.contains('\n') && !shown.contains('\t'));
    }
}
