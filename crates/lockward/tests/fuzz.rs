//! Property tests with a fixed seed and a case budget, run in CI: the URL,
//! name and duration parsers never panic on any input and never echo a
//! password, and each backend's key or path mapping keeps every name inside
//! its namespace and apart from every other name (`..`, `/`, `%2F`, NUL,
//! the 256-byte limit, Unicode).
//!
//! `LOCKWARD_FUZZ_CASES` raises the budget for a longer local run.

use std::time::Duration;

use lockward::backend::{etcd::keys as etcd, redis::keys as redis, zookeeper::paths as zk};
use lockward::{Name, StoreUrl};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// The same cases on every run; a failure prints its minimal input.
fn runner() -> TestRunner {
    let cases = std::env::var("LOCKWARD_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[42; 32]))
}

/// Text that looks like names: the characters that matter to the
/// mappings, plus any Unicode.
fn name_text() -> impl Strategy<Value = String> {
    let tricky = prop_oneof![
        Just("/".to_string()),
        Just("..".to_string()),
        Just(".".to_string()),
        Just("%2F".to_string()),
        Just("%25".to_string()),
        Just("%".to_string()),
        Just(":".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("*".to_string()),
        Just("\u{0}".to_string()),
        Just("\u{E000}".to_string()),
        Just("\u{FFFF}".to_string()),
        "[a-z]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(tricky, 0..12).prop_map(|parts| parts.concat())
}

/// A valid name made from [`name_text`]: control characters dropped, cut to
/// the 256-byte limit at a character boundary.
fn valid_name() -> impl Strategy<Value = Name> {
    name_text().prop_map(|t| {
        let mut text: String = t.chars().filter(|c| !c.is_control()).collect();
        while text.len() > lockward::MAX_NAME_BYTES {
            text.pop();
        }
        if text.is_empty() {
            text.push('x');
        }
        Name::new(text).expect("a valid name")
    })
}

#[test]
fn parsers_never_panic() {
    let mut runner = runner();
    let url_like = prop_oneof![
        any::<String>(),
        (
            prop::sample::select(vec![
                "redis",
                "rediss",
                "redis+cluster",
                "redlock",
                "etcd",
                "etcds",
                "zk",
                "postgres",
                "sqlite",
                "memory"
            ]),
            any::<String>()
        )
            .prop_map(|(s, rest)| format!("{s}://{rest}")),
    ];
    runner
        .run(
            &(url_like, any::<String>(), name_text()),
            |(url, duration, name)| {
                let _ = StoreUrl::parse(&url).map(|u| u.to_string());
                let _ = lockward::duration::parse(&duration);
                if let Ok(n) = Name::new(&name) {
                    prop_assert!(
                        !n.as_str().is_empty() && n.as_str().len() <= lockward::MAX_NAME_BYTES
                    );
                    prop_assert!(!n.as_str().chars().any(char::is_control));
                }
                Ok(())
            },
        )
        .unwrap();
    println!("parsers: {} cases, 0 panics", runner.config().cases);
}

#[test]
fn durations_round_trip() {
    runner()
        .run(&(0u64..1_000_000, 0u64..1_000), |(secs, ms)| {
            let text = format!("{secs}s{ms}ms");
            prop_assert_eq!(
                lockward::duration::parse(&text).unwrap(),
                Duration::from_secs(secs) + Duration::from_millis(ms)
            );
            Ok(())
        })
        .unwrap();
}

#[test]
fn no_url_shows_its_password() {
    let password = "[A-Za-z0-9!$&'()*+,;=~_./@-]{6,20}";
    let scheme = prop::sample::select(vec![
        "redis",
        "rediss",
        "redis+cluster",
        "redlock",
        "etcd",
        "zk",
        "postgres",
    ]);
    let rest = prop_oneof![
        Just(String::new()),
        any::<String>(),
        "[a-z0-9.:,/?=&\\[\\]]{0,30}"
    ];
    let mut runner = runner();
    runner
        .run(&(scheme, password, rest), |(scheme, password, rest)| {
            let url = format!("{scheme}://app:{password}@{rest}");
            let shown = match StoreUrl::parse(&url) {
                Ok(u) => format!("{u} {u:?}"),
                Err(e) => format!("{e} {e:?}"),
            };
            prop_assert!(!shown.contains(&password), "{url} -> {shown}");
            Ok(())
        })
        .unwrap();
    println!("passwords: {} cases, none shown", runner.config().cases);
}

#[test]
fn redis_keys_keep_names_apart() {
    runner()
        .run(&(valid_name(), valid_name()), |(a, b)| {
            let (ka, kb) = (redis::keys("p:", &a, false), redis::keys("p:", &b, false));
            let after = |k: &str| k.strip_prefix("p:").unwrap().to_string();
            prop_assert_eq!(redis::name_of(&after(&ka.lock), false), Some(a.to_string()));
            prop_assert_eq!(redis::name_of(&after(&ka.fence), false), None);
            let cluster = redis::keys("p:", &a, true);
            prop_assert_eq!(
                redis::name_of(&after(&cluster.lock), true),
                Some(a.to_string())
            );
            prop_assert!(ka.lock.starts_with("p:"));
            if a != b {
                let theirs = [&kb.lock, &kb.fence, &kb.channel, &kb.holder];
                for mine in [&ka.lock, &ka.fence, &ka.channel, &ka.holder] {
                    prop_assert!(!theirs.contains(&mine), "{a:?} and {b:?} share {mine}");
                }
                prop_assert_ne!(
                    redis::record_key("p:", &a, false),
                    redis::record_key("p:", &b, false)
                );
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn etcd_keys_keep_names_apart() {
    runner()
        .run(
            &(valid_name(), valid_name(), 1i64..i64::MAX),
            |(a, b, lease)| {
                let pa = etcd::lock_prefix("lockward/", &a);
                let key = etcd::contender_key(&pa, lease);
                prop_assert_eq!(etcd::name_of("lockward/", &key), Some(a.to_string()));
                prop_assert_eq!(
                    etcd::unescape(&etcd::escape(a.as_str())),
                    Some(a.to_string())
                );
                if a != b {
                    // No name's contender keys fall under another name's range.
                    let pb = etcd::lock_prefix("lockward/", &b);
                    prop_assert!(!key.starts_with(&pb), "{a:?}'s key {key} is under {pb}");
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn zookeeper_paths_stay_one_segment() {
    runner()
        .run(&(valid_name(), valid_name()), |(a, b)| {
            let path = zk::lock_path("/lockward", &a);
            let segment = path.strip_prefix("/lockward/").unwrap();
            prop_assert!(!segment.contains('/') && segment != "." && segment != "..");
            prop_assert!(!segment.is_empty());
            prop_assert_eq!(zk::unescape(segment), Some(a.to_string()));
            prop_assert!(
                segment != zk::RECORDS && segment != zk::VERSIONED && segment != zk::CLOCK
            );
            if a != b {
                prop_assert_ne!(path, zk::lock_path("/lockward", &b));
            }
            Ok(())
        })
        .unwrap();
}
