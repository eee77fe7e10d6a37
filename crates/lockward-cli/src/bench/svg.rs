//! `bench --svg FILE`: two plots in one SVG, latency by percentile (on a
//! "nines" axis, log latency) and throughput against clients.

use std::fmt::Write;
use std::time::Duration;

/// One line of a plot.
pub struct Series {
    pub label: String,
    /// `(x, y)` in the plot's own units.
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 460.0;
const H: f64 = 320.0;
const COLORS: [&str; 5] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];

/// Percentile to the nines axis: 0 → 0, 0.9 → 1, 0.99 → 2, …; the maximum
/// sits half a step right of 99.99%.
pub fn nines(q: f64) -> f64 {
    if q >= 1.0 {
        4.5
    } else {
        (-(1.0 - q).log10()).min(4.0)
    }
}

/// A latency curve from `(quantile, latency)` points: x in nines, y in µs.
pub fn latency_series(label: &str, curve: &[(f64, Duration)]) -> Series {
    Series {
        label: label.to_string(),
        points: curve
            .iter()
            .map(|(q, d)| (nines(*q), (d.as_secs_f64() * 1e6).max(0.1)))
            .collect(),
    }
}

/// The whole picture: `title` on top, latency at left, throughput at right.
pub fn render(title: &str, latency: &[Series], throughput: &[Series]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">"#,
        2.0 * W + 20.0,
        H + 40.0
    );
    let _ = write!(
        svg,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="14">{}</text>"#,
        escape(title)
    );
    let x_ticks: Vec<(f64, String)> = [
        (0.0, "p0"),
        (1.0, "p90"),
        (2.0, "p99"),
        (3.0, "p99.9"),
        (4.0, "p99.99"),
        (4.5, "max"),
    ]
    .iter()
    .map(|(x, l)| (*x, l.to_string()))
    .collect();
    panel(
        &mut svg,
        0.0,
        "latency (µs, log) by percentile",
        latency,
        (0.0, 4.5, x_ticks),
    );
    let max_clients = throughput
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let mut ticks = Vec::new();
    let mut c = 1.0;
    while c <= max_clients * 1.01 {
        ticks.push((c.log2(), format!("{c}")));
        c *= 4.0;
    }
    let log2: Vec<Series> = throughput
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .map(|(x, y)| (x.log2(), y.max(0.1)))
                .collect(),
        })
        .collect();
    panel(
        &mut svg,
        W + 20.0,
        "cycles/s (log) against clients",
        &log2,
        (0.0, max_clients.log2().max(1.0), ticks),
    );
    svg.push_str("</svg>\n");
    svg
}

/// An x axis: from, to, and labelled ticks.
type Axis = (f64, f64, Vec<(f64, String)>);

/// One plot at horizontal offset `left`: x as given, y on a log10 scale
/// fitted to the data.
fn panel(svg: &mut String, left: f64, title: &str, series: &[Series], x: Axis) {
    let (x0, x1, x_ticks) = x;
    let (pl, pr, pt, pb) = (left + 60.0, left + W - 10.0, 50.0, H);
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let (y0, y1) = if lo > hi {
        (0.0, 1.0)
    } else {
        (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        )
    };
    let sx = |v: f64| pl + (v - x0) / (x1 - x0).max(1e-9) * (pr - pl);
    let sy = |v: f64| pb - (v.log10() - y0) / (y1 - y0) * (pb - pt);
    let _ = write!(
        svg,
        r##"<text x="{pl}" y="40" font-size="12">{}</text><rect x="{pl}" y="{pt}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        escape(title),
        pr - pl,
        pb - pt
    );
    for (v, label) in &x_ticks {
        let _ = write!(
            svg,
            r##"<line x1="{0}" y1="{pt}" x2="{0}" y2="{pb}" stroke="#eee"/><text x="{0}" y="{1}" text-anchor="middle">{2}</text>"##,
            sx(*v),
            pb + 14.0,
            escape(label)
        );
    }
    let mut e = y0;
    while e <= y1 {
        let _ = write!(
            svg,
            r##"<line x1="{pl}" y1="{0}" x2="{pr}" y2="{0}" stroke="#eee"/><text x="{1}" y="{2}" text-anchor="end">{3}</text>"##,
            sy(10f64.powf(e)),
            pl - 4.0,
            sy(10f64.powf(e)) + 4.0,
            human(10f64.powf(e))
        );
        e += 1.0;
    }
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for p in &path {
            let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = write!(
                svg,
                r#"<circle cx="{cx}" cy="{cy}" r="2.5" fill="{color}"/>"#
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" fill="{color}">{}</text>"#,
            pl + 8.0,
            pt + 14.0 + 14.0 * i as f64,
            escape(&s.label)
        );
    }
}

/// 1, 10, 100, 1k, 10k, 100k, 1M …
fn human(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v => format!("{v}"),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_axis_places_percentiles_one_step_apart() {
        assert_eq!(nines(0.0), 0.0);
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(nines(1.0), 4.5);
    }

    #[test]
    fn render_draws_every_series_and_escapes_labels() {
        let lat = vec![latency_series(
            "cycle <a&b>",
            &[
                (0.5, Duration::from_micros(100)),
                (0.99, Duration::from_micros(900)),
            ],
        )];
        let thr = vec![Series {
            label: "one name".into(),
            points: vec![(1.0, 1000.0), (16.0, 4000.0)],
        }];
        let svg = render("t", &lat, &thr);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("cycle &lt;a&amp;b&gt;"));
        assert!(!svg.contains("NaN"), "{svg}");
    }
}
