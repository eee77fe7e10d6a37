//! The host's clocks: the boot clock, shared by every process of the host,
//! never moved by NTP or by hand, restarted at boot (hence the boot id
//! beside it), which times expiry; and the wall clock, the floor of every
//! fence and version.

/// Milliseconds on the boot clock.
#[cfg(target_os = "linux")]
pub fn now_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on
    // every Linux since 2.6.39.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_BOOTTIME) failed");
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// Identifies the current boot, so expiry times of a previous boot are
/// recognised as meaningless.
#[cfg(target_os = "linux")]
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-boot".into())
}

/// Milliseconds since the Unix epoch: other systems have no shared boot clock.
#[cfg(not(target_os = "linux"))]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The wall clock is the same across boots.
#[cfg(not(target_os = "linux"))]
pub fn boot_id() -> String {
    "wall-clock".into()
}

/// Microseconds since 1970 on the host's wall clock (0 before 1970): the
/// floor of every fence (see `docs/fences.md`).
pub fn wall_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
