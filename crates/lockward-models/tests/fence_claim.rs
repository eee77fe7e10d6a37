//! The database fence's claim, checked over every interleaving of the old
//! holder's transactions with the new holder's claim: no write under the
//! older fence commits after the claim, and one does when the check lets
//! go of its lock at the statement's end or takes none.

use lockward_models::check;
use lockward_models::fence_claim::{
    Check, FenceClaim, LATE_WRITE_REFUSED, NO_LATE_WRITE, OLD_WORK_FIRST,
};

#[test]
fn no_write_under_the_older_fence_commits_after_the_claim() {
    let m = FenceClaim::checked(Check::HeldToTheCommit);
    let bounds = format!("{m:?}");
    let checked = check(m);
    println!(
        "fence claim, {bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    assert!(!checked.found(NO_LATE_WRITE), "{checked:?}");
    // The bounds reach the cases the claim is for.
    assert!(checked.found(OLD_WORK_FIRST), "{checked:?}");
    assert!(checked.found(LATE_WRITE_REFUSED), "{checked:?}");
}

#[test]
fn a_lock_held_for_the_statement_only_lets_a_late_write_commit() {
    assert!(check(FenceClaim::checked(Check::HeldForTheStatement)).found(NO_LATE_WRITE));
}

#[test]
fn a_check_without_the_lock_lets_a_late_write_commit() {
    assert!(check(FenceClaim::checked(Check::WithoutTheLock)).found(NO_LATE_WRITE));
}
