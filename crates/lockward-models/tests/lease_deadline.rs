//! The lease's deadline across the daemon, checked over every delay and
//! clock error within the bounds: the client's deadline never passes
//! after the store's expiry, and it does when the client counts from the
//! grant's arrival or leaves out the drift.

use lockward_models::check;
use lockward_models::lease_deadline::{Deadline, LeaseDeadline, DEADLINE_FIRST, HELD};

#[test]
fn the_clients_deadline_comes_before_the_stores_expiry() {
    let m = LeaseDeadline::checked(Deadline::FromRequest);
    let bounds = format!("{m:?}");
    let checked = check(m);
    println!(
        "lease deadline, {bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    assert!(!checked.found(DEADLINE_FIRST), "{checked:?}");
    assert!(checked.found(HELD), "{checked:?}");
}

#[test]
fn counting_from_the_grants_arrival_passes_the_expiry() {
    assert!(check(LeaseDeadline::checked(Deadline::FromReply)).found(DEADLINE_FIRST));
}

#[test]
fn a_deadline_without_the_drift_passes_the_expiry() {
    assert!(check(LeaseDeadline::checked(Deadline::NoDrift)).found(DEADLINE_FIRST));
}
