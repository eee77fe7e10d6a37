//! The checks, by topic, and the registry that gives each backend the
//! checks its declared capabilities call for. Every check takes a fixture,
//! so it runs unchanged on every backend.

#[cfg(feature = "cron")]
mod cron;
mod fence;
mod forced_unlock;
mod input;
mod lock;
mod lock_delay;
mod multi_lock;
mod recipes;
mod records;
mod rw_lock;
mod waiting;

pub use waiting::{run_waiter, WAITER_ENV};

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use libtest_mimic::Trial;
use lockward::{Capabilities, LockOptions, OwnerId, Renewal, Store};

/// How a backend's stores are opened for the suite.
#[async_trait::async_trait]
pub trait Fixture: Send + Sync + 'static {
    /// A store handle on the backend under test. Each call may be a new
    /// connection, as another process would open; all see the same locks.
    async fn store(&self) -> Store;
    /// The URL of the backend under test.
    fn url(&self) -> String;
    /// The shortest time the server keeps a lease (etcd counts whole
    /// seconds); checks that wait for a server-side expiry wait this long.
    fn server_ttl_floor(&self) -> Duration {
        Duration::ZERO
    }
    /// How many sessions the store shows in the line of `name`, held by
    /// `holder`'s store, or a count that grows by one with each waiter (a
    /// fixture may count the holder too); `None` where the store shows no
    /// line. The order checks start a waiter only once the store saw the
    /// one before it, so a slow start on a loaded machine cannot reorder
    /// them. By default, the waiters [`Store::inspect`] reports.
    async fn waiting(&self, holder: &Store, name: &str) -> Option<usize> {
        holder.inspect(name).await.ok().flatten()?.waiters
    }
}

type Run = for<'a> fn(&'a dyn Fixture) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// One check, and the capabilities a backend must declare for it to apply.
struct Check {
    name: &'static str,
    applies: fn(&Capabilities) -> bool,
    run: Run,
}

/// `topic::check` always, or `topic::check if |c| …` where it applies.
macro_rules! checks {
    ($($topic:ident::$check:ident $(if $applies:expr)?),* $(,)?) => {
        vec![$(
            Check {
                name: stringify!($check),
                applies: checks!(@applies $($applies)?),
                run: {
                    fn run<'a>(f: &'a dyn Fixture) -> Pin<Box<dyn Future<Output = ()> + 'a>> {
                        Box::pin($topic::$check(f))
                    }
                    run
                },
            },
        )*]
    };
    (@applies) => { |_| true };
    (@applies $applies:expr) => { $applies };
}

fn all_checks() -> Vec<Check> {
    #[allow(unused_mut)]
    let mut checks = checks![
        input::bad_input,
        lock::mutual_exclusion,
        lock::fences_increase,
        lock::non_owner_refused,
        lock::expiry_frees if |c| c.expires,
        lock::session_lock_outlives_its_ttl if |c| !c.expires,
        lock::extend_keeps,
        lock::renewal_keeps,
        lock::lost_fires_and_the_lock_passes_on if |c| c.expires,
        lock::lost_fires_on_a_session_lock if |c| !c.expires,
        lock::acquire_times_out,
        lock::cancelled_wait_leaves_nothing,
        lock::with_lock_cancels_work,
        lock::inspect_and_list,
        lock::drop_releases,
        lock::paused_holder_learns_it_lost,
        forced_unlock::forced_unlock_ends_the_holder if |c| c.force_unlock(),
        forced_unlock::forced_unlock_ends_a_semaphore_holder if |c| c.force_unlock(),
        forced_unlock::forced_unlock_is_refused_where_locks_live_in_sessions if |c| !c.force_unlock(),
        lock_delay::lock_delay_holds_a_lapsed_lease_back if |c| c.lock_delay(),
        lock_delay::forced_unlock_holds_back_a_holder_with_lock_delay if |c| c.lock_delay(),
        lock_delay::lock_delay_is_refused_where_sessions_free_locks if |c| !c.lock_delay(),
        multi_lock::multi_lock_takes_all_or_nothing,
        multi_lock::multi_lock_order_cannot_deadlock,
        multi_lock::multi_lock_is_lost_when_one_is,
        multi_lock::multi_lock_refuses_bad_name_lists,
        rw_lock::rw_lock_readers_share_and_a_writer_excludes,
        rw_lock::rw_lock_waiting_writer_goes_before_later_readers,
        rw_lock::rw_lock_readers_queued_behind_a_writer_get_in_together,
        rw_lock::rw_lock_crashed_reader_frees_after_its_ttl if |c| c.lock_delay(),
        waiting::waiter_wakes_promptly,
        waiting::every_waiter_gets_the_lock,
        waiting::waiters_in_fifo_order if |c| c.fifo,
        waiting::waiters_in_fifo_order_across_processes if |c| c.fifo && c.cross_process,
        waiting::local_waiters_in_order,
        fence::paused_holders_write_is_refused if |c| c.expires,
        fence::paused_session_holder_keeps_its_lock if |c| !c.expires,
        records::records,
        records::versioned_records_compare_and_set,
        records::permanent_records_are_kept_or_refused,
        recipes::election_hands_over_on_resign,
        recipes::paused_leader_is_revoked_and_fenced if |c| c.expires,
        recipes::semaphore_limits_holders,
        recipes::semaphore_takes_permits_by_weight,
        recipes::semaphore_native_holders_are_not_limited,
        recipes::semaphore_permit_comes_back_after_its_ttl if |c| c.expires,
        recipes::idempotency_runs_once,
        recipes::optimistic_updates_lose_nothing,
        recipes::rate_limits_hold,
    ];
    #[cfg(feature = "cron")]
    checks.extend(checks![
        cron::cron_overlap_forbid_skips_and_allow_runs,
        cron::cron_overlap_replace_stops_the_running_one,
        cron::cron_missed_fire_time_is_recorded_once,
    ]);
    checks
}

/// Adds the trials of one backend, named `BACKEND::CHECK`: every check that
/// applies to the capabilities it declares (`declared`, its backend's
/// `CAPABILITIES`), and one that the stores it opens report exactly those.
pub fn register<F, Fut, T>(
    trials: &mut Vec<Trial>,
    backend: &str,
    declared: Capabilities,
    fixture: F,
) where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = T>,
    T: Fixture,
{
    let open = fixture.clone();
    trials.push(Trial::test(
        format!("{backend}::declares_its_capabilities"),
        move || {
            on_runtime(async move {
                let reported = open().await.store().await.capabilities();
                assert_eq!(
                    reported, declared,
                    "the store reports other capabilities than declared"
                );
            });
            Ok(())
        },
    ));
    for check in all_checks().into_iter().filter(|c| (c.applies)(&declared)) {
        let fixture = fixture.clone();
        trials.push(Trial::test(
            format!("{backend}::{}", check.name),
            move || {
                on_runtime(async move {
                    let f = fixture().await;
                    (check.run)(&f).await;
                });
                Ok(())
            },
        ));
    }
}

/// Adds one check of a backend's own, outside the suite, named
/// `BACKEND::CHECK` (this binary runs no `#[test]` functions: every check is
/// a trial).
pub fn own<F, Fut>(trials: &mut Vec<Trial>, name: &str, check: F)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()>,
{
    trials.push(Trial::test(name, move || {
        on_runtime(check());
        Ok(())
    }));
}

/// Runs one trial on a runtime of its own, as `#[tokio::test]` would.
fn on_runtime(work: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(work);
}

pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", OwnerId::random())
}

pub(crate) fn short(ttl_ms: u64) -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms))
        .renewal(Renewal::Off)
}
