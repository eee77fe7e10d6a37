//! How lock names and record keys become Kubernetes object names, which
//! must be DNS-1123 subdomains (lowercase letters, digits, `-` and `.`, at
//! most 253 characters), and back.
//!
//! The object name is the URL's prefix followed by the name, in which a
//! lowercase letter or digit stays itself, a `-` or `.` between two of
//! them stays itself, and every other byte of the UTF-8 name becomes `--`
//! and two lowercase hex digits: `orders/42` is `orders--2f42`,
//! `Payments` is `--50ayments`. A literal `-` is never followed by
//! another, so `--` always starts an escape: distinct names give distinct
//! object names, and each reads back to exactly one name. Names that are
//! already DNS names (`my-controller`, `app.example.com`) keep their
//! spelling, so with an empty prefix lockward addresses a Lease another
//! program named.

use crate::error::{Error, Result};

/// The longest Kubernetes object name.
pub const MAX_OBJECT_NAME: usize = 253;

/// The object name of `name` under `prefix`: [`Error::InvalidArgument`]
/// when it would not be a valid object name (too long, or, with an empty
/// prefix, a name that starts with something other than a lowercase letter
/// or digit).
pub fn object_name(prefix: &str, name: &str) -> Result<String> {
    let mut out = String::with_capacity(prefix.len() + name.len());
    out.push_str(prefix);
    let bytes = name.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let next_plain = bytes.get(i + 1).is_some_and(|n| is_plain(*n));
        let kept = is_plain(b) || ((b == b'-' || b == b'.') && i > 0 && next_plain);
        if kept {
            out.push(b as char);
        } else {
            out.push_str(&format!("--{b:02x}"));
        }
    }
    if out.starts_with('-') {
        return Err(Error::invalid(
            "name",
            format!(
                "{name:?} cannot be a Kubernetes object name as it is: with an empty prefix a name must start with a lowercase letter or digit"
            ),
        ));
    }
    if out.len() > MAX_OBJECT_NAME {
        return Err(Error::invalid(
            "name",
            format!(
                "{name:?} makes a Kubernetes object name of {} characters; the limit is {MAX_OBJECT_NAME} (escaped characters take 4 each)",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// The name whose object name under `prefix` is `object`, or `None` when
/// `object` is not one lockward would write (another prefix, a broken
/// escape, a spelling [`object_name`] would not produce).
pub fn name_of(prefix: &str, object: &str) -> Option<String> {
    let body = object.strip_prefix(prefix)?.as_bytes();
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'-' && body.get(i + 1) == Some(&b'-') {
            let hex = std::str::from_utf8(body.get(i + 2..i + 4)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 4;
        } else {
            out.push(body[i]);
            i += 1;
        }
    }
    let name = String::from_utf8(out).ok()?;
    // Only the canonical spelling reads back, so no two objects share a name.
    (object_name(prefix, &name).ok()? == object).then_some(name)
}

/// A lowercase letter or digit: kept as is anywhere.
fn is_plain(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// A DNS-1123 label, as namespaces are: 1 to 63 lowercase letters, digits
/// and `-`, starting and ending with a letter or digit.
pub fn is_dns_label(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && is_plain(b[0])
        && is_plain(b[b.len() - 1])
        && b.iter().all(|c| is_plain(*c) || *c == b'-')
}

/// Checks a `prefix=`: empty, or the start of a DNS-1123 subdomain that
/// ends with a letter, a digit or `-`, so any escaped name can follow it.
pub fn check_prefix(prefix: &str) -> Result<()> {
    let b = prefix.as_bytes();
    let ok = b.is_empty()
        || (b.len() <= 200
            && is_plain(b[0])
            && (is_plain(b[b.len() - 1]) || b[b.len() - 1] == b'-')
            && b.iter().all(|c| is_plain(*c) || *c == b'-' || *c == b'.')
            && !prefix.contains("..")
            && !prefix.contains(".-")
            && !prefix.contains("-."));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "url",
            "a k8s:// prefix is empty, or up to 200 lowercase letters, digits, '-' and '.' that start with a letter or digit, end with a letter, digit or '-', and have no '.' beside another '.' or a '-'",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_subdomain(text: &str) -> bool {
        text.len() <= MAX_OBJECT_NAME
            && text.split('.').all(|label| {
                let b = label.as_bytes();
                !b.is_empty()
                    && is_plain(b[0])
                    && is_plain(b[b.len() - 1])
                    && b.iter().all(|c| is_plain(*c) || *c == b'-')
            })
    }

    #[test]
    fn spellings() {
        let p = "lockward-";
        assert_eq!(
            object_name(p, "orders/42").unwrap(),
            "lockward-orders--2f42"
        );
        assert_eq!(object_name(p, "Pay").unwrap(), "lockward---50ay");
        assert_eq!(object_name("", "my-controller").unwrap(), "my-controller");
        assert_eq!(
            object_name("", "app.example.com").unwrap(),
            "app.example.com"
        );
        assert_eq!(object_name(p, "a--b").unwrap(), "lockward-a--2d-b");
        assert_eq!(object_name(p, "x-").unwrap(), "lockward-x--2d");
        assert_eq!(object_name(p, "é").unwrap(), "lockward---c3--a9");
        assert!(object_name("", "-x").is_err());
        assert!(object_name("", "Orders").is_err());
        assert!(object_name(p, &"/".repeat(70)).is_err());
    }

    #[test]
    fn round_trips_and_never_collides() {
        let names = [
            "orders/42",
            "a-b",
            "a--b",
            "a---b",
            "a.b",
            "a..b",
            "a.-b",
            "-",
            ".",
            "x-",
            "x.",
            "A",
            "a b",
            "é/ü",
            "cron/job/running",
            "a-2d",
            "--",
            "my.app-1",
            "0",
        ];
        let mut seen = std::collections::HashSet::new();
        for prefix in ["lockward-", "x", "team.a-"] {
            for name in names {
                let object = object_name(prefix, name).unwrap();
                assert!(is_subdomain(&object), "{object:?} from {name:?}");
                assert_eq!(
                    name_of(prefix, &object).as_deref(),
                    Some(name),
                    "{object:?}"
                );
                assert!(seen.insert((prefix, object)), "{name:?} collides");
            }
        }
        // Spellings lockward would not write are not read back as names.
        assert_eq!(name_of("lockward-", "lockward-a--2eb"), None);
        assert_eq!(name_of("lockward-", "lockward-a--zz"), None);
        assert_eq!(name_of("lockward-", "other-a"), None);
        assert_eq!(
            name_of("", "kube-scheduler").as_deref(),
            Some("kube-scheduler")
        );
    }

    #[test]
    fn prefixes_and_namespaces() {
        for ok in ["", "lockward-", "team.a-", "x", "a1"] {
            assert!(check_prefix(ok).is_ok(), "{ok:?}");
        }
        for bad in ["-x", "X-", "a.", "a..b-", "a.-", "a_b", "é"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        assert!(is_dns_label("default"));
        assert!(is_dns_label("team-a1"));
        assert!(!is_dns_label("Team"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
