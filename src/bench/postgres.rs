//! The PostgreSQL store measured against what it is built on (issue 18,
//! docs/POSTGRES.md "Figures"): durable turns and buffered appends against
//! bare inserts of the same rows through the same driver (one transaction
//! per batch, synchronous commit) and against the SQLite backend's durable
//! turns; tail reads and writer reopens on a session of a thousand events
//! against one of a million; listing ten thousand sessions against reading
//! their headers alone. Every side runs against the server at the URL
//! given (`turnwal bench --postgres URL`, or `cargo bench --bench postgres`,
//! which starts a throwaway cluster).

use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use super::fixtures::AppendFixture;
use super::measure::{Engine, Feed, StoreAppend};
use super::{BenchResult, Comparison, Side};
use turnwal::backend::SyncMode;
use turnwal::backend::postgres::epoch::{self, Row};
use turnwal::backend::sqlite::Synchronous;
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::store::{Store, StoreOptions};

fn client(url: &str) -> BenchResult<Client> {
    Ok(Client::connect(url, NoTls)?)
}

/// A unique session id for one run of a side.
fn run_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// turnwal's PostgreSQL store appending a fixture's turns, one batch (one
/// transaction) per turn, into a new session each run.
pub struct PgAppend<'a> {
    fx: &'a AppendFixture,
    url: String,
    feed: Feed,
    latencies: Vec<Duration>,
}

impl Side for PgAppend<'_> {
    fn name(&self) -> &str {
        "turnwal_postgres"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let sync = match self.feed {
            Feed::Durable => SyncMode::Turn,
            Feed::Buffered | Feed::Ingest => SyncMode::Never,
        };
        let store = Store::open_postgres(
            &self.url,
            StoreOptions {
                sync,
                ..StoreOptions::default()
            },
        )?;
        let id = run_id("append");
        store.create(SessionHeader::new(id.clone(), 1_700_000_000_000))?;
        store.append(&id, &self.fx.first)?;
        let start = Instant::now();
        for turn in &self.fx.turns {
            let t = Instant::now();
            store.append(&id, turn)?;
            self.latencies.push(t.elapsed());
        }
        Ok(start.elapsed())
    }

    fn latencies(&self) -> &[Duration] {
        &self.latencies
    }
}

/// The same rows turnwal stores (its row encoding, runs of chunk deltas
/// packed), inserted through the same driver with nothing else: one
/// statement (one round trip) and one transaction per turn, the server's
/// synchronous commit, no session row, no checks.
pub struct BareInsert {
    url: String,
    turns: Vec<Vec<Row>>,
    latencies: Vec<Duration>,
}

impl BareInsert {
    fn new(fx: &AppendFixture, url: &str) -> BenchResult<BareInsert> {
        let turns = fx
            .turns
            .iter()
            .map(|t| turnwal::backend::postgres::encode(t))
            .collect::<Result<_, _>>()?;
        Ok(BareInsert {
            url: url.to_owned(),
            turns,
            latencies: Vec::new(),
        })
    }
}

impl Side for BareInsert {
    fn name(&self) -> &str {
        "postgres_bare_insert"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let mut client = client(&self.url)?;
        let id = run_id("bare");
        let start = Instant::now();
        for turn in &self.turns {
            let t = Instant::now();
            epoch::insert_alone(&mut client, &id, turn)?;
            self.latencies.push(t.elapsed());
        }
        Ok(start.elapsed())
    }

    fn latencies(&self) -> &[Duration] {
        &self.latencies
    }
}

/// Durable turns: turnwal's PostgreSQL store, bare inserts of its rows,
/// and turnwal's SQLite backend (`synchronous=FULL`) in `scratch`.
pub fn durable<'a>(
    fx: &'a AppendFixture,
    url: &str,
    scratch: &std::path::Path,
) -> BenchResult<Comparison<'a>> {
    Ok(Comparison {
        name: "postgres_durable_turns".into(),
        events: fx.events,
        bytes: fx.jsonl_bytes,
        ops: Some((fx.turns.len() as u64, "turns")),
        sides: vec![
            Box::new(PgAppend {
                fx,
                url: url.to_owned(),
                feed: Feed::Durable,
                latencies: Vec::new(),
            }),
            Box::new(BareInsert::new(fx, url)?),
            Box::new(StoreAppend::on(
                fx,
                scratch,
                Feed::Durable,
                Engine::Sqlite(Synchronous::Full),
            )),
        ],
    })
}

/// Buffered appends (`--sync never`; every PostgreSQL commit is durable
/// anyway): turnwal's PostgreSQL store against bare inserts of its rows.
pub fn buffered<'a>(fx: &'a AppendFixture, url: &str) -> BenchResult<Comparison<'a>> {
    Ok(Comparison {
        name: "postgres_buffered_append".into(),
        events: fx.events,
        bytes: fx.jsonl_bytes,
        ops: None,
        sides: vec![
            Box::new(PgAppend {
                fx,
                url: url.to_owned(),
                feed: Feed::Buffered,
                latencies: Vec::new(),
            }),
            Box::new(BareInsert::new(fx, url)?),
        ],
    })
}

/// A session of at least `events` events (whole turns of the bench
/// workload) in the store at `url`, written in batches of about 50,000
/// events (each sent with `COPY`); its id and length.
pub fn session_of(url: &str, events: u64, seed: u64) -> BenchResult<(String, u64)> {
    let store = Store::open_postgres(url, StoreOptions::default())?;
    let id = run_id(&format!("session{events}"));
    store.create(SessionHeader::new(id.clone(), 1_700_000_000_000).with_cwd("/work"))?;
    let mut workload = super::workload::Workload::new(seed);
    let mut batch: Vec<Event> = Vec::new();
    while workload.next_seq() < events {
        batch.extend(workload.next_turn());
        if batch.len() >= 50_000 || workload.next_seq() >= events {
            store.append(&id, &batch)?;
            batch.clear();
        }
    }
    store.close(&id)?;
    Ok((id, workload.next_seq()))
}

/// The last `n` events of a session (`Store::read_last` on an open store).
struct Tail {
    store: Store,
    id: String,
    n: u64,
    name: String,
}

impl Side for Tail {
    fn name(&self) -> &str {
        &self.name
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let events = self.store.read_last(&self.id, self.n)?;
        let elapsed = start.elapsed();
        if events.len() as u64 != self.n {
            return Err(format!("read {} of the last {} events", events.len(), self.n).into());
        }
        Ok(elapsed)
    }
}

/// Reopening a writer: `Store::resume` of a clean session on a fresh store
/// (a new connection: the writer epoch taken, where appends continue found).
struct Reopen {
    url: String,
    id: String,
    name: String,
}

impl Side for Reopen {
    fn name(&self) -> &str {
        &self.name
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let store = Store::open_postgres(&self.url, StoreOptions::default())?;
        let start = Instant::now();
        store.resume(&self.id)?;
        Ok(start.elapsed())
    }
}

/// Tail reads of 50 events and writer reopens on the session `large`
/// against `small` (ids of [`session_of`]); the target: within 2×.
pub fn by_length<'a>(
    url: &str,
    large: (&str, u64),
    small: (&str, u64),
) -> BenchResult<[Comparison<'a>; 2]> {
    let label = |events: u64| format!("postgres_{}", super::measure::count_label(events));
    let tail = |(id, events): (&str, u64)| -> BenchResult<Box<dyn Side + 'a>> {
        Ok(Box::new(Tail {
            store: Store::open_postgres(url, StoreOptions::default())?,
            id: id.to_owned(),
            n: 50,
            name: label(events),
        }))
    };
    let reopen = |(id, events): (&str, u64)| -> Box<dyn Side + 'a> {
        Box::new(Reopen {
            url: url.to_owned(),
            id: id.to_owned(),
            name: label(events),
        })
    };
    Ok([
        Comparison {
            name: "postgres_tail_read_50".into(),
            events: 50,
            bytes: 0,
            ops: None,
            sides: vec![tail(large)?, tail(small)?],
        },
        Comparison {
            name: "postgres_reopen_writer".into(),
            events: 0,
            bytes: 0,
            ops: Some((1, "reopens")),
            sides: vec![reopen(large), reopen(small)],
        },
    ])
}

/// `sessions` sessions of one turn each in the database at `url`,
/// written the way turnwal writes them (its session rows and row
/// encoding) in one transaction, the rows sent with `COPY`.
pub fn many_sessions(url: &str, sessions: usize, seed: u64) -> BenchResult<()> {
    let mut client = client(url)?;
    turnwal::backend::postgres::ensure_schema(&mut client, url)?;
    let mut tx = client.transaction()?;
    for i in 0..sessions {
        let id = format!("list-{}-{i:05}", std::process::id());
        let turn = super::workload::Workload::new(seed.wrapping_add(i as u64)).turn_of(20, true);
        let header = SessionHeader::new(id.clone(), 1_700_000_000_000 + i as u64).with_cwd("/work");
        let rows = turnwal::backend::postgres::encode(&turn)?;
        tx.execute(
            "INSERT INTO turnwal_sessions (session_id, header, policy, incarnation, next_seq, \
             revision, data_bytes, writer_epoch) VALUES ($1, $2, 'strict', $3, $4, 1, $5, 1)",
            &[
                &id,
                &header.to_json(),
                &format!("{i:032x}"),
                &(turn.len() as i64),
                &Row::bytes(&rows),
            ],
        )?;
        epoch::insert_rows(&mut tx, url, &id, &rows)?;
    }
    tx.commit()?;
    Ok(())
}

/// `Store::list` on a fresh store.
struct List {
    url: String,
    sessions: usize,
}

impl Side for List {
    fn name(&self) -> &str {
        "turnwal_postgres"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let store = Store::open_postgres(&self.url, StoreOptions::default())?;
        let start = Instant::now();
        let listed = store.list()?;
        let elapsed = start.elapsed();
        if listed.len() < self.sessions {
            return Err(format!("listed {} of {} sessions", listed.len(), self.sessions).into());
        }
        Ok(elapsed)
    }
}

/// Reading every session's header alone: what a listing cannot do with
/// less.
struct Headers {
    url: String,
    sessions: usize,
}

impl Side for Headers {
    fn name(&self) -> &str {
        "postgres_headers_only"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let mut client = client(&self.url)?;
        let start = Instant::now();
        let rows = client.query("SELECT session_id, header FROM turnwal_sessions", &[])?;
        let headers: Vec<SessionHeader> = rows
            .iter()
            .map(|r| SessionHeader::from_json(r.get(1)))
            .collect::<Result<_, _>>()
            .map_err(|e| e.0)?;
        let elapsed = start.elapsed();
        if headers.len() < self.sessions {
            return Err(format!("read {} of {} headers", headers.len(), self.sessions).into());
        }
        Ok(elapsed)
    }
}

/// Listing the store at `url`, which holds at least the `sessions`
/// sessions [`many_sessions`] wrote.
pub fn list<'a>(url: &str, sessions: usize) -> Comparison<'a> {
    Comparison {
        name: format!(
            "postgres_list/{}",
            super::measure::count_label(sessions as u64)
        ),
        events: 0,
        bytes: 0,
        ops: Some((sessions as u64, "sessions")),
        sides: vec![
            Box::new(List {
                url: url.to_owned(),
                sessions,
            }),
            Box::new(Headers {
                url: url.to_owned(),
                sessions,
            }),
        ],
    }
}

/// The keys of [`Report::ratios`] with the target for each
/// (turnwal's speed over the baseline's must be at least this; for the
/// by-length pairs, the large session's over the small one's).
pub const TARGETS: [(&str, f64); 5] = [
    ("postgres_durable_vs_bare_insert", 0.8),
    ("postgres_append_vs_bare_insert", 0.8),
    ("postgres_durable_vs_turnwal_sqlite", 1.0),
    ("postgres_tail_read_large_vs_small", 0.5),
    ("postgres_reopen_large_vs_small", 0.5),
];

/// The bound on listing 10,000 sessions, in milliseconds.
pub const LIST_TARGET_MS: f64 = 200.0;

/// What `turnwal bench --postgres URL` measured.
pub struct Report {
    /// Every comparison, in the order run.
    pub outcomes: Vec<super::Outcome>,
    /// Keyed as in [`TARGETS`].
    pub ratios: Vec<(&'static str, f64)>,
    /// The median of listing the store, in milliseconds.
    pub list_ms: f64,
}

/// Runs every PostgreSQL comparison on the database at `url` (`quick`:
/// fewer turns and runs, a large session of 100,000 events instead of a
/// million), with the SQLite side's files in `scratch`.
pub fn run(
    url: &str,
    quick: bool,
    scratch: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> BenchResult<Report> {
    let (turns, reps, large_events, tail_reps) = if quick {
        (30, 5, 100_000, 201)
    } else {
        (60, 11, 1_000_000, 1001)
    };
    progress("postgres: durable turns");
    let fx = AppendFixture::new(2, turns);
    let durable = durable(&fx, url, scratch)?.run(reps)?;
    progress("postgres: buffered appends");
    let buffered = buffered(&fx, url)?.run(reps)?;
    progress("postgres: writing the sessions to read");
    let large = session_of(url, large_events, 3)?;
    let small = session_of(url, 1_000, 4)?;
    progress("postgres: tail reads and reopens");
    let [mut tail, mut reopen] = by_length(url, (&large.0, large.1), (&small.0, small.1))?;
    let tail = tail.run(tail_reps)?;
    let reopen = reopen.run(tail_reps / 4)?;
    progress("postgres: writing 10,000 sessions to list");
    many_sessions(url, 10_000, 6)?;
    progress("postgres: listing");
    let listing = list(url, 10_000).run(reps)?;
    // The baseline's median over turnwal's (the first side's).
    let ratio_of = |o: &super::Outcome, i: usize| o.ratio(&o.sides[i].name);
    let ratios = vec![
        (TARGETS[0].0, ratio_of(&durable, 1)),
        (TARGETS[1].0, ratio_of(&buffered, 1)),
        (TARGETS[2].0, ratio_of(&durable, 2)),
        (TARGETS[3].0, ratio_of(&tail, 1)),
        (TARGETS[4].0, ratio_of(&reopen, 1)),
    ];
    let list_ms = listing.sides[0].median().as_secs_f64() * 1e3;
    Ok(Report {
        outcomes: vec![durable, buffered, tail, reopen, listing],
        ratios,
        list_ms,
    })
}

impl Report {
    /// Every comparison's table, then the ratios against their targets.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for o in &self.outcomes {
            out.push_str(&o.table());
            out.push('\n');
        }
        for ((key, ratio), (_, target)) in self.ratios.iter().zip(TARGETS) {
            let met = if *ratio >= target { "met" } else { "NOT MET" };
            out.push_str(&format!("{key}: {ratio:.2}× (target ≥ {target}×, {met})\n"));
        }
        let met = if self.list_ms <= LIST_TARGET_MS {
            "met"
        } else {
            "NOT MET"
        };
        out.push_str(&format!(
            "postgres_list_10k: {:.1} ms (target ≤ {LIST_TARGET_MS} ms, {met})\n",
            self.list_ms
        ));
        out
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ratios": self.ratios.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "targets": TARGETS.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "list_10k_ms": self.list_ms,
            "list_10k_target_ms": LIST_TARGET_MS,
            "results": self.outcomes.iter().map(super::Outcome::to_json).collect::<Vec<_>>(),
        })
    }
}
