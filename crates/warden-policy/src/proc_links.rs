//! Where `/proc`'s magic links lead.
//!
//! Readings are lexical ([`crate::canon`]), but some links are no secret:
//! every process has them, and a path through one is an old way around a
//! rule on the path it leads to. `/proc/self/root/etc/shadow` is
//! `/etc/shadow` (the process's root), `/proc/self/root/../etc/shadow`
//! too (`..` at a root stays there, while a lexical `..` removes `root`),
//! `/proc/self/cwd/x` is `x` in the working directory, and
//! `/proc/self/task/1/environ` or `/proc/thread-self/environ` is the
//! process's `environ`. A server that opens the path (Python's
//! `Path.resolve()` follows the links first) reads what the link leads to,
//! so those are readings too: a `deny` on `/etc/**` and the shipped
//! policies' secret paths see them, and an `allow` must cover them.

/// Most paths one value's links lead to (each `cwd` link branches once
/// per working directory).
const MAX_READINGS: usize = 16;

/// The paths `path` (absolute, as sent or as read) leads to through
/// `/proc/PID/root`, `/proc/PID/cwd` (to each of `cwds`) and
/// `/proc/PID/task/TID` or `/proc/thread-self` (to `/proc/PID`), where it
/// goes through one; empty otherwise.
pub(crate) fn readings(path: &str, cwds: &[&str]) -> Vec<String> {
    if !path.starts_with('/') || !path.contains("proc") {
        return Vec::new();
    }
    let parts: Vec<&str> = path.split('/').collect();
    let mut out = Vec::new();
    walk(&parts, Vec::new(), false, cwds, &mut out);
    out
}

fn walk<'p>(
    parts: &[&'p str],
    mut stack: Vec<&'p str>,
    mut jumped: bool,
    cwds: &[&'p str],
    out: &mut Vec<String>,
) {
    for (i, part) in parts.iter().enumerate() {
        match *part {
            "" | "." => continue,
            ".." => {
                stack.pop();
                continue;
            }
            other => stack.push(other),
        }
        // `/proc/thread-self` and `/proc/PID/task/TID` are `/proc/PID`.
        if stack.len() >= 2 && stack[0] == "proc" && stack[1] == "thread-self" {
            stack[1] = "self";
            jumped = true;
        }
        if stack.len() == 4 && stack[0] == "proc" && is_pid(stack[1]) && stack[2] == "task" {
            stack.truncate(2);
            jumped = true;
            continue;
        }
        if stack.len() == 3 && stack[0] == "proc" && is_pid(stack[1]) {
            match stack[2] {
                "root" => {
                    stack.clear();
                    jumped = true;
                }
                "cwd" => {
                    for cwd in cwds {
                        if out.len() >= MAX_READINGS {
                            return;
                        }
                        let base: Vec<&'p str> = cwd.split('/').filter(|s| !s.is_empty()).collect();
                        walk(&parts[i + 1..], base, true, cwds, out);
                    }
                    return;
                }
                _ => {}
            }
        }
    }
    if jumped && out.len() < MAX_READINGS {
        let path = format!("/{}", stack.join("/"));
        if !out.contains(&path) {
            out.push(path);
        }
    }
}

fn is_pid(part: &str) -> bool {
    part == "self" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> Vec<String> {
        readings(path, &["/w", "/srv"])
    }

    #[test]
    fn magic_links_lead_where_the_kernel_sends_them() {
        assert_eq!(read("/proc/self/root/etc/shadow"), ["/etc/shadow"]);
        assert_eq!(read("/proc/1/root/../etc/shadow"), ["/etc/shadow"]);
        assert_eq!(read("//proc/./self/root//etc/shadow"), ["/etc/shadow"]);
        assert_eq!(
            read("/proc/self/root/proc/self/root/etc/shadow"),
            ["/etc/shadow"]
        );
        assert_eq!(read("/proc/self/task/7/root/etc/x"), ["/etc/x"]);
        assert_eq!(read("/proc/self/task/7/environ"), ["/proc/self/environ"]);
        assert_eq!(read("/proc/thread-self/environ"), ["/proc/self/environ"]);
        assert_eq!(read("/proc/self/cwd/../../etc/passwd"), ["/etc/passwd"]);
        assert_eq!(read("/proc/self/cwd/a"), ["/w/a", "/srv/a"]);
        for plain in [
            "/proc/self/environ",
            "/etc/shadow",
            "/w/proc/self/root/x",
            "proc/self/root/x",
        ] {
            assert!(read(plain).is_empty(), "{plain}");
        }
    }
}
