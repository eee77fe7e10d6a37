//! I9, judged from the semaphore workload's history: never more holders at
//! once than the semaphore has permits, counting each hold from its grant
//! to the start of its release and only before its lease's local deadline
//! (a holder paused past its deadline has no claim after it). A crowd is
//! excused when a fault ended every lease early after one of its holds was
//! asked for (a restart without persistence, a server clock jumped forward:
//! one of `forgotten`): a hold the old server granted may reach its holder
//! only after the server died. A holder an operator ended (a forced
//! unlock) holds until the unlock began: its permit is free from then, by
//! design.

use crate::history::{cut_at_unlocks, forgotten_between, held_spans, Ended, Held, Op};

/// The crowds a report describes at most, so that a failed verdict can be
/// read from the report alone.
const CROWDS_SHOWN: usize = 4;

/// What the checker found in the semaphore workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SemFindings {
    /// Holds granted.
    pub holds: u64,
    /// The most holders at once, within their leases.
    pub most: u64,
    /// Holds that began with every permit already held: must be 0.
    pub over: u64,
    /// The same, after a fault ended every lease early.
    pub excused: u64,
    /// The first crowds found, each with its holds and, when excused, the
    /// fault that excused it.
    pub crowds: Vec<String>,
}

/// Judges `ops` (every holder's) against `permits`; `forgotten`: when a
/// fault ended every lease early (ns on the monotonic clock); `ended`: the
/// holders forced unlocks ended.
pub fn check_sem(ops: &[Op], permits: u64, forgotten: &[u64], ended: &[Ended]) -> SemFindings {
    let cut = cut_at_unlocks(ops, ended);
    let (holds, spans) = held_spans(&cut);
    let mut f = SemFindings {
        holds,
        ..SemFindings::default()
    };
    for (i, this) in spans.iter().enumerate() {
        // Every hold live when this one began, itself included.
        let live: Vec<&Held> = spans[..=i].iter().filter(|h| h.to > this.from).collect();
        let n = live.len() as u64;
        f.most = f.most.max(n);
        if n <= permits {
            continue;
        }
        let asked = live.iter().map(|h| h.asked).min().unwrap_or(this.asked);
        let excuse = forgotten_between(forgotten, asked, this.from);
        match excuse {
            Some(_) => f.excused += 1,
            None => f.over += 1,
        }
        if f.crowds.len() < CROWDS_SHOWN {
            f.crowds.push(describe(&live, excuse));
        }
    }
    f
}

/// One crowd in words: each hold's client, fence and times (ms on the
/// monotonic clock), and what excused it.
fn describe(live: &[&Held], excuse: Option<u64>) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let holds: Vec<String> = live
        .iter()
        .map(|h| {
            format!(
                "client {} fence {} asked {:.1} held {:.1}..{:.1}",
                h.client,
                h.fence,
                ms(h.asked),
                ms(h.from),
                ms(h.to)
            )
        })
        .collect();
    match excuse {
        Some(t) => format!(
            "[{}] excused: the store forgot every lease at {:.1}",
            holds.join(", "),
            ms(t)
        ),
        None => format!("[{}]", holds.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{ok_op as op, Kind};

    #[test]
    fn holds_within_the_permits_pass_and_a_crowd_is_found() {
        let two = vec![
            op(0, Kind::Acquire, 1, 0, 10, 1_000),
            op(1, Kind::Acquire, 2, 0, 20, 1_000),
            op(0, Kind::Release, 1, 500, 510, 0),
            op(2, Kind::Acquire, 3, 505, 520, 2_000),
            op(1, Kind::Release, 2, 600, 610, 0),
            op(2, Kind::Release, 3, 900, 910, 0),
        ];
        let f = check_sem(&two, 2, &[], &[]);
        assert_eq!((f.holds, f.most, f.over), (3, 2, 0));
        let mut crowd = two.clone();
        crowd[2].start = 700; // the first holds on past the third's grant
        let f = check_sem(&crowd, 2, &[], &[]);
        assert_eq!((f.most, f.over), (3, 1));
        // The store forgot the holds before the third was granted.
        let forgot = check_sem(&crowd, 2, &[300], &[]);
        assert_eq!((forgot.over, forgot.excused), (0, 1));
        // An operator ended the first (fence 1) before the third's grant.
        let unlock = |fence, from| Ended {
            fence,
            from,
            to: from + 5,
        };
        let ended = check_sem(&crowd, 2, &[], &[unlock(1, 400)]);
        assert_eq!((ended.most, ended.over), (2, 0));
        // ... but not an unlock after the crowd formed, nor one that
        // returned before the crowding holder of its fence asked.
        assert_eq!(check_sem(&crowd, 2, &[], &[unlock(1, 600)]).over, 1);
        assert_eq!(check_sem(&crowd, 2, &[], &[unlock(3, 400)]).over, 1);
        // Past its deadline (400) the first no longer counts.
        crowd[0].value = 400;
        assert_eq!(check_sem(&crowd, 2, &[], &[]).over, 0);
    }

    #[test]
    fn a_hold_the_server_granted_just_before_it_forgot_everything_is_excused() {
        // Client 0 asked at 100; the server granted it, then restarted
        // without persistence at 150, before the answer reached the client
        // (160). The restarted server, empty, rightly grants both permits
        // again (300 and 330): three holders, by the fault.
        let ops = vec![
            op(0, Kind::Acquire, 8, 100, 160, 5_000),
            op(2, Kind::Acquire, 9, 300, 320, 5_000),
            op(3, Kind::Acquire, 10, 330, 340, 5_000),
        ];
        let f = check_sem(&ops, 2, &[150], &[]);
        assert_eq!((f.most, f.over, f.excused), (3, 0, 1));
        assert!(f.crowds[0].contains("excused"), "{:?}", f.crowds);
        // Asked after the server forgot: the restarted server granted all
        // three, and that is a crowd.
        let mut late = ops.clone();
        late[0].start = 155;
        let f = check_sem(&late, 2, &[150], &[]);
        assert_eq!((f.over, f.excused), (1, 0));
        assert!(f.crowds[0].contains("client 0 fence 8"), "{:?}", f.crowds);
    }
}
