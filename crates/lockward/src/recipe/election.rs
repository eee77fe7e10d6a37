//! Leader election with the timing of Kubernetes' client-go.
//!
//! A candidate campaigns by acquiring the lock `name` with its identity as
//! the holder label, a TTL of the *lease duration*, renewed every *retry
//! period*. The leader steps down (its [`Leadership::revoked`] fires) as soon
//! as it has failed to renew for the *renew deadline*, which is shorter than
//! the lease duration, so it has stopped before the store can give the lease
//! to another candidate. The *epoch* is the fencing token of the leader's
//! lease: send it with the leader's writes, and a deposed leader's late
//! writes are refused (see the `fence` module).
//!
//! On etcd the keys are those of `etcdctl elect NAME` (with the store's
//! prefix), so lockward candidates and etcdctl ones share one election.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::{Candidate, ElectionConfig};
//! let store = lockward::Store::memory();
//! let me = Candidate::new(store, "scheduler", "node-a", ElectionConfig::default())?;
//! let leadership = me.campaign().await?;
//! assert_eq!(me.leader().await?.as_deref(), Some("node-a"));
//! tokio::select! {
//!     _ = leadership.revoked() => { /* stop leading at once */ }
//!     _ = async { /* lead, fencing writes with leadership.epoch() */ } => {}
//! }
//! leadership.resign().await?; // the next candidate is woken, not left polling
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::{Duration, Instant};

use crate::error::{Error, LostReason, Result};
use crate::guard::Guard;
use crate::options::{LockOptions, Renewal};
use crate::store::Store;

/// How long an election stays listed for status views after a candidate
/// last campaigned in it.
const LISTED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// The record that lists election `name` for status views.
fn listing_key(name: &str) -> String {
    format!("election/{name}")
}

/// The elections a candidate campaigned in during the last 30 days, by
/// name, sorted: for status views. An election's leader is its lock's
/// holder ([`Candidate::leader`]).
///
/// Cancellation: dropping the future changes nothing.
pub async fn elections(store: &Store) -> Result<Vec<String>> {
    let prefix = listing_key("");
    Ok(store
        .records(&prefix)
        .await?
        .into_iter()
        .filter_map(|(key, _)| key.strip_prefix(&prefix).map(str::to_string))
        .collect())
}

/// Election timing, as in client-go's `LeaderElectionConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    /// How long the store keeps a leader's lease without renewal (15 s).
    pub lease_duration: Duration,
    /// How long a leader keeps leading while renewals fail (10 s); must be
    /// shorter than the lease duration.
    pub renew_deadline: Duration,
    /// How often the leader renews (2 s); must be shorter than the renew
    /// deadline.
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionConfig {
    /// Checks the ordering retry period < renew deadline < lease duration.
    pub fn validate(&self) -> Result<()> {
        crate::duration::check_ttl(self.lease_duration)?;
        if self.renew_deadline >= self.lease_duration {
            return Err(Error::invalid(
                "renew_deadline",
                format!(
                    "the renew deadline {:?} must be shorter than the lease duration {:?}, \
                     or a deposed leader could still act when the next one starts",
                    self.renew_deadline, self.lease_duration
                ),
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(Error::invalid(
                "retry_period",
                format!(
                    "the retry period {:?} must be above zero and shorter than the renew deadline {:?}",
                    self.retry_period, self.renew_deadline
                ),
            ));
        }
        Ok(())
    }
}

/// Why a leadership ended without a resign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// Renewals failed for the whole renew deadline.
    RenewDeadline,
    /// The store says the lease is gone or someone else holds it.
    Lost(LostReason),
}

/// One candidate for the leadership of `name`.
#[derive(Debug, Clone)]
pub struct Candidate {
    store: Store,
    name: String,
    identity: String,
    config: ElectionConfig,
    /// The caller renews the leadership's lease (see
    /// [`Candidate::renewed_by_caller`]).
    renewed_by_caller: bool,
}

impl Candidate {
    /// A candidate called `identity` (shown to observers as the leader).
    pub fn new(
        store: Store,
        name: impl Into<String>,
        identity: impl Into<String>,
        config: ElectionConfig,
    ) -> Result<Self> {
        config.validate()?;
        let candidate = Candidate {
            store,
            name: name.into(),
            identity: identity.into(),
            config,
            renewed_by_caller: false,
        };
        crate::name::Name::new(candidate.name.as_str())?;
        candidate.options().validate()?;
        Ok(candidate)
    }

    /// Leaves renewing the leadership to the caller, with
    /// [`Guard::extend`] every retry period on [`Leadership::guard`]: for a
    /// daemon that campaigns on behalf of a remote candidate, whose
    /// leadership must lapse when that candidate stops renewing.
    pub fn renewed_by_caller(mut self) -> Candidate {
        self.renewed_by_caller = true;
        self
    }

    fn options(&self) -> LockOptions {
        let renewal = if self.renewed_by_caller {
            Renewal::Off
        } else {
            Renewal::Every(self.config.retry_period)
        };
        LockOptions::new()
            .ttl(self.config.lease_duration)
            .renewal(renewal)
            .label(self.identity.clone())
    }

    /// Waits until elected. Drop the future to stop campaigning.
    ///
    /// Cancellation: dropping the future ends the campaign; a leadership
    /// granted at that moment is released, or runs out at its TTL.
    #[tracing::instrument(level = "debug", skip_all, fields(election = %self.name, identity = %self.identity))]
    pub async fn campaign(&self) -> Result<Leadership> {
        crate::metrics::not_leading(&self.name);
        self.list_for_status().await;
        let guard = self.store.acquire(&self.name, &self.options()).await?;
        Ok(self.leadership(guard))
    }

    /// Becomes leader only if nobody leads now.
    ///
    /// Cancellation: as for [`campaign`](Self::campaign).
    #[tracing::instrument(level = "debug", skip_all, fields(election = %self.name, identity = %self.identity))]
    pub async fn try_campaign(&self) -> Result<Leadership> {
        crate::metrics::not_leading(&self.name);
        let guard = self.store.try_acquire(&self.name, &self.options()).await?;
        // Only when elected: candidates may try often.
        self.list_for_status().await;
        Ok(self.leadership(guard))
    }

    /// Lists this election for [`elections`]; a store that cannot write
    /// the record only leaves the election unlisted.
    async fn list_for_status(&self) {
        let lease_ms = self.config.lease_duration.as_millis().to_string();
        let written = self
            .store
            .put_record(&listing_key(&self.name), &lease_ms, LISTED_FOR)
            .await;
        if let Err(e) = written {
            tracing::debug!(election = %self.name, error = %e, "cannot list the election for status");
        }
    }

    fn leadership(&self, guard: Guard) -> Leadership {
        crate::metrics::election(&self.name, "elected");
        tracing::info!(election = %self.name, identity = %self.identity, epoch = guard.fence(), "elected");
        Leadership {
            epoch: guard.fence(),
            guard,
            margin: self.config.lease_duration - self.config.renew_deadline,
            election: LeaderGauge(self.name.clone()),
        }
    }

    /// Waits until the leader differs from `last` and returns the new one
    /// (`None`: nobody leads). For observers that do not campaign. A
    /// release wakes it at once (pushed backends); an expiry or a new
    /// leader's election is seen within a retry period.
    ///
    /// Cancellation: cancel-safe; a read and a watch, nothing to undo.
    pub async fn next_leader_change(&self, last: Option<&str>) -> Result<Option<String>> {
        let name = crate::name::Name::new(self.name.as_str())?;
        let mut changes = self.store.backend().subscribe(&name).await?;
        loop {
            changes.mark_seen();
            let now = self.leader().await?;
            if now.as_deref() != last {
                return Ok(now);
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// The current leader's identity, if any.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn leader(&self) -> Result<Option<String>> {
        Ok(self
            .store
            .inspect(&self.name)
            .await?
            .map(|info| info.label.unwrap_or(info.owner)))
    }
}

/// This candidate leads, until it resigns or [`revoked`](Self::revoked)
/// fires.
#[derive(Debug)]
pub struct Leadership {
    guard: Guard,
    epoch: u64,
    /// lease duration − renew deadline: how long before the lease's local
    /// deadline the leader must stop.
    margin: Duration,
    /// The election's name, for metrics.
    election: LeaderGauge,
}

impl Leadership {
    /// The fencing token of this leadership's lease.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Resolves when this leadership ends without a resign: at the renew
    /// deadline after the last successful renewal, or when the store says
    /// the lease is gone. Never fires before the leadership began.
    ///
    /// Cancellation: cancel-safe; dropping the future misses nothing, a later
    /// call sees the revocation.
    pub async fn revoked(&self) -> Revoked {
        let how = self.revocation().wait().await;
        self.revoke(how)
    }

    /// A watch of this leadership's revocation that owns what it needs, for
    /// code that waits for it apart from the leadership (another task, a
    /// binding to another language).
    pub fn revocation(&self) -> Revocation {
        Revocation {
            lost: self.guard.lost_signal(),
            renewals: self.guard.lost_signal(),
            margin: self.margin,
        }
    }

    fn revoke(&self, how: Revoked) -> Revoked {
        crate::metrics::election(&self.election.0, "revoked");
        tracing::warn!(election = %self.election.0, epoch = self.epoch, revoked = ?how, "leadership revoked");
        how
    }

    /// Gives the leadership up at once; waiting candidates are woken.
    ///
    /// Cancellation: a resignation cut short leaves the leadership to run out
    /// at its TTL (no renewal runs any more).
    pub async fn resign(self) -> Result<()> {
        crate::metrics::election(&self.election.0, "resigned");
        tracing::info!(election = %self.election.0, epoch = self.epoch, "resigned");
        self.guard.release().await
    }

    /// The lease behind this leadership, for code that supervises it as a
    /// lock (the CLI's `elect` runs its command under it). The guard's
    /// deadline minus (lease duration − renew deadline) is the renew
    /// deadline.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}

/// A leadership's revocation, watched apart from it (see
/// [`Leadership::revocation`]).
#[derive(Debug, Clone)]
pub struct Revocation {
    lost: crate::guard::LostSignal,
    renewals: crate::guard::LostSignal,
    margin: Duration,
}

impl Revocation {
    /// Resolves when the leadership ends without a resign (as
    /// [`Leadership::revoked`], without its log line and metric).
    ///
    /// Cancellation: cancel-safe; a later call sees the revocation.
    pub async fn wait(&mut self) -> Revoked {
        loop {
            let stop_at = self
                .renewals
                .deadline()
                .checked_sub(self.margin)
                .unwrap_or_else(Instant::now);
            tokio::select! {
                reason = self.lost.wait() => return Revoked::Lost(reason),
                _ = tokio::time::sleep_until(stop_at.into()) => {
                    // A renewal may have moved the deadline meanwhile.
                    if Instant::now() + self.margin >= self.renewals.deadline() {
                        return Revoked::RenewDeadline;
                    }
                }
                _ = self.renewals.changed() => {}
            }
        }
    }

    /// Whether the leadership has ended without a resign by now.
    pub fn is_revoked(&self) -> bool {
        self.lost.is_lost() || Instant::now() + self.margin >= self.renewals.deadline()
    }
}

/// An election's name, whose `lockward_leader` gauge goes to 0 when the
/// leadership holding it ends, however it ends.
#[derive(Debug)]
struct LeaderGauge(String);

impl Drop for LeaderGauge {
    fn drop(&mut self) {
        crate::metrics::not_leading(&self.0);
    }
}
