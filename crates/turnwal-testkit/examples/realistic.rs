//! Prints a realistic session (the bench's workload: upstream's event
//! shapes, mostly streamed deltas) as JSONL, one event a line, so tools
//! outside Rust — the Node binding's `scripts/live-size.mjs` — measure on
//! the same session the benches use.
//!
//! `cargo run --release -p turnwal-testkit --example realistic -- SEED TURNS`

use std::io::Write;

use turnwal_testkit::workload::realistic::Realistic;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(seed), Some(turns)) = (
        args.next().and_then(|s| s.parse::<u64>().ok()),
        args.next().and_then(|s| s.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: realistic SEED TURNS");
        std::process::exit(2);
    };
    let mut session = Realistic::new(seed);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for _ in 0..turns {
        for event in session.next_turn() {
            writeln!(out, "{}", event.to_json())?;
        }
    }
    out.flush()
}
