//! A store of rows' [`Cursor`]: a session read a page of rows at a time
//! (SQLite and PostgreSQL alike).
//!
//! The session is classified from its commit row on ([`scan::tail_scan`]:
//! the rows a writer's open reads, whatever the session's length), which
//! gives the kept tail's events. The rows before that span — every one of
//! them committed, since the commit row follows — are then read in pages
//! of [`PAGE`] rows, each row decoded when its page is reached, its first
//! seq checked to be the next one. A row that does not decode or breaks the
//! seq chain is refused as the full scan refuses it
//! ([`scan::committed_row_refusal`], `before-a-later-commit`): the read
//! ends there, every event lent before it intact. So a whole-session read
//! holds one page of rows and one row's events, besides the tail.
//!
//! A session with a row whose `seq` column is not a non-negative integer
//! (only damage makes one) is read by the full scan instead, which refuses
//! it with the same words as every other read.

use std::collections::VecDeque;
use std::path::PathBuf;

use super::codec::{self, RowIn};
use super::scan::{self, Rows, sql_seq};
use crate::error::Result;
use crate::event::Event;
use crate::scan::CutReason;
use crate::view::{Cursor, EventRef, Held, LogReader};

/// Rows a page holds.
pub(crate) const PAGE: usize = 512;

/// Fetches one page of a session's rows: at most the limit, `seq` column
/// in `[lo, hi)`, in seq order, each page in a read transaction of its own.
pub(crate) type Fetch = Box<dyn FnMut(i64, i64, usize) -> Result<Vec<RowIn>> + Send>;

/// The reader of the session `src` reads (through `fetch` for the rows
/// before its tail).
pub(crate) fn reader(src: &dyn Rows, fetch: Fetch) -> Result<LogReader> {
    let header = src.header().clone();
    if src.count_before(0) > 0 {
        let c = scan::full_scan(src)?;
        return Ok(LogReader::of_scan(c.scan, Box::new(Held::new(c.events))));
    }
    let mut c = scan::tail_scan(src)?;
    // The tail span's bytes are not the session's.
    c.scan.bytes = src.data_bytes()?;
    let stored = c.scan.stored_len();
    // The tail span's events start at its first seq; everything before it
    // is paged.
    let prefix_end = c.events.first().map_or(stored, Event::seq);
    let cursor = RowsCursor {
        fetch,
        path: src.path().to_owned(),
        id: header.id.clone(),
        next: 0,
        prefix_end,
        next_key: 0,
        rows_read: 0,
        page: VecDeque::new(),
        decoded: Vec::new(),
        decoded_next: 0,
        tail: c.events,
        tail_next: 0,
        ready: Ready::End,
    };
    Ok(LogReader::of_scan(c.scan, Box::new(cursor)))
}

/// Where the next event is.
enum Ready {
    Decoded(usize),
    Tail(usize),
    End,
}

struct RowsCursor {
    fetch: Fetch,
    path: PathBuf,
    id: String,
    /// The seq the next row must start with, and the tail span's first.
    next: u64,
    prefix_end: u64,
    /// The `seq` column the next page starts at.
    next_key: i64,
    /// Rows taken from pages so far (a row's position, for messages).
    rows_read: u64,
    page: VecDeque<RowIn>,
    /// The events of the last row decoded, and the next of them.
    decoded: Vec<Event>,
    decoded_next: usize,
    /// The tail span's kept events, and the next of them.
    tail: Vec<Event>,
    tail_next: usize,
    /// The event advanced to.
    ready: Ready,
}

impl RowsCursor {
    fn step(&mut self) -> Result<Ready> {
        loop {
            if self.decoded_next < self.decoded.len() {
                self.decoded_next += 1;
                return Ok(Ready::Decoded(self.decoded_next - 1));
            }
            if self.next < self.prefix_end {
                let row = match self.page.pop_front() {
                    Some(row) => row,
                    None => {
                        // The commit row itself is fetched too: rows that
                        // stop short of it are a gap at it.
                        let hi = sql_seq(self.prefix_end) + 1;
                        let page = (self.fetch)(self.next_key, hi, PAGE)?;
                        if page.is_empty() {
                            return Err(self.refusal(
                                sql_seq(self.prefix_end),
                                CutReason::Invalid,
                                format!("rows end before seq {}", self.prefix_end),
                            ));
                        }
                        self.page = page.into();
                        continue;
                    }
                };
                let key = row.seq_key();
                self.next_key = key.saturating_add(1);
                let events = match codec::decode_row(&row) {
                    Ok(events) if events[0].seq() == self.next => events,
                    Ok(events) => {
                        let detail =
                            format!("row holds seq {}, expected {}", events[0].seq(), self.next);
                        return Err(self.refusal(key, CutReason::Invalid, detail));
                    }
                    Err(e) => return Err(self.refusal(key, e.reason, e.detail)),
                };
                self.rows_read += 1;
                self.next += events.len() as u64;
                self.decoded = events;
                self.decoded_next = 0;
                continue;
            }
            if self.tail_next < self.tail.len() {
                self.tail_next += 1;
                return Ok(Ready::Tail(self.tail_next - 1));
            }
            return Ok(Ready::End);
        }
    }

    fn refusal(&self, key: i64, reason: CutReason, detail: String) -> crate::error::Error {
        scan::committed_row_refusal(
            &self.path,
            &self.id,
            self.rows_read,
            key,
            self.next,
            reason,
            &detail,
        )
    }
}

impl Cursor for RowsCursor {
    fn advance(&mut self) -> Result<bool> {
        self.ready = self.step()?;
        Ok(!matches!(self.ready, Ready::End))
    }

    fn current(&self) -> Option<EventRef<'_>> {
        match self.ready {
            Ready::Decoded(i) => Some(EventRef::from(&self.decoded[i])),
            Ready::Tail(i) => Some(EventRef::from(&self.tail[i])),
            Ready::End => None,
        }
    }
}
