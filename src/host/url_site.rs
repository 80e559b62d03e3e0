//! Which site a URL-mode elicitation leads to, or why it is not put to
//! anyone: decided once for the terminal form, an answers file and a
//! gateway client alike (a URL whose text hides where it leads is
//! declined before any of them sees it).

use warden_core::display;

/// The site a URL elicitation leads to, as the person is to judge it: the
/// host in ASCII (a name in another script as its `xn--` form, so a
/// look-alike of a known name reads as what it is), with a warning for
/// such a name. `Err` for a URL that is not shown at all: one that is not
/// `https`/`http` (`javascript:`, `file:`, `data:` lead nowhere a person
/// can judge), has no host, or carries a user name or password before
/// `@` (`https://bank.example@evil.example/` leads to `evil.example`, and
/// the text before `@` exists only to look like the site).
pub fn url_site(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("it is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "https" | "http") {
        return Err(format!(
            "its scheme `{}` is not https or http",
            display::line(parsed.scheme())
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "it has a user name before `@`, which makes the site it leads to look like another"
                .into(),
        );
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| "it names no site".to_string())?;
    let mut site = display::line(host).into_owned();
    if host.split('.').any(|label| label.starts_with("xn--")) {
        site.push_str(
            " (a name with letters outside ASCII, shown as its xn-- form: it may imitate a \
             name you know)",
        );
    }
    if parsed.scheme() == "http" {
        site.push_str(" (plain http: not encrypted)");
    }
    Ok(site)
}
