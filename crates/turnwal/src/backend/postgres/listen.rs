//! Followers of a PostgreSQL store wait on `LISTEN`: every turnwal write
//! of a session (a create, an append, a repair, a delete) sends
//! `pg_notify('turnwal', <session id>)` in its own transaction, which the
//! server delivers when it commits (docs/POSTGRES.md, "Following").

use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use crate::error::Result;
use crate::storage::watch::{RECHECK_INTERVAL, Watch};

/// How long a follower's (re)connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The channel every turnwal writer notifies.
pub(crate) const CHANNEL: &str = "turnwal";

/// The payload of a notification for session `id`, as SQL over parameter
/// `$n`: the id, or an empty payload ("some session") for an id too long
/// for one (the server refuses payloads of 8000 bytes or more).
pub(crate) fn payload_sql(n: usize) -> String {
    format!("CASE WHEN octet_length(${n}) < 7900 THEN ${n} ELSE '' END")
}

/// A connection of its own that listens on [`CHANNEL`].
pub(crate) struct Listen {
    url: String,
    idle_in_transaction: Duration,
    /// `None` after the connection failed: the next wait connects again.
    client: Option<postgres::Client>,
    /// The session waited for; `None`: any.
    id: Option<String>,
}

impl Listen {
    pub(crate) fn new(
        url: &str,
        idle_in_transaction: Duration,
        id: Option<&str>,
    ) -> Result<Listen> {
        let mut listen = Listen {
            url: url.to_owned(),
            idle_in_transaction,
            client: None,
            id: id.map(str::to_owned),
        };
        listen.client = Some(listen.connect()?);
        Ok(listen)
    }

    fn connect(&self) -> Result<postgres::Client> {
        let mut client =
            super::connect_within(&self.url, self.idle_in_transaction, Some(CONNECT_TIMEOUT))?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(|e| super::pg_error("listen", &super::location_of(&self.url), e))?;
        Ok(client)
    }
}

impl Watch for Listen {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let Some(client) = self.client.as_mut() else {
            // Lost: listen again. What was sent meanwhile is unknown, so
            // this is a sign (the follower looks).
            std::thread::sleep(timeout);
            self.client = self.connect().ok();
            return Ok(true);
        };
        let id = &self.id;
        let (seen, failed) = {
            let mut notes = client.notifications();
            let mut seen = false;
            let mut failed = false;
            // What came already, without waiting.
            {
                let mut queued = notes.iter();
                loop {
                    match queued.next() {
                        Ok(Some(n)) => seen |= payload_concerns(id, n.payload()),
                        Ok(None) => break,
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
            }
            while !seen && !failed {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match notes.timeout_iter(left).next() {
                    Ok(Some(n)) => seen |= payload_concerns(id, n.payload()),
                    Ok(None) => break,
                    Err(_) => failed = true,
                }
            }
            (seen, failed)
        };
        if failed {
            self.client = None;
            return Ok(true);
        }
        Ok(seen)
    }

    fn recheck(&self) -> Duration {
        RECHECK_INTERVAL
    }
}

fn payload_concerns(id: &Option<String>, payload: &str) -> bool {
    payload.is_empty() || id.as_deref().is_none_or(|id| id == payload)
}
