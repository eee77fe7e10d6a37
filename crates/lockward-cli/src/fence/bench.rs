//! `lockward fence bench`: what the guard costs, measured in one run on
//! one database: a bulk INSERT and a one-row UPDATE loop on a guarded
//! table beside a plain one (rounds alternate, medians compared), and a
//! claim beside one round trip.

use std::time::{Duration, Instant};

use lockward::fence::{FenceDb, Unfenced};

use crate::exit;

mod workload;

use workload::Workload;

const PLAIN: &str = "lockward_bench_plain";
const GUARDED: &str = "lockward_bench_guarded";
const LOCK: &str = "lockward-bench";
/// Rounds of each measurement, alternating plain and guarded.
const ROUNDS: usize = 3;
/// Claims timed for the claim's cost.
const CLAIMS: usize = 200;

/// Runs the measurements; lockward's exit status.
pub async fn bench(
    guard: &mut FenceDb,
    url: &str,
    rows: u32,
    duration: Duration,
    json: bool,
) -> u8 {
    match measure(guard, url, rows, duration).await {
        Ok(figures) => {
            figures.print(json);
            0
        }
        Err(e) => {
            eprintln!("lockward: fence bench: {e}");
            exit::UNAVAILABLE
        }
    }
}

/// What one run measured.
struct Figures {
    rows: u32,
    insert: (Duration, Duration),
    updates_per_s: (f64, f64),
    round_trip: Duration,
    claim: Duration,
}

impl Figures {
    fn print(&self, json: bool) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let insert_ratio = ms(self.insert.1) / ms(self.insert.0);
        let update_ratio = self.updates_per_s.0 / self.updates_per_s.1;
        if json {
            let value = serde_json::json!({
                "rows": self.rows,
                "insert_plain_ms": ms(self.insert.0),
                "insert_guarded_ms": ms(self.insert.1),
                "insert_ratio": insert_ratio,
                "updates_per_s_plain": self.updates_per_s.0,
                "updates_per_s_guarded": self.updates_per_s.1,
                "update_cost_ratio": update_ratio,
                "round_trip_us": us(self.round_trip),
                "claim_us": us(self.claim),
            });
            println!("{value:#}");
            return;
        }
        println!(
            "INSERT of {} rows:     plain {:.1} ms, guarded {:.1} ms: {insert_ratio:.2}×",
            self.rows,
            ms(self.insert.0),
            ms(self.insert.1)
        );
        println!(
            "one-row UPDATE loop:  plain {:.0}/s, guarded {:.0}/s: each costs {update_ratio:.2}×",
            self.updates_per_s.0, self.updates_per_s.1
        );
        println!(
            "claim:                {:.0} µs (median of {CLAIMS}), a round trip {:.0} µs",
            us(self.claim),
            us(self.round_trip)
        );
    }
}

async fn measure(
    guard: &mut FenceDb,
    url: &str,
    rows: u32,
    duration: Duration,
) -> Result<Figures, String> {
    let mut load = Workload::connect(url).await?;
    load.create(&[PLAIN, GUARDED]).await?;
    let measured = async {
        guard
            .install(&[GUARDED.to_string()], LOCK, Unfenced::Refuse, None)
            .await
            .map_err(|e| e.to_string())?;
        // The bench's own lock starts again at 1 (a run before left its
        // last claim stored).
        guard.reset(LOCK, 1).await.map_err(|e| e.to_string())?;
        let fence = guard
            .claim(LOCK, 1, Duration::from_secs(5))
            .await
            .map_err(|e| e.to_string())?;
        load.carry(LOCK, fence).await?;
        let mut inserts = (Vec::new(), Vec::new());
        let mut updates = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            inserts.0.push(load.insert(PLAIN, rows).await?);
            inserts.1.push(load.insert(GUARDED, rows).await?);
            updates.0.push(load.update_rate(PLAIN, duration).await?);
            updates.1.push(load.update_rate(GUARDED, duration).await?);
        }
        let mut trips = Vec::new();
        for _ in 0..CLAIMS {
            trips.push(load.round_trip().await?);
        }
        let mut claims = Vec::new();
        for i in 0..CLAIMS as u64 {
            let began = Instant::now();
            guard
                .claim(LOCK, fence + 1 + i, Duration::from_secs(5))
                .await
                .map_err(|e| e.to_string())?;
            claims.push(began.elapsed());
        }
        Ok::<_, String>(Figures {
            rows,
            insert: (median(&mut inserts.0), median(&mut inserts.1)),
            updates_per_s: (median_f(&mut updates.0), median_f(&mut updates.1)),
            round_trip: median(&mut trips),
            claim: median(&mut claims),
        })
    }
    .await;
    // Its tables go, whatever happened; the stored fence of the bench's
    // lock stays with lockward's objects.
    let _ = guard.uninstall(&[GUARDED.to_string()], false).await;
    load.drop_tables(&[PLAIN, GUARDED]).await;
    measured
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

fn median_f(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}
