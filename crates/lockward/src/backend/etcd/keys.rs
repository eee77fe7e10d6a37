//! Where a name lives in etcd: the layout of Go's `concurrency.Mutex`.
//!
//! A lock on name `N` under prefix `P` (default `lockward/`) is the set of
//! keys `P` + esc(N) + `/` + lease id in lowercase hex, one per contender;
//! the holder is the key with the lowest create revision. `etcdctl lock
//! P+N` builds the same keys, so the two exclude each other.
//!
//! The readers of a read-write lock on `N` are keys `P` + esc(N) + U+0001 +
//! `readers/` + lease id, one per reader, beside the name's line: a reader
//! holds while no writer's key (under `P` + esc(N) + `/`) is older than its
//! own; a writer holds when first in its line and no reader's key is older
//! than its own. `etcdctl lock` sees only the writers' line.
//!
//! esc() percent-encodes only `%` and `/`: with a raw `/`, the lock `a`
//! would see the keys of lock `a/b` as contenders. Names without those two
//! characters are stored as they are.

use crate::name::Name;

/// Percent-encodes `%` and `/`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
    out
}

/// Reverses [`escape`].
pub fn unescape(text: &str) -> Option<String> {
    Some(text.replace("%2F", "/").replace("%25", "%"))
}

/// The key prefix of a name's contenders: `P` + esc(N) + `/`.
pub fn lock_prefix(prefix: &str, name: &Name) -> String {
    format!("{prefix}{}/", escape(name.as_str()))
}

/// The key prefix of a name's readers: `P` + esc(N) + U+0001 + `readers/`
/// (no name holds a control character, so no lock's keys start there).
pub fn readers_prefix(prefix: &str, name: &Name) -> String {
    format!("{prefix}{}{READERS}", escape(name.as_str()))
}

/// What follows a name on its readers' keys, before the lease id.
const READERS: &str = "\u{1}readers/";

/// The name of a reader's key, if `key` is one under `prefix`.
pub fn reader_name_of(prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?;
    let (escaped, lease) = rest.rsplit_once(READERS)?;
    if escaped.contains('/') || lease.is_empty() || !lease.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    unescape(escaped)
}

/// One contender's key.
pub fn contender_key(lock_prefix: &str, lease: i64) -> String {
    format!("{lock_prefix}{lease:x}")
}

/// The name of a contender key, if `key` is one under `prefix`.
pub fn name_of(prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?;
    let (escaped, lease) = rest.rsplit_once('/')?;
    if escaped.contains('/') || lease.is_empty() || !lease.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    unescape(escaped)
}

/// Records (a recipe's data, such as the cron ledger) live under
/// `P` + U+0001 + `records/`: no name can contain a control character, so
/// no lock's keys can start there.
pub fn record_key(prefix: &str, key: &str) -> String {
    format!("{prefix}\u{1}records/{}", escape(key))
}

/// Versioned records live under `P` + U+0001 + `versioned/`, apart from
/// locks and plain records.
pub fn versioned_key(prefix: &str, key: &str) -> String {
    format!("{prefix}\u{1}versioned/{}", escape(key))
}

/// The smallest key greater than every key starting with `prefix` (etcd's
/// range end for a prefix).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_layout_and_escaping() {
        let p = lock_prefix("lockward/", &Name::new("orders").unwrap());
        assert_eq!(p, "lockward/orders/");
        assert_eq!(
            contender_key(&p, 0x694d7a0b1c3e2f11),
            "lockward/orders/694d7a0b1c3e2f11"
        );
        let nested = lock_prefix("lockward/", &Name::new("a/b").unwrap());
        assert_eq!(nested, "lockward/a%2Fb/");
        assert!(!nested.starts_with(&lock_prefix("lockward/", &Name::new("a").unwrap())));
        assert_eq!(
            name_of("lockward/", "lockward/a%2Fb/1f").as_deref(),
            Some("a/b")
        );
        assert_eq!(name_of("lockward/", "lockward/x/y/1f"), None);
        assert_eq!(prefix_end("ab"), b"ac".to_vec());
    }
}
