//! The PostgreSQL store (issue 18) on a throwaway cluster this bench starts
//! (Debian's PostgreSQL, `initdb` in a temporary directory, a Unix socket,
//! `fsync` and `synchronous_commit` on; stopped and removed at the end):
//!
//! - durable turns: turnwal's PostgreSQL store vs bare inserts of the same
//!   rows through the same driver (one transaction per turn, synchronous
//!   commit) vs turnwal's SQLite backend (`synchronous=FULL`);
//! - buffered appends: the store vs the same bare inserts;
//! - the tail read of 50 events and a writer's reopen on a session of a
//!   million events (100,000 with `TURNWAL_BENCH_BIG=0`) vs one of a
//!   thousand;
//! - listing 10,000 sessions vs reading their headers alone.
//!
//! `cargo bench --bench postgres` (about two minutes).

mod harness;

#[allow(dead_code)]
#[path = "../tests/support/pg.rs"]
mod pg;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::AppendFixture;
use turnwal_cli::bench::postgres;

fn bench(c: &mut Criterion) {
    let cluster = pg::Cluster::start();
    let url = cluster.fresh_database();
    let scratch = ScratchDir::new().expect("a scratch directory");

    let fx = AppendFixture::new(2, 60);
    println!(
        "fixture: {} turns, {} events, {} bytes of JSONL",
        fx.turns.len(),
        fx.events,
        fx.jsonl_bytes
    );
    let durable = postgres::durable(&fx, &url, scratch.path()).expect("the sides");
    harness::compare(c, durable, harness::quick_group);
    let buffered = postgres::buffered(&fx, &url).expect("the sides");
    harness::compare(c, buffered, harness::quick_group);

    let large_events = if harness::big() { 1_000_000 } else { 100_000 };
    let large = postgres::session_of(&url, large_events, 3).expect("the large session");
    let small = postgres::session_of(&url, 1_000, 4).expect("the small session");
    println!("fixture: sessions of {} and {} events", large.1, small.1);
    let [tail, reopen] =
        postgres::by_length(&url, (&large.0, large.1), (&small.0, small.1)).expect("the sides");
    harness::compare(c, tail, harness::quick_group);
    harness::compare(c, reopen, harness::quick_group);

    let listing = cluster.fresh_database();
    postgres::many_sessions(&listing, 10_000, 6).expect("the sessions");
    harness::compare(c, postgres::list(&listing, 10_000), harness::quick_group);
}

criterion_group!(benches, bench);
criterion_main!(benches);
