//! Text values read as the commands a shell runs for them.
//!
//! A text pattern (`cmd: ls*`, `cmd: rm*`) is matched against the value as
//! sent, but a server that hands the value to a shell (`sh -c VALUE`, a
//! `subprocess.run(…, shell=True)`) runs something else: `ls; cat
//! /etc/shadow` matches `ls*` and runs `cat`, and `X=1 rm`, `/bin/rm`,
//! `env rm`, `'r''m'` or `sh -c 'rm …'` all run `rm` without matching
//! `rm*`. So:
//!
//! - an `allow` text pattern with a wildcard never holds for a value that
//!   holds shell syntax ([`shell_syntax`]): the wildcard would cover a
//!   second command, a substitution or a redirection the rule never
//!   named (the rules stage asks instead, saying why);
//! - a `deny`/`ask` text pattern also fires when it matches any command a
//!   shell may run for the value ([`any_command`]): every command between
//!   separators (`;`, `&`, `|`, line breaks, `` ` ``, `(`, `)`), read from
//!   each of its words (a wrapper such as `env`, `sudo`, `xargs`,
//!   `busybox`, `timeout 5` or `find -exec`, or an assignment `X=1`, runs
//!   the words after it), its first word by its file name (`/usr/bin/rm`
//!   is `rm`), with and without quotes and backslashes, line
//!   continuations joined and runs of blanks read as one, and a command
//!   word that is a glob (`/bin/r?`) as every command it may expand to.
//!   A shell can still spell a command no pattern sees (`a=r; ${a}m`): deny rules on
//!   commands catch the usual disguises, an `allow` is what bounds them.

/// Characters with which a shell runs more than the words of one command:
/// a second command (`;`, `&`, `|`, line breaks), a substitution (`` ` ``,
/// `$(…)`, `$VAR`), a subshell or process substitution (`(`, `)`) or a
/// redirection (`<`, `>`).
const SHELL_SYNTAX: &[char] = &[';', '&', '|', '`', '$', '(', ')', '<', '>', '\n', '\r'];

/// Where commands end, for [`any_command`].
const SEPARATORS: &[char] = &[';', '&', '|', '`', '(', ')', '\n', '\r'];

/// Most bytes of commands read from a later word (`env rm …`) matched per
/// value: beyond it the value is not read further and the rule fires
/// (fails closed), so a value of many short words cannot make a decision
/// quadratic.
const BUDGET: usize = 1 << 20;

/// The first shell-syntax character in `value`, if any.
pub(super) fn shell_syntax(value: &str) -> Option<char> {
    value.chars().find(|c| SHELL_SYNTAX.contains(c))
}

/// Whether a text pattern has a wildcard (`*`, `?`, `[…]`, `{a,b}`) that
/// could cover more than it names. A pattern of only `*` (`message: *`)
/// names no command: its writer allowed any value, shell syntax included.
pub(super) fn has_wildcard(pattern: &str) -> bool {
    pattern.contains(super::parse::GLOB_META) && !pattern.chars().all(|c| c == '*')
}

/// What [`any_command`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CommandHit {
    /// Some command a shell may run matches.
    Yes,
    No,
    /// The value has more to read than [`BUDGET`].
    TooLong,
}

/// Whether `matches` holds for some command a shell may run for `value`
/// (see the module docs). `pattern` is the rule's glob text: only commands
/// that start with its literal start can match it, so only those are
/// built, and a pattern that starts with `*` needs only whole commands.
pub(super) fn any_command(
    value: &str,
    pattern: &str,
    matches: impl Fn(&str) -> bool,
) -> CommandHit {
    any_command_within(value, pattern, BUDGET, matches)
}

/// [`any_command`] with a budget of its own (for tests).
fn any_command_within(
    value: &str,
    pattern: &str,
    budget: usize,
    matches: impl Fn(&str) -> bool,
) -> CommandHit {
    // A single word with nothing a shell reads differently is its own
    // only command: the raw match already decided it.
    if !value.contains(|c: char| {
        c.is_ascii_whitespace() || c == '/' || c == '\'' || c == '"' || c == '\\'
    }) && !value.contains(SEPARATORS)
    {
        return CommandHit::No;
    }
    let literal_end = pattern
        .find(|c: char| super::parse::GLOB_META.contains(&c) || c == '\\')
        .unwrap_or(pattern.len());
    let prefix = &pattern[..literal_end];
    let whole_only = pattern.starts_with('*');
    let joined = blanks_as_one(&value.replace("\\\r\n", "").replace("\\\n", ""));
    let unquoted = blanks_as_one(&unquote(&joined));
    let mut spent = 0usize;
    for text in [&joined, &unquoted] {
        for command in text.split(SEPARATORS) {
            let command = command.trim();
            if command.is_empty() {
                continue;
            }
            // Whole commands are linear in the value: not counted.
            if matches(command) || glob_command_may_be(command, prefix) {
                return CommandHit::Yes;
            }
            if whole_only {
                continue;
            }
            for start in word_starts(command) {
                let rest = &command[start..];
                let (first, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = first.rsplit('/').next().unwrap_or(first);
                if !name.starts_with(prefix) {
                    continue;
                }
                spent += name.len() + tail.len() + 1;
                if spent > budget {
                    return CommandHit::TooLong;
                }
                let reading = if tail.is_empty() {
                    name.to_string()
                } else {
                    format!("{name} {tail}")
                };
                if matches(&reading) {
                    return CommandHit::Yes;
                }
            }
        }
    }
    CommandHit::No
}

/// Whether the command word of `command` (its first word after any
/// `NAME=value` assignments) is a glob the shell may expand to the
/// command the pattern names: `/bin/r?` or `/usr/bin/r[m]` runs `rm`.
/// `pattern_start` is the pattern's literal start; when it is empty (the
/// pattern starts with a wildcard), any glob may be the command.
fn glob_command_may_be(command: &str, pattern_start: &str) -> bool {
    let Some(word) = command.split(' ').find(|w| !is_assignment(w)) else {
        return false;
    };
    let name = word.rsplit('/').next().unwrap_or(word);
    if !name.contains(['*', '?', '[']) {
        return false;
    }
    let wanted = pattern_start.split(' ').next().unwrap_or("");
    if wanted.is_empty() {
        return true;
    }
    globset::Glob::new(name).is_ok_and(|g| g.compile_matcher().is_match(wanted))
}

/// `NAME=value`, a shell assignment before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Byte offsets where the words of `command` (single-blank separated,
/// trimmed) start.
fn word_starts(command: &str) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(command.match_indices(' ').map(|(i, _)| i + 1))
}

/// Runs of blanks (spaces, tabs) as one space: a shell splits words on
/// any run.
fn blanks_as_one(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = if c == '\t' { ' ' } else { c };
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

/// `text` without quotes and with each backslash escape replaced by the
/// character it escapes: `'r''m'` and `r\m` are `rm` to a shell.
fn unquote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {}
            '\\' => out.extend(chars.next()),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use globset::Glob;

    fn hit(pattern: &str, value: &str) -> CommandHit {
        let m = Glob::new(pattern).unwrap().compile_matcher();
        any_command(value, pattern, |r| m.is_match(r))
    }

    #[test]
    fn only_a_pattern_that_names_something_can_cover_too_much() {
        assert!(has_wildcard("ls*"));
        assert!(has_wildcard("echo ?"));
        assert!(has_wildcard("*.txt"));
        assert!(!has_wildcard("*"));
        assert!(!has_wildcard("**"));
        assert!(!has_wildcard("ls -l"));
    }

    #[test]
    fn every_disguise_of_a_command_is_read_as_it() {
        for value in [
            "ls; rm -rf /",
            "ls && rm -rf /",
            "ls || rm x",
            "ls | rm x",
            "ls\nrm x",
            "ls $(rm x)",
            "ls `rm x`",
            "X=1 rm x",
            "env rm x",
            "env -i A=1 rm x",
            "busybox rm x",
            "sudo -u root rm x",
            "timeout 5 rm x",
            "/bin/../usr/bin/rm x",
            "./rm x",
            "'r''m' x",
            "\"rm\" x",
            "r\\m x",
            "sh -c 'rm -rf /'",
            "find . -exec rm {} +",
            "exec rm x",
            "{ rm x; }",
            "r\\\nm x",
            "rm\t\t-rf /",
            "(rm x)",
            "/bin/r? x",
            "X=1 /usr/bin/r[m] x",
            "/bin/* x",
        ] {
            assert_eq!(hit("rm*", value), CommandHit::Yes, "{value}");
        }
        assert_eq!(hit("rm -rf*", "ls;  rm    -rf /"), CommandHit::Yes);
        assert_eq!(hit("*rm", "ls; x rm; ls"), CommandHit::Yes);
        // What runs no `rm` is not taken for one.
        for value in ["ls -la", "lsrm", "ls", "echo firm", "ls *.txt", "/bin/l? x"] {
            assert_eq!(hit("rm*", value), CommandHit::No, "{value}");
        }
    }

    #[test]
    fn shell_syntax_is_found() {
        assert_eq!(shell_syntax("ls -la"), None);
        assert_eq!(shell_syntax("ls; rm"), Some(';'));
        assert_eq!(shell_syntax("ls $(rm)"), Some('$'));
        assert_eq!(shell_syntax("ls\nrm"), Some('\n'));
        assert_eq!(shell_syntax("ls > /etc/x"), Some('>'));
    }

    /// Many short words cost at most the budget, and then the rule fires;
    /// words that cannot start a match cost nothing.
    #[test]
    fn a_value_of_many_words_is_bounded() {
        let value = "a ".repeat(4096);
        let within = |pattern: &str| {
            let m = Glob::new(pattern).unwrap().compile_matcher();
            any_command_within(&value, pattern, 64 << 10, |r| m.is_match(r))
        };
        assert_eq!(within("a*b"), CommandHit::TooLong);
        assert_eq!(within("rm*"), CommandHit::No);
        assert_eq!(within("a a*"), CommandHit::Yes);
    }
}
