//! The Redis grant with its line, checked over every interleaving of
//! three clients' asks, re-checks, releases and crashes with time and
//! lost wake-ups: FIFO, growing fences, and no waiter left behind a free
//! lock; a grant that ignores the line is not FIFO, and waiters that only
//! wake when told are stranded by a lost wake-up.

use lockward_models::check;
use lockward_models::redis_line::{
    RedisLine, Rule, EVERY_WAITER_SERVED, FENCES_GROW, FIFO, HANDED_OVER,
};

#[test]
fn the_line_is_fifo_and_leaves_nobody_behind() {
    let m = RedisLine::checked(Rule::Lockward);
    let bounds = format!("{m:?}");
    let checked = check(m);
    println!(
        "redis line, {bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    assert!(!checked.found(FIFO), "{checked:?}");
    assert!(!checked.found(FENCES_GROW), "{checked:?}");
    assert!(!checked.found(EVERY_WAITER_SERVED), "{checked:?}");
    assert!(checked.found(HANDED_OVER), "{checked:?}");
}

#[test]
fn a_grant_that_ignores_the_line_is_not_fifo() {
    assert!(check(RedisLine::checked(Rule::IgnoreTheLine)).found(FIFO));
}

#[test]
fn waiters_woken_only_by_messages_are_stranded_by_a_lost_one() {
    assert!(check(RedisLine::checked(Rule::PushedOnly)).found(EVERY_WAITER_SERVED));
}
