//! Nothing to link: this crate holds `benches/side_by_side`, which runs
//! lockward, `rslock` and `distributed-lock` against the same Redis and
//! PostgreSQL in one run and prints the ratios.
//!
//! `cargo bench -p lockward-compare`
