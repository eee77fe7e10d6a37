//! The Redlock quorum fence, checked over every interleaving within the
//! bounds: tokens only grow (a master restarted without its data reads its
//! clock, if its restart takes longer than the clocks are apart), no two
//! clients hold a majority at once while no master restarted; readings
//! without the clock, a token from the first reading, or a restart quicker
//! than the clocks are apart grant a token twice.

use lockward_models::check;
use lockward_models::redlock::{Redlock, Token, GRANTED_AFTER_RESTART, NO_OVERLAP, TOKENS_GROW};

#[test]
fn quorum_tokens_grow_and_majorities_do_not_overlap() {
    let m = Redlock::checked(Token::LargestWithClock);
    let bounds = format!("{m:?}");
    let checked = check(m);
    println!(
        "redlock, {bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    assert!(!checked.found(TOKENS_GROW), "{checked:?}");
    assert!(!checked.found(NO_OVERLAP), "{checked:?}");
    assert!(checked.found(GRANTED_AFTER_RESTART), "{checked:?}");
}

#[test]
fn readings_without_the_clock_repeat_a_token_after_a_restart() {
    assert!(check(Redlock::checked(Token::LargestWithoutClock)).found(TOKENS_GROW));
}

#[test]
fn a_token_from_the_first_reading_repeats_one() {
    assert!(check(Redlock::checked(Token::FirstReading)).found(TOKENS_GROW));
}

#[test]
fn a_restart_quicker_than_the_clocks_are_apart_repeats_a_token() {
    // The fastest clock is a tick ahead of the rest of any majority.
    let quick = Redlock {
        restart_gap: 1,
        ..Redlock::checked(Token::LargestWithClock)
    };
    assert!(check(quick).found(TOKENS_GROW));
}
