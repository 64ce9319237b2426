//! The PostgreSQL store's part in the differential: torn tails written into
//! its rows as [`super::storage::tear_sqlite`] writes them into SQLite's
//! (the two stores hold the same rows; PostgreSQL's `data` is never
//! compressed).

use super::TornTail;
use turnwal::backend::rows::codec::{self, RowIn};
use turnwal::event::Event;

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("the database connects")
}

/// Leaves a torn tail in the rows of `id`, which holds `events` events.
pub(super) fn tear_postgres(url: &str, id: &str, how: TornTail, events: u64) {
    let mut client = client(url);
    let last: i64 = client
        .query_one(
            "SELECT max(seq) FROM turnwal_events WHERE session_id = $1",
            &[&id],
        )
        .expect("the session has rows")
        .get(0);
    match how {
        TornTail::PartialNext => {
            let next = (events as i64).max(last + 1);
            client
                .execute(
                    "INSERT INTO turnwal_events (session_id, seq, members, type, time, data) \
                     VALUES ($1, $2, 1, 'assistant/chunk', 7, $3)",
                    &[
                        &id,
                        &next,
                        &r#"{"turn":1,"step":1,"chunk":{"type":"text-de"#,
                    ],
                )
                .expect("the torn row inserts");
        }
        TornTail::CutLast(k) => {
            let data: String = client
                .query_one(
                    "SELECT data FROM turnwal_events WHERE session_id = $1 AND seq = $2",
                    &[&id, &last],
                )
                .expect("the last row")
                .get(0);
            let mut end = data.len().saturating_sub(1) * usize::from(k) / 255;
            while !data.is_char_boundary(end) {
                end -= 1;
            }
            client
                .execute(
                    "UPDATE turnwal_events SET data = $3 WHERE session_id = $1 AND seq = $2",
                    &[&id, &last, &&data[..end]],
                )
                .expect("the torn row updates");
        }
        TornTail::DropLast(k) => {
            let keep = events - u64::from(k).min(events);
            // The row holding seq `keep - 1`, if it is packed and runs past
            // the cut, is replaced by rows of its kept members.
            let straddling = client
                .query_opt(
                    "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable \
                     FROM turnwal_events WHERE session_id = $1 AND seq < $2 \
                     ORDER BY seq DESC LIMIT 1",
                    &[&id, &(keep as i64)],
                )
                .expect("the rows read");
            let mut from = keep as i64;
            let mut reinsert = Vec::new();
            let straddling = straddling.map(|r| turnwal::backend::postgres::row_in_at(&r, 0));
            if let Some(row) = straddling.filter(RowIn::is_packed) {
                let members = codec::decode_row(&row).expect("a stored packed row decodes");
                let kept: Vec<Event> = members.into_iter().filter(|e| e.seq() < keep).collect();
                from = row.seq_key();
                reinsert = turnwal::backend::postgres::encode(&kept).expect("kept members encode");
            }
            let mut tx = client.transaction().expect("begin");
            tx.execute(
                "DELETE FROM turnwal_events WHERE session_id = $1 AND seq >= $2",
                &[&id, &from],
            )
            .expect("the rows delete");
            turnwal::backend::postgres::epoch::insert_rows(&mut tx, url, id, &reinsert)
                .expect("the kept members insert");
            tx.commit().expect("commit");
        }
    }
}
