//! A one-line progress indicator on stderr for commands that walk many
//! sessions (`verify` of a whole store, `convert`). It is drawn only when
//! stderr is a terminal, so piped stderr stays clean for scripts.

use std::io::{self, IsTerminal};

use super::output::display_id;

/// Redraws `\r<verb> i/n: <id>[ <detail>]` in place; [`Progress::clear`]
/// erases it before anything else is printed.
pub(crate) struct Progress {
    /// Whether anything is drawn.
    pub(crate) active: bool,
    verb: &'static str,
    total: usize,
}

impl Progress {
    /// A progress line for `total` sessions, drawn only when `wanted` and
    /// stderr is a terminal.
    pub(crate) fn new(verb: &'static str, wanted: bool, total: usize) -> Progress {
        Progress {
            active: wanted && io::stderr().is_terminal(),
            verb,
            total,
        }
    }

    /// Shows that session `done + 1` of the total, `id`, is being worked on.
    pub(crate) fn show(&self, done: usize, id: &str) {
        self.show_detail(done, id, "");
    }

    /// Like [`Progress::show`], with a detail after the id (`1200/5000
    /// events`).
    pub(crate) fn show_detail(&self, done: usize, id: &str, detail: &str) {
        if self.active {
            let sep = if detail.is_empty() { "" } else { " " };
            eprint!(
                "\r{} {}/{}: {}{sep}{detail}\x1b[K",
                self.verb,
                done + 1,
                self.total,
                display_id(id)
            );
        }
    }

    /// Erases the line.
    pub(crate) fn clear(&self) {
        if self.active {
            eprint!("\r\x1b[K");
        }
    }
}
