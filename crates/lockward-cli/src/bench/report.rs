//! How a bench run is shown: a table, one JSON object, or an SVG.

use std::fmt::Write;
use std::time::Duration;

use serde_json::{json, Value};

use super::svg::{latency_series, render, Series};
use super::Results;
use lockward_bench::Latencies;

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Results {
    /// One client's rate: the floor's round trips were taken between the
    /// cycles, so the rate comes from the cycles' own time, not the run's.
    fn cycles_per_s(&self) -> f64 {
        1.0 / self.cycles.mean().as_secs_f64().max(1e-9)
    }

    /// The floor of a cycle (two round trips: acquire, release) over the
    /// cycle's median: 1.0 would be as fast as the store allows.
    fn ratio_to_floor(&self) -> Option<f64> {
        let p50 = us(self.cycles.quantile(0.5));
        self.floor.map(|f| 2.0 * us(f) / p50.max(1e-9))
    }
}

fn curve(l: &Latencies) -> Value {
    l.curve()
        .into_iter()
        .map(|(q, d)| json!([q, us(d)]))
        .collect()
}

/// One JSON object; the fields scripts rely on are at the top level.
pub fn json(r: &Results) -> Value {
    let throughput: Vec<Value> = r
        .throughput
        .iter()
        .map(|t| {
            json!({
                "clients": t.clients,
                "names": if t.same_name { "same" } else { "distinct" },
                "cycles_per_s": t.cycles_per_s,
                "fewest_per_client": t.fewest,
                "most_per_client": t.most,
                "longest_wait_us": us(t.longest_wait),
            })
        })
        .collect();
    let scale = r.scale.as_ref().map(|s| match s {
        Ok(s) => json!({
            "locks": s.locks,
            "acquisitions_per_s": s.acquisitions_per_s,
            "bytes_per_lock": s.bytes_per_lock.map(|b| b.0),
            "measured": s.bytes_per_lock.map(|b| b.1),
            "bare_key_bytes": s.bare_key_bytes,
            "ratio_to_bare_key": s.bytes_per_lock.zip(s.bare_key_bytes).map(|(b, k)| b.0 / k),
            "cycles_per_s_while_held": s.cycles_while_held.len() as f64 / r.duration.as_secs_f64(),
            "p50_us_while_held": us(s.cycles_while_held.quantile(0.5)),
            "stopped": s.stopped,
        }),
        Err(e) => json!({ "error": e }),
    });
    let failover = r.failover.as_ref().map(|f| match f {
        Ok(f) => json!({
            "lease_ms": ms(r.failover_lease),
            "after_kill_ms": ms(f.after_kill),
            "kills_ms": f.kills.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "after_resign_ms": ms(f.after_resign),
        }),
        Err(e) => json!({ "error": e }),
    });
    let keyspace = r.keyspace.as_ref().map(|(n, costs)| match costs {
        Ok(costs) => json!({
            "unrelated_keys": n,
            "operations": costs.iter().map(|c| json!({
                "operation": c.operation,
                "empty_us": us(c.empty),
                "full_us": us(c.full),
                "ratio": c.ratio(),
            })).collect::<Vec<_>>(),
        }),
        Err(e) => json!({ "unrelated_keys": n, "error": e }),
    });
    let semaphore = r.semaphore.as_ref().map(|(permits, rates)| match rates {
        Ok((one, many)) => json!({
            "permits": permits,
            "native": r.semaphore_native,
            "cycles_per_s_1_client": one,
            "cycles_per_s_64_clients": many,
        }),
        Err(e) => json!({ "permits": permits, "native": r.semaphore_native, "error": e }),
    });
    let semaphore_crowd = r
        .semaphore_crowd
        .as_ref()
        .map(|(holders, crowd)| match crowd {
            Ok(c) => json!({
                "holders": holders,
                "empty_p50_us": us(c.empty),
                "crowded_p50_us": us(c.crowded),
                "ratio": ratio(c.crowded, c.empty),
                "bytes_per_holder": c.bytes_per_holder.map(|(b, _)| b),
                "bytes_measured": c.bytes_per_holder.map(|(_, what)| what),
            }),
            Err(e) => json!({ "holders": holders, "error": e }),
        });
    let rw = r.rw.as_ref().map(|(clients, figures)| match figures {
        Ok(f) => json!({
            "clients": clients,
            "plain_p50_us": us(f.plain),
            "read_p50_us": us(f.read),
            "write_p50_us": us(f.write),
            "read_to_plain": ratio(f.read, f.plain),
            "write_to_plain": ratio(f.write, f.plain),
            "readers_cycles_per_s": f.readers_per_s,
            "plain_cycles_per_s": f.plain_per_s,
            "hold_ms": super::RW_HOLD.as_millis(),
        }),
        Err(e) => json!({ "clients": clients, "error": e }),
    });
    let replicas = r.replicas.as_ref().map(|measured| match measured {
        Ok((with, without)) => json!({
            "with_p50_us": us(*with),
            "without_p50_us": us(*without),
            "ratio": ratio(*with, *without),
        }),
        Err(e) => json!({ "error": e }),
    });
    json!({
        "store": r.store,
        "duration_s": r.duration.as_secs_f64(),
        "idle_listeners": r.idle_listeners,
        "floor_rtt_us": r.floor.map(us),
        "cycles_per_s": r.cycles_per_s(),
        "samples": r.cycles.len(),
        "p50_us": us(r.cycles.quantile(0.5)),
        "p99_us": us(r.cycles.quantile(0.99)),
        "p999_us": us(r.cycles.quantile(0.999)),
        "max_us": us(r.cycles.max()),
        "handoff_p50_us": us(r.handoffs.quantile(0.5)),
        "handoff_p99_us": us(r.handoffs.quantile(0.99)),
        "ratio_to_floor": r.ratio_to_floor(),
        "throughput": throughput,
        "scale": scale,
        "failover": failover,
        "keyspace": keyspace,
        "semaphore": semaphore,
        "semaphore_crowd": semaphore_crowd,
        "rw_lock": rw,
        "replicas": replicas,
        "latency_curves": { "cycle": curve(&r.cycles), "handoff": curve(&r.handoffs) },
    })
}

/// The table printed at the end of a run.
pub fn table(r: &Results) -> String {
    let mut out = String::new();
    let line = |out: &mut String, text: String| {
        let _ = writeln!(out, "{text}");
    };
    line(
        &mut out,
        format!(
            "lockward bench on {} ({:?} per measurement)",
            r.store, r.duration
        ),
    );
    if r.idle_listeners > 0 {
        line(
            &mut out,
            format!(
                "beside {} idle sessions of another program listening on an unrelated channel",
                r.idle_listeners
            ),
        );
    }
    line(
        &mut out,
        match r.floor {
            Some(f) => format!(
                "floor: one round trip of the cheapest write   {:>9.1} µs (median, taken between the cycles)",
                us(f)
            ),
            None => "floor: none (embedded store)".to_string(),
        },
    );
    let c = &r.cycles;
    line(
        &mut out,
        format!(
            "uncontended acquire+release  p50 {:>9.1} µs  p99 {:>9.1} µs  p99.9 {:>9.1} µs  {:>8.0} cycles/s",
            us(c.quantile(0.5)),
            us(c.quantile(0.99)),
            us(c.quantile(0.999)),
            r.cycles_per_s()
        ),
    );
    if let Some(ratio) = r.ratio_to_floor() {
        line(
            &mut out,
            format!("  of the floor (two round trips per cycle): {ratio:.2}"),
        );
    }
    let h = &r.handoffs;
    line(
        &mut out,
        format!(
            "handoff                      p50 {:>9.1} µs  p99 {:>9.1} µs{}",
            us(h.quantile(0.5)),
            us(h.quantile(0.99)),
            r.floor.map_or(String::new(), |f| format!(
                "  ({:.1} floor round trips)",
                us(h.quantile(0.5)) / us(f)
            ))
        ),
    );
    for t in &r.throughput {
        line(
            &mut out,
            format!(
                "{:>4} clients, {:<8} names  {:>9.0} cycles/s  per client {}–{}  longest wait {:.1} ms",
                t.clients,
                if t.same_name { "one" } else { "distinct" },
                t.cycles_per_s,
                t.fewest,
                t.most,
                ms(t.longest_wait)
            ),
        );
    }
    match &r.scale {
        Some(Ok(s)) => {
            line(
                &mut out,
                format!(
                    "{} locks held at once: taken at {:.0}/s",
                    s.locks, s.acquisitions_per_s
                ),
            );
            if let Some((bytes, what)) = s.bytes_per_lock {
                let bare = s.bare_key_bytes.map_or(String::new(), |k| {
                    format!("; a bare SET NX PX key {k:.0} B: {:.2}×", bytes / k)
                });
                line(
                    &mut out,
                    format!("  server bytes per lock ({what}) {bytes:.0} B{bare}"),
                );
            }
            line(
                &mut out,
                format!(
                    "  while held: uncontended cycles {:.0}/s, p50 {:.1} µs",
                    s.cycles_while_held.len() as f64 / r.duration.as_secs_f64(),
                    us(s.cycles_while_held.quantile(0.5))
                ),
            );
            if let Some(why) = &s.stopped {
                line(&mut out, format!("  stopped early: {why}"));
            }
        }
        Some(Err(e)) => line(&mut out, format!("scale: {e}")),
        None => {}
    }
    match &r.failover {
        Some(Ok(f)) => line(
            &mut out,
            format!(
                "leader failover (lockward elect, lease {:?}): after kill -9 {:.0} ms (median of {}: {}), after resign {:.1} ms",
                r.failover_lease,
                ms(f.after_kill),
                f.kills.len(),
                f.kills.iter().map(|d| format!("{:.0}", ms(*d))).collect::<Vec<_>>().join(", "),
                ms(f.after_resign)
            ),
        ),
        Some(Err(e)) => line(&mut out, format!("leader failover: {e}")),
        None => {}
    }
    match &r.semaphore {
        Some((permits, Ok((one, many)))) => line(
            &mut out,
            format!("semaphore of {permits} permits: 1 client {one:.0} cycles/s, 64 clients {many:.0} cycles/s"),
        ),
        Some((_, Err(e))) => line(&mut out, format!("semaphore: {e}")),
        None => {}
    }
    match &r.semaphore_crowd {
        Some((holders, Ok(c))) => line(
            &mut out,
            format!(
                "semaphore acquire+release (median): empty {:.0} µs, beside {holders} holders {:.0} µs ({:.2}×){}",
                us(c.empty),
                us(c.crowded),
                ratio(c.crowded, c.empty),
                c.bytes_per_holder
                    .map(|(b, what)| format!("; {b:.0} bytes per holder ({what})"))
                    .unwrap_or_default()
            ),
        ),
        Some((holders, Err(e))) => line(&mut out, format!("semaphore beside {holders} holders: {e}")),
        None => {}
    }
    match &r.rw {
        Some((clients, Ok(f))) => line(
            &mut out,
            format!(
                "read-write lock (median, uncontended): plain {:.0} µs, read {:.0} µs ({:.1}×), write {:.0} µs ({:.1}×); \
                 {clients} handles holding {} ms: {:.0} reads/s together against {:.0} plain cycles/s queued",
                us(f.plain),
                us(f.read),
                ratio(f.read, f.plain),
                us(f.write),
                ratio(f.write, f.plain),
                super::RW_HOLD.as_millis(),
                f.readers_per_s,
                f.plain_per_s
            ),
        ),
        Some((_, Err(e))) => line(&mut out, format!("read-write lock: {e}")),
        None => {}
    }
    match &r.replicas {
        Some(Ok((with, without))) => line(
            &mut out,
            format!(
                "replicas= (median cycle, taken in turn): {:.0} µs with it, {:.0} µs without ({:.2}×)",
                us(*with),
                us(*without),
                ratio(*with, *without)
            ),
        ),
        Some(Err(e)) => line(&mut out, format!("replicas=: {e}")),
        None => {}
    }
    match &r.keyspace {
        Some((n, Ok(costs))) => {
            line(
                &mut out,
                format!("point operations beside {n} unrelated keys (median, before → after):"),
            );
            for c in costs {
                line(
                    &mut out,
                    format!(
                        "  {:<24} {:8.1} µs → {:8.1} µs  {:.2}×",
                        c.operation,
                        us(c.empty),
                        us(c.full),
                        c.ratio()
                    ),
                );
            }
        }
        Some((_, Err(e))) => line(&mut out, format!("keyspace: {e}")),
        None => {}
    }
    out
}

/// Latency by percentile (cycle, handoff, cycle while many are held) and
/// throughput against clients (one name, distinct names).
pub fn svg(r: &Results) -> String {
    let mut latency = vec![
        latency_series("acquire+release", &r.cycles.curve()),
        latency_series("handoff", &r.handoffs.curve()),
    ];
    if let Some(Ok(s)) = &r.scale {
        let label = format!("acquire+release, {} held", s.locks);
        latency.push(latency_series(&label, &s.cycles_while_held.curve()));
    }
    let mut throughput = Vec::new();
    for (same, label) in [(true, "one name"), (false, "distinct names")] {
        let points: Vec<(f64, f64)> = r
            .throughput
            .iter()
            .filter(|t| t.same_name == same)
            .map(|t| (t.clients as f64, t.cycles_per_s))
            .collect();
        if !points.is_empty() {
            throughput.push(Series {
                label: label.to_string(),
                points,
            });
        }
    }
    render(
        &format!("lockward bench: {}", r.store),
        &latency,
        &throughput,
    )
}

/// `a / b`, 0 when `b` is zero.
fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}
