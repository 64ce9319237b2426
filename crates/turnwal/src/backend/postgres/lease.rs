//! Keeping leases alive (docs/POSTGRES.md, "Leases"): a writer's lease is
//! extended by every batch it appends, and while it appends nothing — idle
//! between prompts, or blocked in a long tool call — by a renewal thread
//! of its store, not by the application. One thread per store, started
//! with its first writer and ended with its last; one statement renews
//! every lease of the store that is due, on a connection of its own (so a
//! renewal never waits behind a writer's batch).
//!
//! A renewal is due a third of a lease after the lease was last extended,
//! so two renewals in a row can fail (a server restart, a lost connection)
//! before the lease runs out. A writer whose process is paused or whose
//! host is cut off stops renewing with it: its lease runs out and another
//! host may take the session; the epoch then refuses the old writer's
//! next batch.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, MutexGuard};

use crate::sync::{Table, recovered};
use std::time::{Duration, Instant};

use super::epoch;
use crate::error::{Error, Result};

/// A lease's length when neither `TURNWAL_LEASE` nor an option sets one.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The shortest lease: a renewal every third of it must fit in.
pub const MIN_LEASE: Duration = Duration::from_secs(1);
/// The longest lease: how long a crashed writer may keep its session from
/// everyone else.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

/// How a PostgreSQL store's connections and writers behave.
///
/// ```
/// use std::time::Duration;
/// use turnwal::backend::postgres::PgOptions;
/// let options = PgOptions::default().with_lease(Duration::from_secs(3)).unwrap();
/// assert_eq!(options.lease(), Duration::from_secs(3));
/// assert!(PgOptions::default().with_lease(Duration::from_millis(10)).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgOptions {
    lease: Duration,
    idle_in_transaction: Duration,
}

impl Default for PgOptions {
    /// A lease of [`DEFAULT_LEASE`], [`super::IDLE_IN_TRANSACTION_TIMEOUT`].
    fn default() -> PgOptions {
        PgOptions {
            lease: DEFAULT_LEASE,
            idle_in_transaction: super::IDLE_IN_TRANSACTION_TIMEOUT,
        }
    }
}

impl PgOptions {
    /// The defaults, with the lease length `TURNWAL_LEASE` names when it is
    /// set (`3s`, `2m`; [`crate::duration::parse`]). A malformed or
    /// out-of-range value is refused, never ignored.
    pub fn from_env() -> Result<PgOptions> {
        match std::env::var("TURNWAL_LEASE") {
            Err(std::env::VarError::NotPresent) => Ok(PgOptions::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::InvalidArgument(
                "TURNWAL_LEASE is not valid UTF-8".into(),
            )),
            Ok(text) => {
                let length = crate::duration::parse(text.trim())
                    .map_err(|e| Error::InvalidArgument(format!("TURNWAL_LEASE: {e}")))?;
                PgOptions::default()
                    .with_lease(length)
                    .map_err(|e| Error::InvalidArgument(format!("TURNWAL_LEASE: {e}")))
            }
        }
    }

    /// These options with a lease of `length`, which must lie within
    /// [`MIN_LEASE`]..=[`MAX_LEASE`].
    pub fn with_lease(self, length: Duration) -> Result<PgOptions> {
        if !(MIN_LEASE..=MAX_LEASE).contains(&length) {
            return Err(Error::InvalidArgument(format!(
                "a lease of {} ms is outside {} ms to {} ms",
                length.as_millis(),
                MIN_LEASE.as_millis(),
                MAX_LEASE.as_millis()
            )));
        }
        Ok(PgOptions {
            lease: length,
            ..self
        })
    }

    /// These options with the given server-side limit on a transaction's
    /// idle time (at least one millisecond is used).
    pub fn with_idle_in_transaction(self, limit: Duration) -> PgOptions {
        PgOptions {
            idle_in_transaction: limit,
            ..self
        }
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The idle-in-transaction limit.
    pub fn idle_in_transaction(&self) -> Duration {
        self.idle_in_transaction
    }
}

/// One lease a writer of the store holds.
struct Held {
    incarnation: String,
    epoch: i64,
    /// When the lease was last extended (measured before the statement
    /// that extended it was sent).
    extended: Instant,
}

#[derive(Default)]
struct State {
    held: HashMap<String, Held>,
    /// Whether the renewal thread runs.
    running: bool,
    /// The store is gone: the thread ends.
    stopped: bool,
    /// Renewal statements sent (for the figures in docs/POSTGRES.md).
    statements: u64,
}

/// The renewal thread of one store, and the leases it keeps.
pub(crate) struct Keeper {
    url: String,
    location: String,
    options: PgOptions,
    state: Table<State>,
    wake: Condvar,
}

impl Keeper {
    pub(crate) fn new(url: &str, location: &str, options: PgOptions) -> Arc<Keeper> {
        Arc::new(Keeper {
            url: url.to_owned(),
            location: location.to_owned(),
            options,
            state: Table::new(State::default()),
            wake: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Keeps `id`'s lease (just taken or extended, at `extended`) alive
    /// from now on, starting the renewal thread if it is not running.
    pub(crate) fn hold(self: &Arc<Keeper>, id: &str, hold: &epoch::Hold, extended: Instant) {
        let mut state = self.lock();
        state.held.insert(
            id.to_owned(),
            Held {
                incarnation: hold.incarnation.clone(),
                epoch: hold.epoch,
                extended,
            },
        );
        if !state.running && !state.stopped {
            let keeper = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("turnwal-lease".into())
                .spawn(move || keeper.run());
            // Without a thread the lease is still extended by every batch;
            // an idle writer may then lose its session after a lease, and
            // is told so (Superseded) at its next batch.
            state.running = spawned.is_ok();
        }
    }

    /// `id`'s lease was extended by a batch that started at `extended`.
    pub(crate) fn extended(&self, id: &str, epoch: i64, extended: Instant) {
        if let Some(held) = self.lock().held.get_mut(id)
            && held.epoch == epoch
        {
            held.extended = extended;
        }
    }

    /// Stops renewing `id`'s lease held at `epoch`.
    pub(crate) fn let_go(&self, id: &str, epoch: i64) {
        let mut state = self.lock();
        if state.held.get(id).is_some_and(|h| h.epoch == epoch) {
            state.held.remove(id);
        }
    }

    /// Ends the renewal thread (the store is gone).
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
    }

    /// How many renewal statements were sent.
    pub(crate) fn statements(&self) -> u64 {
        self.lock().statements
    }

    fn period(&self) -> Duration {
        self.options.lease / 3
    }

    fn run(self: Arc<Keeper>) {
        let mut client: Option<postgres::Client> = None;
        let mut failures = 0u32;
        loop {
            let due: Vec<(String, String, i64)> = {
                let mut state = self.lock();
                loop {
                    if state.stopped || state.held.is_empty() {
                        state.running = false;
                        return;
                    }
                    let now = Instant::now();
                    // After a failure, try again soon (within the lease's
                    // remaining two thirds), not at once in a loop.
                    let backoff = if failures > 0 {
                        self.period() / 4
                    } else {
                        Duration::ZERO
                    };
                    let next = state
                        .held
                        .values()
                        .map(|h| h.extended + self.period())
                        .min()
                        .unwrap_or(now)
                        .max(now + backoff);
                    if next <= now {
                        break;
                    }
                    state = recovered(self.wake.wait_timeout(state, next - now)).0;
                }
                // Everything due within half a period goes in the same
                // statement.
                let horizon = Instant::now() + self.period() / 2;
                state
                    .held
                    .iter()
                    .filter(|(_, h)| h.extended + self.period() <= horizon)
                    .map(|(id, h)| (id.clone(), h.incarnation.clone(), h.epoch))
                    .collect()
            };
            let started = Instant::now();
            let renewed = self.renew(&mut client, &due);
            let mut state = self.lock();
            state.statements += 1;
            match renewed {
                Ok(renewed) => {
                    failures = 0;
                    for (id, _, epoch) in &due {
                        let Some(held) = state.held.get_mut(id) else {
                            continue;
                        };
                        if held.epoch != *epoch {
                            continue;
                        }
                        if renewed.contains(id) {
                            held.extended = started;
                        } else {
                            // Taken over or deleted: nothing to keep.
                            state.held.remove(id);
                        }
                    }
                }
                Err(_) => {
                    failures += 1;
                    client = None;
                }
            }
        }
    }

    fn renew(
        &self,
        client: &mut Option<postgres::Client>,
        due: &[(String, String, i64)],
    ) -> Result<Vec<String>> {
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            *client = Some(super::connect_only(
                &self.url,
                self.options.idle_in_transaction,
            )?);
        }
        let c = client.as_mut().expect("connected above");
        epoch::renew(c, &self.location, due, self.options.lease)
    }
}
