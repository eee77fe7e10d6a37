//! The one error type of lockward.

use std::time::Duration;

/// Why a held lock stopped being ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The local deadline passed before a renewal succeeded.
    Expired,
    /// The store says another owner holds the lock now, or nobody does.
    TakenOver,
    /// The connection or session that held the lock ended (ephemeral backends).
    SessionEnded,
    /// An operator ended the lease from elsewhere
    /// ([`Store::force_unlock`](crate::Store::force_unlock), `lockward unlock --force`).
    ForcedUnlock,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "its deadline passed before it could be renewed",
            LostReason::TakenOver => "the store no longer records us as the holder",
            LostReason::SessionEnded => "the session that held it ended",
            LostReason::ForcedUnlock => "an operator ended its lease (a forced unlock)",
        })
    }
}

/// Every failure lockward reports. Match on the variant; the message says
/// what was wrong and, where it can, what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `try_acquire` found the lock held by someone else.
    #[error("lock {name:?} is held by another owner")]
    Busy {
        /// The lock's name.
        name: String,
    },
    /// A semaphore's `try_acquire` found too few permits free (or as many
    /// holders as it can list).
    #[error("semaphore {name:?} cannot grant that now: {why}")]
    NoPermits {
        /// The semaphore's name.
        name: String,
        /// How many were wanted and how many are free.
        why: String,
    },
    /// `acquire` waited as long as it was allowed to.
    #[error("gave up waiting for lock {name:?} after {waited:?}")]
    TimedOut {
        /// The lock's name.
        name: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// A lock we held is no longer ours; work done under it must stop.
    #[error("lock {name:?} was lost: {reason}")]
    Lost {
        /// The lock's name.
        name: String,
        /// Why it was lost.
        reason: LostReason,
    },
    /// A release or extend came from an owner that does not hold the lock.
    #[error("lock {name:?} is not held by this owner")]
    NotOwner {
        /// The lock's name.
        name: String,
    },
    /// An argument was rejected before anything was sent to the store.
    #[error("invalid {what}: {why}")]
    InvalidArgument {
        /// Which argument: `name`, `ttl`, `url`, …
        what: &'static str,
        /// What was wrong with it.
        why: String,
    },
    /// A compare-and-set met a conflicting write on every one of its tries
    /// (an optimistic update, a rate limit under heavy contention): retry
    /// later, or allow more tries.
    #[error("{key:?} changed under every one of {tries} tries")]
    Contended {
        /// The record.
        key: String,
        /// How many tries were made.
        tries: u32,
    },
    /// The store could not be reached or refused to work.
    /// `address` never contains a password.
    #[error("store {address} is unavailable: {message}")]
    Unavailable {
        /// The store's address, with any password redacted.
        address: String,
        /// What went wrong, and what to do when it is known.
        message: String,
        /// The driver's error behind it, where there is one.
        #[source]
        cause: Option<Cause>,
    },
    /// The store refused this client: its credentials (a wrong or expired
    /// password or token) or its permissions (a missing grant). Waiting
    /// does not help, so no wait retries it; the message names what was
    /// refused. `address` never contains a password.
    #[error("store {address} refused this client: {message}")]
    Denied {
        /// The store's address, with any password redacted.
        address: String,
        /// What was refused, and what to grant.
        message: String,
        /// The driver's error behind it, where there is one.
        #[source]
        cause: Option<Cause>,
    },
    /// The store answered something lockward did not expect.
    #[error("unexpected reply from store {address}: {message}")]
    Protocol {
        /// The store's address, with any password redacted.
        address: String,
        /// What was unexpected.
        message: String,
        /// The driver's error behind it, where there is one.
        #[source]
        cause: Option<Cause>,
    },
    /// A fenced resource refused a write: a newer holder already wrote
    /// with a larger fence. The writer's lock is gone; it must stop.
    #[error("write to {key:?} with fence {fence} refused: fence {current} was accepted already")]
    Stale {
        /// The resource key.
        key: String,
        /// The refused write's fence.
        fence: u64,
        /// The fence of the last accepted write.
        current: u64,
    },
    /// The store cannot do what was asked (it declares so in its
    /// [`Capabilities`](crate::Capabilities)).
    #[error("{what} is not possible on {address}: {why}")]
    NotSupported {
        /// The store, with any password redacted.
        address: String,
        /// What was asked.
        what: &'static str,
        /// Why this store cannot, and what to use instead.
        why: &'static str,
    },
    /// The store URL names a backend (or its TLS) that this build of
    /// lockward does not include: a cargo feature was left out. Not to be
    /// confused with [`Error::NotSupported`], which a store that is there
    /// gives for what it cannot do.
    #[error("backend {scheme:?} is not available in this build: {why}")]
    NotBuilt {
        /// The URL scheme.
        scheme: String,
        /// What to do about it (usually: enable a cargo feature).
        why: String,
    },
}

impl Error {
    pub(crate) fn invalid(what: &'static str, why: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what,
            why: why.into(),
        }
    }

    /// Every kind of error, in the enum's order: what [`kind`](Self::kind)
    /// returns. The daemon sends these, and the Go and Python clients have
    /// one error (sentinel, class) for each; their tests check them
    /// against this list.
    pub const KINDS: [&'static str; 13] = [
        "Busy",
        "NoPermits",
        "TimedOut",
        "Lost",
        "NotOwner",
        "InvalidArgument",
        "Contended",
        "Unavailable",
        "Denied",
        "Protocol",
        "Stale",
        "NotSupported",
        "NotBuilt",
    ];

    /// The variant's name (`"Busy"`, `"TimedOut"`, …): how the daemon's
    /// API and the bindings for other languages name the kind of error.
    ///
    /// ```
    /// let e = lockward::Error::Busy { name: "x".into() };
    /// assert_eq!(e.kind(), "Busy");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Busy { .. } => "Busy",
            Error::NoPermits { .. } => "NoPermits",
            Error::TimedOut { .. } => "TimedOut",
            Error::Lost { .. } => "Lost",
            Error::NotOwner { .. } => "NotOwner",
            Error::InvalidArgument { .. } => "InvalidArgument",
            Error::Contended { .. } => "Contended",
            Error::Unavailable { .. } => "Unavailable",
            Error::Denied { .. } => "Denied",
            Error::Protocol { .. } => "Protocol",
            Error::Stale { .. } => "Stale",
            Error::NotSupported { .. } => "NotSupported",
            Error::NotBuilt { .. } => "NotBuilt",
        }
    }

    /// True for [`Error::Busy`] and [`Error::TimedOut`]: the lock exists and
    /// is held by someone else; trying later may succeed.
    pub fn is_contended(&self) -> bool {
        matches!(self, Error::Busy { .. } | Error::TimedOut { .. })
    }
}

/// A store driver's error behind one of lockward's, kept as
/// [`source()`](std::error::Error::source): its message and its own
/// causes, in order. Kept as text, because the drivers' errors are not all
/// owned or cloneable where lockward maps them; no driver lockward uses
/// puts a password in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    message: String,
    source: Option<Box<Cause>>,
}

impl Cause {
    /// The cause `error`, with its chain of sources.
    // Every store but the in-memory one uses it; a build with none, not.
    #[allow(dead_code)]
    pub(crate) fn of(error: &(dyn std::error::Error + 'static)) -> Cause {
        Cause {
            message: error.to_string(),
            source: error.source().map(|s| Box::new(Cause::of(s))),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// `Result` with lockward's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::{Cause, Error};

    /// A driver's error with a cause of its own.
    #[derive(Debug)]
    struct Driver(std::io::Error);

    impl std::fmt::Display for Driver {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot connect")
        }
    }

    impl std::error::Error for Driver {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_driver_error_is_kept_as_the_source_with_its_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let wrapped = Driver(io);
        let e = Error::Unavailable {
            address: "redis://h:1".into(),
            message: "cannot connect".into(),
            cause: Some(Cause::of(&wrapped)),
        };
        let cause = e.source().expect("a source");
        assert_eq!(cause.to_string(), wrapped.to_string());
        assert_eq!(
            cause.source().map(|c| c.to_string()).as_deref(),
            Some("refused")
        );
    }

    /// The kinds `kind()` returns, read from its match (which the compiler
    /// keeps exhaustive), in order.
    fn kinds_in_the_match() -> Vec<&'static str> {
        let source = include_str!("error.rs");
        let body = source
            .split("pub fn kind(&self)")
            .nth(1)
            .and_then(|rest| rest.split("\n    }\n").next())
            .expect("kind()'s body");
        body.lines()
            .filter_map(|l| l.split("=> \"").nth(1))
            .filter_map(|l| l.split('"').next())
            .collect()
    }

    #[test]
    fn the_list_of_kinds_is_every_kind_in_order() {
        assert_eq!(kinds_in_the_match(), Error::KINDS);
    }

    #[test]
    fn the_readme_names_every_kind() {
        let readme = include_str!("../../../README.md");
        let list = readme
            .split("Errors are one enum (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .expect("the README's list of error kinds");
        let named: Vec<&str> = list
            .split(',')
            .map(|k| k.trim().trim_matches('`'))
            .collect();
        assert_eq!(named, Error::KINDS);
    }
}
