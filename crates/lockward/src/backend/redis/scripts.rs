//! The compiled scripts of the Redis backend's steps, hashed once per
//! store, built from the Lua files (see `lua.rs`; each script's keys,
//! arguments and replies are written at the top of its last piece).

use redis::Script;

use super::lua::script;

/// The lock's scripts.
pub(crate) struct Scripts {
    /// `acquire`: grant, or join (or renew a place in) the name's line.
    pub acquire: Script,
    /// `hold_back`: a forced unlock's hand-over to a placeholder.
    pub hold_back: Script,
    /// `inspect`: holder, expiry, fence, label, waiters.
    pub inspect: Script,
    /// `leave`: out of the line, telling the next when the lock is free.
    pub leave: Script,
    /// `write_versioned`: a record's compare-and-set.
    pub write_versioned: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: script("acquire"),
            hold_back: script("hold_back"),
            inspect: script("inspect"),
            leave: script("leave"),
            write_versioned: script("write_versioned"),
        }
    }
}

/// The scripts of the read side and of the steps readers and writers
/// share (how they share a name is described in `readers.rs`).
pub(crate) struct ReaderScripts {
    /// `reader_read`: admit a reader, or line it up.
    pub read: Script,
    /// `reader_extend`: renew a writer's or a reader's lease.
    pub extend: Script,
    /// `reader_release`: a writer's release, falling through to a reader's.
    pub release: Script,
    /// `reader_list`: the live readers.
    pub list: Script,
}

impl ReaderScripts {
    pub(crate) fn new() -> Self {
        ReaderScripts {
            read: script("reader_read"),
            extend: script("reader_extend"),
            release: script("reader_release"),
            list: script("reader_list"),
        }
    }
}

/// The semaphore's scripts (the layout they keep is described in
/// `permits.rs`).
pub(crate) struct PermitScripts {
    pub(super) take: Script,
    pub(super) extend: Script,
    pub(super) release: Script,
    pub(super) held: Script,
    pub(super) list: Script,
}

impl PermitScripts {
    pub(crate) fn new() -> Self {
        PermitScripts {
            take: script("permit_take"),
            extend: script("permit_extend"),
            release: script("permit_release"),
            held: script("permit_held"),
            list: script("permit_list"),
        }
    }
}
