//! The fence rule across lost writes, checked over every run within the
//! bounds: it holds when a failover takes longer than two clocks can be
//! apart, and the checker finds a fence granted twice with a plain counter
//! or a shorter failover.

use lockward_models::check;
use lockward_models::lost_writes::{LostWrites, Rule, FENCES_GROW, GRANTS_FORGOTTEN};

fn model(rule: Rule, skew: i64, gap: u64) -> LostWrites {
    LostWrites {
        skew,
        gap,
        ..LostWrites::checked(rule)
    }
}

#[test]
fn the_hybrid_rule_never_grants_a_fence_twice() {
    let m = model(Rule::Hybrid, 2, 5);
    let bounds = format!("{m:?}");
    let checked = check(m);
    println!(
        "lost writes, {bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    assert!(!checked.found(FENCES_GROW), "{checked:?}");
    // The runs the rule is for were explored.
    assert!(checked.found(GRANTS_FORGOTTEN), "{checked:?}");
}

#[test]
fn a_plain_counter_grants_a_fence_twice() {
    let checked = check(model(Rule::Incr, 2, 5));
    assert!(checked.found(FENCES_GROW), "{checked:?}");
}

#[test]
fn clocks_further_apart_than_the_failover_takes_break_the_rule() {
    // Two clocks 2 ticks either side of the true time are up to 4 apart.
    let checked = check(model(Rule::Hybrid, 2, 4));
    assert!(checked.found(FENCES_GROW), "{checked:?}");
}
