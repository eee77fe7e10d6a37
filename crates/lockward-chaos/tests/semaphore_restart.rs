//! The interleaving behind a crowd of semaphore holders under faults, on
//! a real Redis: a permit granted just before the server died, whose
//! holder hears of it only after, and a restarted server that kept nothing
//! and so rightly admits the semaphore's full count again. The checker
//! must excuse that crowd (it is the fault's, and only fences protect
//! across it) and must still find one that no fault explains; a server
//! that keeps its writes (`appendfsync always`) admits nobody extra.

use std::time::Duration;

use lockward::recipe::Semaphore;
use lockward::{Error, LockOptions, Renewal, Store};
use lockward_chaos::history::{mono_ns, Kind, Op, Outcome};
use lockward_chaos::sem_check::check_sem;
use lockward_testkit::{RedisOptions, RedisServer};

const PERMITS: u32 = 2;

fn opts() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(30))
        .renewal(Renewal::Off)
}

/// A grant as the semaphore workload records it: asked at `asked`, heard
/// of at `heard`, held until its lease's deadline (none comes in this
/// test: the leases are long).
fn grant(client: u32, fence: u64, asked: u64, heard: u64) -> Op {
    Op {
        client,
        kind: Kind::Acquire,
        outcome: Outcome::Ok,
        fence,
        start: asked,
        end: heard,
        value: heard + 30_000_000_000,
        seen: 0,
    }
}

async fn semaphore(server: &RedisServer) -> Semaphore {
    let store = Store::open(&server.url()).await.expect("open the store");
    Semaphore::new(store, "restarted-sem", PERMITS).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_granted_just_before_a_restart_without_persistence_is_excused_and_only_that() {
    let mut server = RedisServer::start();
    let sem = semaphore(&server).await;
    let asked = mono_ns();
    let first = sem.try_acquire(&opts()).await.expect("a permit");
    // The server dies (kill -9, nothing saved) before the holder hears of
    // its grant: the moment that matters.
    let forgot = mono_ns();
    tokio::task::block_in_place(|| server.restart());
    let heard = mono_ns();
    let mut ops = vec![grant(0, first.guard().fence(), asked, heard)];
    // The restarted server has no holder: both permits go again.
    let sem = semaphore(&server).await;
    let mut others = Vec::new();
    for client in 1..=PERMITS {
        let asked = mono_ns();
        let permit = sem
            .try_acquire(&opts())
            .await
            .expect("a permit after the restart");
        ops.push(grant(client, permit.guard().fence(), asked, mono_ns()));
        others.push(permit);
    }
    assert_eq!(
        sem.held().await.unwrap(),
        PERMITS,
        "the restart kept a permit"
    );
    // Its lease is gone with the server: the first holder learns at its
    // renewal.
    assert!(matches!(
        first.guard().extend(None).await,
        Err(Error::Lost { .. } | Error::NotOwner { .. })
    ));
    let found = check_sem(&ops, u64::from(PERMITS), &[forgot], &[]);
    assert_eq!(found.most, 3, "{found:?}");
    assert_eq!((found.over, found.excused), (0, 1), "{found:?}");
    assert!(found.crowds[0].contains("excused"), "{:?}", found.crowds);
    // Without the restart, the same three holders are a crowd.
    let found = check_sem(&ops, u64::from(PERMITS), &[], &[]);
    assert_eq!(found.over, 1, "{found:?}");
    // A restart after every holder was granted (none of them could have
    // been forgotten by it) excuses nothing either.
    let found = check_sem(&ops, u64::from(PERMITS), &[mono_ns()], &[]);
    assert_eq!(found.over, 1, "{found:?}");
    for permit in others {
        permit.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_its_writes_admits_nobody_extra_after_a_restart() {
    let mut server = RedisServer::start_with(RedisOptions {
        persistent: true,
        ..Default::default()
    });
    let sem = semaphore(&server).await;
    let first = sem.try_acquire(&opts()).await.expect("a permit");
    tokio::task::block_in_place(|| server.restart());
    let sem = semaphore(&server).await;
    let second = sem.try_acquire(&opts()).await.expect("the permit left");
    let third = sem.try_acquire(&opts()).await;
    assert!(
        matches!(&third, Err(Error::NoPermits { why, .. }) if why == "1 wanted, 0 of 2 free"),
        "{third:?}"
    );
    assert!(second.guard().fence() > first.guard().fence());
    // The first holder's lease survived with the server.
    first
        .guard()
        .extend(None)
        .await
        .expect("the first permit is held");
    first.release().await.unwrap();
    second.release().await.unwrap();
}
