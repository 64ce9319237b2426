//! Each backend's own storage, read and written around the `Store`s: torn
//! tails left in the WAL log, the SQLite rows and the JSONL transcript,
//! and where packed rows and lines fall.

use std::path::{Path, PathBuf};

use super::TornTail;
use super::generator::TAGS;
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::backend::wal::WalBackend;
use turnwal::backend::wal::record;
use turnwal::event::Event;
use turnwal::store::{Store, StoreOptions};

/// A JSONL transcript taken apart: the bytes kept as they are (the header
/// line; in zstd mode its frame), then one batch per later zstd frame (raw
/// mode: the whole body as one batch), each its frame's bytes and
/// plaintext lines.
pub(super) struct JsonlFile {
    path: PathBuf,
    compression: Compression,
    head: Vec<u8>,
    /// (the frame's bytes, its lines without their newlines); raw: no
    /// frame bytes.
    batches: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

/// The complete lines of `plain`; a final fragment is dropped when
/// `torn` allows one.
fn split_lines(plain: &[u8], torn: bool) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = plain.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    let fragment = lines.pop().expect("split gives one piece at least");
    assert!(torn || fragment.is_empty(), "a batch ends a line");
    lines
}

fn members(line: &[u8]) -> Vec<Event> {
    turnwal::backend::jsonl::records::decode_line(line).expect("a stored JSONL line decodes")
}

/// One zstd frame holding `first`, then (after a flush: a block boundary)
/// `second`, cut inside what follows `first`: never before its first byte
/// nor after its last but one (`k` picks where, 0 to 255). Upstream's
/// reader of a torn final frame gets back exactly `first` (and at most a
/// part of `second` without its newline, if it was stored raw).
fn torn_frame(first: &[u8], second: &[u8], k: u8) -> Vec<u8> {
    use std::io::Write;
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("a zstd encoder");
    enc.include_checksum(true).expect("the checksum flag");
    enc.write_all(first).expect("compressing into memory");
    enc.flush().expect("a block boundary");
    let l1 = enc.get_ref().len();
    enc.write_all(second).expect("compressing into memory");
    let mut frame = enc.finish().expect("the frame ends");
    let rest = frame.len() - 4 - l1;
    assert!(rest >= 2, "a block follows the flush");
    frame.truncate(l1 + 1 + (rest - 2) * usize::from(k) / 255);
    frame
}

impl JsonlFile {
    /// The transcript of `id`, which must be there and must not be torn.
    pub(super) fn read(root: &Path, compression: Compression, id: &str) -> JsonlFile {
        JsonlFile::read_as_is(root, compression, id, false).expect("the JSONL log exists")
    }

    /// The transcript of `id` if there is one; with `torn`, a torn tail is
    /// left out (a final fragment, a torn final frame).
    pub(super) fn read_as_is(
        root: &Path,
        compression: Compression,
        id: &str,
        torn: bool,
    ) -> Option<JsonlFile> {
        let path = JsonlBackend::open(root, compression)
            .and_then(|b| b.find_log(id))
            .expect("the JSONL store opens")?;
        let bytes = std::fs::read(&path).expect("the JSONL log reads");
        let (head, batches) = match compression {
            Compression::None => {
                let end = bytes
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("a header line")
                    + 1;
                (
                    bytes[..end].to_vec(),
                    vec![(Vec::new(), split_lines(&bytes[end..], torn))],
                )
            }
            Compression::Zstd => {
                use turnwal::backend::jsonl::zstd::{decompress_frame, scan_frames};
                let scan = scan_frames(&bytes, usize::MAX).expect("the frames scan");
                assert!(torn || scan.torn_start.is_none(), "the log is not torn yet");
                let frames: Vec<Vec<u8>> = scan
                    .frames
                    .iter()
                    .map(|r| bytes[r.clone()].to_vec())
                    .collect();
                let batches = frames[1..]
                    .iter()
                    .map(|f| {
                        let plain = decompress_frame(f).expect("a frame decompresses");
                        (f.clone(), split_lines(&plain, false))
                    })
                    .collect();
                (frames[0].clone(), batches)
            }
        };
        Some(JsonlFile {
            path,
            compression,
            head,
            batches,
        })
    }

    fn last_line(&self) -> &[u8] {
        self.batches
            .iter()
            .rev()
            .find_map(|(_, lines)| lines.last())
            .expect("a log with events has lines")
    }

    pub(super) fn last_line_is_packed(&self) -> bool {
        members(self.last_line()).len() > 1
    }

    /// Every seq within one of where a packed row starts or ends.
    pub(super) fn packed_edges(&self, stored: u64) -> Vec<u64> {
        let mut edges = Vec::new();
        for (_, lines) in &self.batches {
            for line in lines {
                let m = members(line);
                if m.len() > 1 {
                    for at in [m[0].seq(), m[0].seq() + m.len() as u64] {
                        edges.extend((at.saturating_sub(1)..=at + 1).filter(|&s| s <= stored + 1));
                    }
                }
            }
        }
        edges
    }

    /// Packed rows (lines of more than one member) by tag, and the members
    /// they hold.
    pub(super) fn packed(&self) -> ([u64; 3], u64, u64) {
        let mut rows = [0; 3];
        let mut held = 0;
        let mut largest = 0;
        for (_, lines) in &self.batches {
            for line in lines {
                let m = members(line).len() as u64;
                if m > 1 {
                    let text = String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned();
                    if let Some(i) = TAGS.iter().position(|t| text.contains(&format!("\"{t}\""))) {
                        rows[i] += 1;
                    }
                    held += m;
                    largest = largest.max(m);
                }
            }
        }
        (rows, held, largest)
    }

    fn write(&self, body: &[u8]) {
        let mut bytes = self.head.clone();
        bytes.extend_from_slice(body);
        std::fs::write(&self.path, bytes).expect("the JSONL log is writable");
    }

    /// The file's bytes after the head, with the last batch replaced by
    /// `last` (raw: `last` is its plaintext; zstd: its frame bytes).
    fn with_last(&self, last: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        let n = self.batches.len();
        if self.compression == Compression::Zstd {
            for (frame, _) in &self.batches[..n - 1] {
                body.extend_from_slice(frame);
            }
        }
        body.extend_from_slice(last);
        body
    }

    fn last_plain(&self, lines: usize) -> Vec<u8> {
        let (_, last) = self.batches.last().expect("a batch");
        let mut out = Vec::new();
        for line in &last[..lines] {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
        out
    }

    /// Leaves a torn tail in this log of `events` events.
    pub(super) fn tear(&self, how: TornTail, events: u64) {
        let last_lines = self.batches.last().map_or(0, |(_, l)| l.len());
        let mut line = self.last_line().to_vec();
        line.push(b'\n');
        match (how, self.compression) {
            (TornTail::PartialNext, Compression::None) => {
                // Half of a copy of the last line, without its newline.
                let mut body = self.last_plain(last_lines);
                body.extend_from_slice(&line[..(line.len() - 1).div_ceil(2)]);
                self.write(&self.with_last(&body));
            }
            (TornTail::PartialNext, Compression::Zstd) => {
                // Alternately: a torn frame of a copy of the last line after
                // the last frame (nothing to recover), or the last frame
                // itself torn after all its lines (every one recovered).
                let (frame, last) = self.batches.last().expect("a batch");
                let body = if events.is_multiple_of(2) {
                    let mut body = self.with_last(frame);
                    body.extend_from_slice(&torn_frame(&[], &line, 128));
                    body
                } else {
                    self.with_last(&torn_frame(&self.last_plain(last.len()), &line, 128))
                };
                self.write(&body);
            }
            (TornTail::CutLast(k), Compression::None) => {
                let mut body = self.last_plain(last_lines - 1);
                let len = line.len() - 1;
                body.extend_from_slice(&line[..1 + (len - 1) * usize::from(k) / 255]);
                self.write(&self.with_last(&body));
            }
            (TornTail::CutLast(k), Compression::Zstd) => {
                let before = self.last_plain(last_lines - 1);
                self.write(&self.with_last(&torn_frame(&before, &line, k)));
            }
            (TornTail::DropLast(k), _) => {
                let keep = events - u64::from(k).min(events);
                let mut body = Vec::new();
                for (frame, lines) in &self.batches {
                    let mut plain = Vec::new();
                    let mut whole = true;
                    for line in lines {
                        let m = members(line);
                        let first = m[0].seq();
                        if first >= keep {
                            whole = false;
                            break;
                        }
                        if first + m.len() as u64 > keep {
                            // A packed row across the cut: its kept members,
                            // packed as a batch of them would be.
                            let kept: Vec<Event> =
                                m.into_iter().filter(|e| e.seq() < keep).collect();
                            plain.extend_from_slice(
                                &turnwal::backend::jsonl::records::encode_batch(&kept, true),
                            );
                            whole = false;
                            break;
                        }
                        plain.extend_from_slice(line);
                        plain.push(b'\n');
                    }
                    match self.compression {
                        Compression::None => body.extend_from_slice(&plain),
                        Compression::Zstd if whole => body.extend_from_slice(frame),
                        Compression::Zstd if !plain.is_empty() => body.extend_from_slice(
                            &turnwal::backend::jsonl::zstd::compress_frame(&plain),
                        ),
                        Compression::Zstd => {}
                    }
                    if !whole {
                        break;
                    }
                }
                self.write(&body);
            }
        }
    }
}

/// What a tear must respect at the end of a WAL log: repairs (a cut never
/// leaves part of one) and published records (sealed units, and every
/// record of a file published whole).
pub(super) struct WalTail {
    /// Whether the last record is a synthetic closer (the end of a repair).
    pub(super) last_synthetic: bool,
    /// Per event: whether cutting right after it leaves part of a repair.
    pub(super) partial_repair: Vec<bool>,
    /// Per event: whether its record was published whole (materialization
    /// or a rewrite: docs/FORMAT.md, "Published files"), so no crash tears
    /// or drops it.
    pub(super) published: Vec<bool>,
}

/// The [`WalTail`] of the last `events` events of the WAL log of `id`.
/// Events before the live file's records (a version-3 session's archive,
/// which its reference stands for) were sealed: published, never torn.
pub(super) fn wal_tail(root: &Path, id: &str, events: u64) -> WalTail {
    use turnwal::backend::wal::format::{TRAILER_LEN, decode_file_header, parse_head};
    use turnwal::event::EventKind;
    let path = WalBackend::open(root).expect("the WAL store").log_path(id);
    let bytes = std::fs::read(&path).expect("the WAL log");
    let records_start = decode_file_header(&bytes)
        .expect("a valid file header")
        .records_start as usize;
    let mut heads = Vec::new();
    let mut end = bytes.len();
    // Walk back over the records: each ends with its length. A chunk-run
    // record (or a sealed unit) stands for each of its events.
    let mut counted = 0;
    let mut ends = Vec::new();
    while counted < events && end > records_start {
        let len =
            u32::from_le_bytes(bytes[end - TRAILER_LEN..end].try_into().expect("4 bytes")) as usize;
        let head = parse_head(&bytes[end - len..end]).expect("a valid record");
        counted += head.count();
        heads.extend(std::iter::repeat_n(head, head.count() as usize));
        ends.extend(std::iter::repeat_n(end as u64, head.count() as usize));
        end -= len;
    }
    heads.reverse();
    ends.reverse();
    let archived = events.saturating_sub(counted) as usize;
    // The published length: what a record of a published file states (an
    // appended record's watermark never passes its own offset).
    let published_len = heads.iter().map(|h| h.watermark).max().unwrap_or(0);
    let last = heads.last().is_some_and(|h| h.synthetic());
    let partial = std::iter::repeat_n(false, archived)
        .chain(
            heads
                .iter()
                .map(|h| h.synthetic() && h.event_kind() != EventKind::TurnEnd),
        )
        .collect();
    WalTail {
        last_synthetic: last,
        partial_repair: partial,
        published: std::iter::repeat_n(true, archived)
            .chain(ends.iter().map(|&e| e <= published_len))
            .collect(),
    }
}

/// Every seq within one of where a packed row of `id` starts or ends (up
/// to `stored + 1`).
pub(super) fn packed_edges(db: &Path, id: &str, stored: u64) -> Vec<u64> {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return Vec::new();
    };
    let rows: Vec<(i64, bool)> = conn
        .prepare("SELECT seq, ignorable IS 0 FROM events WHERE session_id = ?1 ORDER BY seq")
        .and_then(|mut stmt| {
            stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default();
    let mut edges = Vec::new();
    for (i, &(seq, packed)) in rows.iter().enumerate() {
        if !packed {
            continue;
        }
        let end = rows.get(i + 1).map_or(stored as i64, |r| r.0);
        for at in [seq, end] {
            edges.extend((at - 1..=at + 1).filter(|&s| s >= 0 && s as u64 <= stored + 1));
        }
    }
    edges.into_iter().map(|s| s as u64).collect()
}

pub(super) fn last_row_is_scalar(db: &Path, id: &str) -> bool {
    let conn = rusqlite::Connection::open(db).expect("the database opens");
    conn.query_row(
        "SELECT ignorable IS NOT 0 FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        [id],
        |r| r.get::<_, bool>(0),
    )
    .unwrap_or(false)
}

/// The stored events of `id`, read through a fresh SQLite store.
pub(super) fn stored_events(db: &Path, id: &str) -> Vec<Event> {
    Store::open_sqlite(db, SqliteOptions::default(), StoreOptions::default())
        .and_then(|s| s.read_from(id, 0))
        .expect("the session reads")
}

/// Leaves a torn tail in the WAL log of `id`, which holds `events` events.
pub(super) fn tear_wal(root: &Path, id: &str, how: TornTail, events: u64) {
    let path = WalBackend::open(root).expect("the WAL store").log_path(id);
    let mut bytes = std::fs::read(&path).expect("the WAL log");
    let n = bytes.len();
    // Every record ends with its own length.
    let record_len =
        |end: usize| u32::from_le_bytes(bytes[end - 4..end].try_into().expect("4 bytes")) as usize;
    let last = record_len(n);
    match how {
        TornTail::PartialNext => {
            let half = bytes[n - last..n - last / 2].to_vec();
            bytes.extend_from_slice(&half);
        }
        TornTail::CutLast(_) => bytes.truncate(n - last / 2),
        TornTail::DropLast(k) => {
            use turnwal::backend::wal::format;
            let mut end = n;
            let mut left = u64::from(k).min(events);
            let mut kept_members = Vec::new();
            while left > 0 {
                let len = record_len(end);
                let head = format::parse_head(&bytes[end - len..end]).expect("a valid record");
                assert!(
                    !head.is_sealed(),
                    "a tear never drops events of a sealed unit (published whole)"
                );
                if head.count() > left {
                    // A chunk run straddles the cut: its kept members stay,
                    // as single records (as the SQLite tear splits its row).
                    let members =
                        record::decode_records(&bytes[end - len..end], &head).expect("a valid run");
                    let salt = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
                    let keep = (head.count() - left) as usize;
                    for member in &members[..keep] {
                        format::encode_record(
                            &mut kept_members,
                            member,
                            head.placement(),
                            head.watermark,
                            salt,
                        );
                    }
                    left = 0;
                } else {
                    left -= head.count();
                }
                end -= len;
            }
            bytes.truncate(end);
            bytes.extend_from_slice(&kept_members);
        }
    }
    std::fs::write(&path, bytes).expect("the WAL log is writable");
    // Acknowledged bytes tear only in the power-loss window, where the
    // durability proof had not reached the disk (docs/RECOVERY.md): with
    // the proof, this cut would be refused as corruption.
    let _ = std::fs::remove_file(turnwal::backend::wal::proof::path_of(&path));
}

/// Leaves a torn tail in the SQLite rows of `id`, which holds `events`
/// events.
pub(super) fn tear_sqlite(db: &Path, id: &str, how: TornTail, events: u64) {
    let conn = rusqlite::Connection::open(db).expect("the database opens");
    let last: i64 = conn
        .query_row(
            "SELECT max(seq) FROM events WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("the session has rows");
    match how {
        TornTail::PartialNext => {
            // Rows hold whole events, so the next seq is one past the
            // last row's members.
            let next = (events as i64).max(last + 1);
            conn.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES (?1, ?2, 'assistant/chunk', ?3, ?4)",
                rusqlite::params![id, next, 7, r#"{"turn":1,"step":1,"chunk":{"type":"text-de"#],
            )
            .expect("the torn row inserts");
        }
        TornTail::CutLast(k) => {
            let data: rusqlite::types::Value = conn
                .query_row(
                    "SELECT data FROM events WHERE session_id = ?1 AND seq = ?2",
                    rusqlite::params![id, last],
                    |r| r.get(0),
                )
                .expect("the last row");
            let keep = |len: usize| len.saturating_sub(1) * usize::from(k) / 255;
            let cut = match data {
                rusqlite::types::Value::Text(t) => {
                    let mut end = keep(t.len());
                    while !t.is_char_boundary(end) {
                        end -= 1;
                    }
                    rusqlite::types::Value::Text(t[..end].to_owned())
                }
                rusqlite::types::Value::Blob(b) => {
                    rusqlite::types::Value::Blob(b[..keep(b.len())].to_vec())
                }
                other => other,
            };
            conn.execute(
                "UPDATE events SET data = ?3 WHERE session_id = ?1 AND seq = ?2",
                rusqlite::params![id, last, cut],
            )
            .expect("the torn row updates");
        }
        TornTail::DropLast(k) => {
            use turnwal::backend::rows::codec::{self, Data, ROW_COLUMNS, RowIn};
            let keep = events - u64::from(k).min(events);
            // The row that holds seq `keep - 1`, if it is packed and runs
            // past the cut, is replaced by rows of its kept members.
            let straddling: Option<RowIn> = conn
                .query_row(
                    &format!(
                        "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq < ?2 \
                         ORDER BY seq DESC LIMIT 1"
                    ),
                    rusqlite::params![id, keep as i64],
                    RowIn::from_row,
                )
                .ok();
            let mut from = keep as i64;
            let mut reinsert = Vec::new();
            if let Some(row) = straddling.filter(RowIn::is_packed) {
                let members = codec::decode_row(&row).expect("a stored packed row decodes");
                let kept: Vec<Event> = members.into_iter().filter(|e| e.seq() < keep).collect();
                from = row.seq_key();
                reinsert = codec::encode_batch(&kept).expect("kept members encode");
            }
            conn.execute(
                "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                rusqlite::params![id, from],
            )
            .expect("the rows delete");
            for row in reinsert {
                let data = match row.data {
                    Data::Text(t) => rusqlite::types::Value::Text(t),
                    Data::Blob(b) => rusqlite::types::Value::Blob(b),
                };
                conn.execute(
                    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, \
                     surface_op, ignorable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    rusqlite::params![
                        id,
                        row.seq as i64,
                        row.event_type,
                        row.time,
                        data,
                        row.source_event_seqs,
                        row.surface_op,
                        row.ignorable
                    ],
                )
                .expect("the kept members insert");
            }
        }
    }
}
