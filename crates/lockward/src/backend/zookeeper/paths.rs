//! Where a name lives in ZooKeeper: the layout of Curator's
//! `InterProcessMutex`.
//!
//! The lock on name `N` is the node `ROOT/esc(N)` (ROOT is
//! `CHROOT/lockward`); each contender is an ephemeral sequential child
//! `_c_<uuid>-lock-<10-digit sequence>`, and the holder is the child with
//! the lowest sequence. A Curator client given the lock path `ROOT/N`
//! builds the same children, so the two exclude each other. The uuid
//! (Curator's "protection") lets a client whose create reply was lost find
//! its node again.
//!
//! A read-write lock on `N` uses the same node with the children of
//! Curator's `InterProcessReadWriteLock`: `_c_<uuid>-__WRIT__<sequence>` for
//! a writer (it holds when it is first in line) and
//! `_c_<uuid>-__READ__<sequence>` for a reader (it holds when no other kind
//! of node is ahead of it).
//!
//! esc() percent-encodes `%`, `/`, the characters ZooKeeper refuses in a
//! path (U+E000–U+F8FF, U+FFF0–U+FFFF) and the names `.` and `..`, so a
//! name is always exactly one path segment under ROOT.
//!
//! Records (a recipe's data) live under `ROOT/%records`: `%r` is not an
//! escape, so no name maps there.

use std::fmt::Write as _;

use crate::backend::Kind;
use crate::name::Name;

/// The node that holds every record.
pub const RECORDS: &str = "%records";
/// The node that holds every versioned record.
pub const VERSIONED: &str = "%versioned";
/// A node lockward writes to read the server's clock (its `mtime`).
pub const CLOCK: &str = "%clock";

/// The `-lock-` part Curator's mutex puts before the sequence.
const LOCK_MARKER: &str = "-lock-";
/// What Curator's read-write lock puts before a writer's sequence.
const WRITER_MARKER: &str = "-__WRIT__";
/// What Curator's read-write lock puts before a reader's sequence.
const READER_MARKER: &str = "-__READ__";
/// Curator's protected-mode prefix.
const PROTECTED: &str = "_c_";

/// Percent-encodes what could not be one path segment.
pub fn escape(text: &str) -> String {
    if text == "." || text == ".." {
        return text.replace('.', "%2E");
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let refused = matches!(c, '\u{E000}'..='\u{F8FF}' | '\u{FFF0}'..='\u{FFFF}');
        if c == '%' || c == '/' || refused {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Reverses [`escape`]; `None` for a segment it could not have produced.
pub fn unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `CHROOT/lockward`.
pub fn root(chroot: &str) -> String {
    format!("{}/lockward", chroot.trim_end_matches('/'))
}

/// The lock node of `name`.
pub fn lock_path(root: &str, name: &Name) -> String {
    format!("{root}/{}", escape(name.as_str()))
}

fn marker(kind: Kind) -> &'static str {
    match kind {
        // A semaphore's holders are lease nodes (see `semaphore_paths`),
        // never contenders.
        Kind::Mutex | Kind::Permits { .. } => LOCK_MARKER,
        Kind::Writer => WRITER_MARKER,
        Kind::Reader => READER_MARKER,
    }
}

/// The path to create (sequential) for a contender with this uuid.
pub fn contender_prefix(lock_path: &str, uuid: &str, kind: Kind) -> String {
    format!("{lock_path}/{PROTECTED}{uuid}{}", marker(kind))
}

/// The paths of semaphore `name` in the layout of Curator's
/// `InterProcessSemaphoreV2` on `ROOT/esc(N)`: its internal lock
/// (`…/locks`, an `InterProcessMutex`) and its leases (`…/leases`, a node
/// per permit).
pub fn semaphore_paths(root: &str, name: &Name) -> (String, String) {
    let base = lock_path(root, name);
    (format!("{base}/locks"), format!("{base}/leases"))
}

/// The path prefix of one holder's lease nodes under `leases` (the server
/// appends the sequence), as Curator's protected mode names them.
pub fn lease_prefix(leases: &str, uuid: &str) -> String {
    format!("{leases}/{PROTECTED}{uuid}-lease-")
}

/// A contender's node name from its uuid and the sequence the server gave.
pub fn contender_name(uuid: &str, sequence: i64, kind: Kind) -> String {
    format!("{PROTECTED}{uuid}{}{sequence:010}", marker(kind))
}

/// Whether child `child` is the node of the contender with `uuid`.
pub fn is_ours(child: &str, uuid: &str) -> bool {
    child
        .strip_prefix(PROTECTED)
        .and_then(|rest| rest.strip_prefix(uuid))
        .is_some_and(|rest| {
            [LOCK_MARKER, WRITER_MARKER, READER_MARKER]
                .iter()
                .any(|m| rest.starts_with(m))
        })
}

/// Whether a contender node is a reader's (shares the lock with readers).
pub fn is_reader(child: &str) -> bool {
    child.contains(READER_MARKER)
}

/// The sequence of a contender node: the digits after its last `-lock-`
/// (Curator), or its last ten characters (other recipes, such as kazoo's
/// `__lock__`). `None` for a child that is not a contender.
pub fn sequence_of(child: &str) -> Option<i64> {
    let digits = match child.rfind(LOCK_MARKER) {
        Some(at) => &child[at + LOCK_MARKER.len()..],
        None => child.get(child.len().checked_sub(10)?..)?,
    };
    if digits.len() < 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The contenders among `children`, in line order (lowest sequence first).
pub fn in_line(children: Vec<String>) -> Vec<String> {
    let mut line: Vec<(i64, String)> = children
        .into_iter()
        .filter_map(|c| sequence_of(&c).map(|s| (s, c)))
        .collect();
    line.sort();
    line.into_iter().map(|(_, c)| c).collect()
}

/// A record's node.
pub fn record_path(root: &str, key: &str) -> String {
    format!("{root}/{RECORDS}/{}", escape(key))
}

/// A versioned record's node.
pub fn versioned_path(root: &str, key: &str) -> String {
    format!("{root}/{VERSIONED}/{}", escape(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curator_layout() {
        let lockward = root("/");
        assert_eq!(lockward, "/lockward");
        let lock = lock_path(&lockward, &Name::new("orders").unwrap());
        assert_eq!(lock, "/lockward/orders");
        let uuid = "5b1c0f5e-0d0c-4a43-9d5b-1e2f3a4b5c6d";
        assert_eq!(
            contender_prefix(&lock, uuid, Kind::Mutex),
            format!("/lockward/orders/_c_{uuid}-lock-")
        );
        let name = contender_name(uuid, 42, Kind::Mutex);
        assert_eq!(name, format!("_c_{uuid}-lock-0000000042"));
        assert!(is_ours(&name, uuid));
        assert!(!is_ours(&name, "5b1c0f5e"));
        assert_eq!(sequence_of(&name), Some(42));
        assert_eq!(sequence_of("f00__lock__0000000007"), Some(7));
        assert_eq!(sequence_of("leases"), None);
        let line = in_line(vec![
            contender_name("b", 9, Kind::Mutex),
            "junk".into(),
            contender_name("a", 10, Kind::Mutex),
            "x__lock__0000000003".into(),
        ]);
        assert_eq!(
            line,
            vec![
                "x__lock__0000000003",
                "_c_b-lock-0000000009",
                "_c_a-lock-0000000010"
            ]
        );
        assert_eq!(root("/app/"), "/app/lockward");
    }

    #[test]
    fn curator_read_write_layout() {
        let uuid = "5b1c0f5e-0d0c-4a43-9d5b-1e2f3a4b5c6d";
        let reader = contender_name(uuid, 7, Kind::Reader);
        let writer = contender_name(uuid, 8, Kind::Writer);
        assert_eq!(reader, format!("_c_{uuid}-__READ__0000000007"));
        assert_eq!(writer, format!("_c_{uuid}-__WRIT__0000000008"));
        assert!(is_reader(&reader) && !is_reader(&writer));
        assert!(is_ours(&reader, uuid) && is_ours(&writer, uuid));
        assert_eq!(sequence_of(&reader), Some(7));
        assert_eq!(
            in_line(vec![writer.clone(), reader.clone()]),
            vec![reader, writer]
        );
    }

    #[test]
    fn names_stay_one_segment() {
        for name in ["a/b", "..", ".", "100%", "a\u{E000}b", "über", "%2F"] {
            let esc = escape(name);
            assert!(!esc.contains('/'), "{esc}");
            assert!(esc != "." && esc != "..", "{esc}");
            assert!(!esc.chars().any(|c| matches!(c, '\u{E000}'..='\u{F8FF}')));
            assert_eq!(unescape(&esc).as_deref(), Some(name));
        }
        assert_eq!(escape("orders/42"), "orders%2F42");
        assert_eq!(unescape(RECORDS), None);
        assert_eq!(unescape(CLOCK), None);
        assert_eq!(unescape(VERSIONED), None);
    }
}
