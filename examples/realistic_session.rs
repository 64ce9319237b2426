//! Writes a realistic session ([`turnwal_testkit::workload::realistic`]: mostly
//! streamed deltas, as harness sessions are) as JSONL event lines on
//! stdout, to try a store on the sessions it will hold:
//!
//! ```text
//! cargo run --release --example realistic_session -- 100 > session.jsonl   # 100 MB
//! turnwal -s jsonl:/tmp/root append --create s1 --sync never < session.jsonl
//! ```
//!
//! Arguments: the size in MB of raw JSONL (default 10) and the seed
//! (default 27, the bench's).

use std::io::Write;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mb: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(27);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for turn in turnwal_testkit::workload::realistic::turns_of_size(seed, mb << 20) {
        for event in turn {
            out.write_all(event.to_json().as_bytes())?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()
}
