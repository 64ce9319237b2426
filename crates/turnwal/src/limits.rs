//! The size limits every backend shares (docs/FORMAT.md, "Limits"): an event
//! over them is refused before anything of its batch is written, by the WAL,
//! SQLite and JSONL alike, and every decoder bounds what it reads by them,
//! so no backend acknowledges an event it could not read back.

use crate::event::{Event, EventError};

/// Largest `data` JSON text of one event, in bytes (256 MiB).
pub const MAX_DATA_LEN: usize = 256 << 20;
/// Largest `sourceEventSeqs` or `surfaceOp` JSON text of one event, in bytes
/// (16 MiB each).
pub const MAX_EXTRA_LEN: usize = 16 << 20;
/// Room for everything of a stored event beyond `data` and its extras: the
/// type name (at most 65,535 bytes, up to six bytes each when escaped), the
/// keys, `seq` and `time` (1 MiB).
pub const MAX_ENVELOPE_LEN: usize = 1 << 20;
/// Largest decoded record of one event (a JSONL line, say): `data`, both
/// extras and the envelope.
pub const MAX_RECORD_LEN: usize = MAX_DATA_LEN + 2 * MAX_EXTRA_LEN + MAX_ENVELOPE_LEN;
/// Largest decompressed zstd frame a reader inflates (a JSONL zstd frame, one
/// append batch): one record at its largest. A frame that would decompress
/// past it is corrupt, and a zstd JSONL batch whose lines exceed it is
/// refused.
pub const MAX_FRAME_LEN: usize = MAX_RECORD_LEN;

/// Checks `event` against the shared limits: the error names its seq, its
/// type, the field, its size and the limit.
///
/// ```
/// use turnwal::event::Event;
/// assert!(turnwal::limits::check_event(&Event::new("turn/start", 0, 0, "{\"turn\":1}").unwrap()).is_ok());
/// ```
pub fn check_event(event: &Event) -> Result<(), EventError> {
    let over = |field: &str, len: usize, max: usize| {
        EventError::new(format!(
            "{field} is {len} bytes, over the {max}-byte limit every store shares"
        ))
        .at_seq(event.seq())
        .of_type(event.event_type())
    };
    let data = event.data().get().len();
    if data > MAX_DATA_LEN {
        return Err(over("data", data, MAX_DATA_LEN));
    }
    for (field, extra) in [
        ("sourceEventSeqs", event.source_event_seqs()),
        ("surfaceOp", event.surface_op()),
    ] {
        let len = extra.map_or(0, |r| r.get().len());
        if len > MAX_EXTRA_LEN {
            return Err(over(field, len, MAX_EXTRA_LEN));
        }
    }
    Ok(())
}

/// [`check_event`] over a batch.
pub fn check_batch(batch: &[Event]) -> Result<(), EventError> {
    batch.iter().try_for_each(check_event)
}
