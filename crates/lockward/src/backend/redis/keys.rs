//! Where a name lives in Redis.
//!
//! For a name `N` and the URL's prefix `P` (default `lockward:`):
//!
//! | key | holds | expires |
//! | --- | --- | --- |
//! | `P` + esc(N) | the holder's owner id (32 hex digits) | with the lease (`PX`) |
//! | `P` + esc(N) + `:fence` | the last fencing token issued for N | never |
//! | `P` + esc(N) + `:released` | pub/sub channel: a release publishes the owner next in line | — |
//! | `P` + esc(N) + `:released:` + owner | pub/sub channel of one waiter: its turn | — |
//! | `P` + esc(N) + `:queue` | the line of waiters: owners by the order they joined (a sorted set) | when the last waiter leaves |
//! | `P` + esc(N) + `:places` | each waiter's place lease: owners by expiry, server ms (a sorted set) | when the last waiter leaves |
//! | `P` + esc(N) + `:holder` | the holder's label (its identity in an election), when it gave one | with the lease |
//! | `P` + esc(N) + `:readers` | the readers of read-write lock N: owners by lease expiry, server ms (a sorted set) | with its last reader |
//! | `P` + esc(K) + `:record` | a recipe's record K (the cron ledger) | with the record's TTL |
//! | `P` + esc(K) + `:versioned` | a versioned record K: a hash of version `v` and data `d` | with the record's TTL |
//! | `P` + esc(N) + `:sem:…` | semaphore N's holders, permits taken and fence (see `permits.rs`) | when the last holder leaves (the fence never) |
//! | `P` + `:w:` + esc(K) (and its `:fence`, …) | Redlock only: the write lock of versioned record K | with the write |
//!
//! On a Redis Cluster, esc(N) is wrapped in a hash tag, `P{esc(N)}…`, so
//! the keys of a name (its line too) live in one slot and each script touches one
//! node.
//!
//! esc() percent-encodes `%`, `:`, `{`, `}`, `*`, `?`, `[`, `]` and `\`, so an
//! escaped name never contains `:`: no name's lock key can equal another
//! name's fence key or channel, users cannot inject cluster hash tags, and
//! `SCAN` patterns built from a prefix match literally. Names without those
//! characters are stored as they are, so a client that writes `SET P+N
//! token NX PX ttl` (redis-py's `Lock`, redsync) and lockward exclude each
//! other on the same key.

use crate::name::Name;

/// Characters that would break the key layout or a SCAN pattern.
const RESERVED: &[char] = &['%', ':', '{', '}', '*', '?', '[', ']', '\\'];

/// The keys of one name.
#[derive(Debug, Clone)]
pub struct Keys {
    /// Holds the owner id while the lock is held.
    pub lock: String,
    /// The last fencing token issued; never expires.
    pub fence: String,
    /// Published on release.
    pub channel: String,
    /// The holder's label, beside the lock key (which holds only the owner,
    /// as other clients expect).
    pub holder: String,
    /// The line of waiters, by the order they joined.
    pub queue: String,
    /// The waiters' place leases.
    pub places: String,
    /// The readers of the name as a read-write lock, by lease expiry.
    pub readers: String,
}

/// Escapes a name (or a name prefix) for use in a key.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if RESERVED.contains(&c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The name whose lock key is `key` (after the prefix), or `None` when it
/// is another key of ours (a fence key, say) or not ours at all.
pub fn name_of(key: &str, cluster: bool) -> Option<String> {
    let escaped = if cluster {
        key.strip_prefix('{')?.strip_suffix('}')?
    } else {
        key
    };
    unescape(escaped)
}

/// Reverses [`escape`]; `None` when `text` is not an escaped name.
pub fn unescape(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b':' => return None,
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Builds every key of `name` under `prefix`; `cluster` adds the hash tag.
pub fn keys(prefix: &str, name: &Name, cluster: bool) -> Keys {
    let lock = if cluster {
        format!("{prefix}{{{}}}", escape(name.as_str()))
    } else {
        format!("{prefix}{}", escape(name.as_str()))
    };
    Keys {
        fence: format!("{lock}:fence"),
        channel: format!("{lock}:released"),
        holder: format!("{lock}:holder"),
        queue: format!("{lock}:queue"),
        places: format!("{lock}:places"),
        readers: format!("{lock}{READERS_SUFFIX}"),
        lock,
    }
}

/// What follows a name's lock key on its readers' key.
pub const READERS_SUFFIX: &str = ":readers";

/// The turn channel of waiter `owner` (hex) on the name of `keys`.
pub fn turn_channel(keys: &Keys, owner: &str) -> String {
    format!("{}:{owner}", keys.channel)
}

/// The key of record `key`.
pub fn record_key(prefix: &str, key: &Name, cluster: bool) -> String {
    format!("{}:record", keys(prefix, key, cluster).lock)
}

/// The key of versioned record `key`.
pub fn versioned_key(prefix: &str, key: &Name, cluster: bool) -> String {
    format!("{}:versioned", keys(prefix, key, cluster).lock)
}

/// Redlock's write lock of versioned record `key`: a lock in a key space of
/// its own (`P:w:…`). An escaped name never holds `:`, so no user lock can
/// share these keys, and [`name_of`] keeps them out of `list`.
pub fn write_lock_keys(prefix: &str, key: &Name) -> Keys {
    keys(&format!("{prefix}:w:"), key, false)
}

/// The record key a SCAN found, back to the record's own key.
pub fn record_of(key_after_prefix: &str, cluster: bool) -> Option<String> {
    name_of(key_after_prefix.strip_suffix(":record")?, cluster)
}

/// A SCAN pattern matching the lock keys of names starting with `prefix`
/// (and their fence keys and channels, which [`name_of`] then rejects).
pub fn scan_pattern(key_prefix: &str, name_prefix: &str, cluster: bool) -> String {
    let mut pattern = String::new();
    for c in key_prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    if cluster {
        // The hash tag's brace is a literal, not a pattern character.
        pattern.push('{');
    }
    pattern.push_str(&escape(name_prefix));
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_cannot_collide() {
        let plain = keys("lockward:", &Name::new("orders").unwrap(), false);
        assert_eq!(plain.lock, "lockward:orders");
        assert_eq!(plain.fence, "lockward:orders:fence");
        let tricky = keys("lockward:", &Name::new("orders:fence").unwrap(), false);
        assert_eq!(tricky.lock, "lockward:orders%3Afence");
        assert_ne!(tricky.lock, plain.fence);
        assert_eq!(
            keys("p:", &Name::new("{tag}*").unwrap(), false).lock,
            "p:%7Btag%7D%2A"
        );
    }

    #[test]
    fn unescape_round_trips_and_rejects_other_keys() {
        for name in ["a", "x:y", "100%", "{h}", "é/ü [1]"] {
            assert_eq!(unescape(&escape(name)).as_deref(), Some(name));
        }
        assert_eq!(unescape("orders:fence"), None);
        assert_eq!(scan_pattern("p*:", "a:", false), "p\\*:a%3A*");
        assert_eq!(scan_pattern("p:", "a", true), "p:{a*");
    }
}
