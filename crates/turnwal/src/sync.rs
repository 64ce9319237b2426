//! The engine's mutexes, and what a panic while one was held means for
//! each: decided here, once, instead of at every `lock()`.
//!
//! - A [`Table`] guards bookkeeping (which sessions are open, held or
//!   recently written; idle connections; lock registrations) whose every
//!   critical section is one insert, remove or lookup. A panic elsewhere
//!   while one is held (a writer's sync inside the store's idle sweep)
//!   cannot leave it half-changed, so a poisoned table is taken as it is:
//!   refusing would turn one failed call into a dead store and protect
//!   nothing.
//! - A [`Resource`] guards state a panic can leave unknown (a backend's one
//!   SQLite connection, the memory backend's sessions). A poisoned one is
//!   refused once, as [`Error::StorePoisoned`], naming the store; the
//!   poison is then cleared, because what the resource holds is what was
//!   committed (SQLite rolls an unfinished transaction back when its handle
//!   drops during the unwind), and the next call goes on from it.
//!
//! A session's own slot (its writer) follows the second rule with its own
//! recovery: `Store` lets the writer go and reopens the session from disk.

use std::sync::{LockResult, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// A mutex over bookkeeping whose critical sections cannot be left
/// half-done (module docs): poison is recovered, never reported.
#[derive(Debug, Default)]
pub(crate) struct Table<T>(Mutex<T>);

impl<T> Table<T> {
    /// A table holding `value`.
    pub(crate) const fn new(value: T) -> Table<T> {
        Table(Mutex::new(value))
    }

    /// The table, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        recovered(self.0.lock())
    }
}

/// A lock result of a [`Table`] (or a condition variable's wait on one),
/// poison recovered.
pub(crate) fn recovered<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A mutex over state a panic can leave unknown (module docs): a poisoned
/// one is refused once, then cleared.
#[derive(Debug)]
pub(crate) struct Resource<T> {
    inner: Mutex<T>,
    /// What it is, for the refusal (`"SQLite connection"`).
    what: &'static str,
}

impl<T> Resource<T> {
    /// A resource holding `value`, called `what` in a refusal.
    pub(crate) fn new(value: T, what: &'static str) -> Resource<T> {
        Resource {
            inner: Mutex::new(value),
            what,
        }
    }

    /// The resource, locked; `StorePoisoned` (naming `location`) once after
    /// a panic while it was held.
    pub(crate) fn lock(&self, location: &str) -> Result<MutexGuard<'_, T>> {
        match self.inner.lock() {
            Ok(guard) => Ok(guard),
            Err(poisoned) => {
                drop(poisoned.into_inner());
                self.inner.clear_poison();
                Err(Error::StorePoisoned {
                    location: location.to_owned(),
                    what: self.what,
                })
            }
        }
    }
}

impl<T> Resource<T> {
    /// The resource, locked even if poisoned, to release what a holder
    /// holds (a writer's lock flag as it drops): a release must happen
    /// whatever a panic left, and the poison stays for the next
    /// [`Resource::lock`] to report.
    pub(crate) fn lock_to_release(&self) -> MutexGuard<'_, T> {
        recovered(self.inner.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poison<T: Send>(m: &Mutex<T>) {
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _guard = m.lock();
                    panic!("poisoning on purpose");
                })
                .join();
        });
        assert!(m.is_poisoned());
    }

    #[test]
    fn a_poisoned_resource_is_refused_once_then_goes_on() {
        let r = Resource::new(vec![1], "test thing");
        poison(&r.inner);
        match r.lock("store at /x") {
            Err(Error::StorePoisoned { location, what }) => {
                assert_eq!((location.as_str(), what), ("store at /x", "test thing"));
            }
            other => panic!("expected StorePoisoned, got {other:?}"),
        }
        assert_eq!(*r.lock("store at /x").unwrap(), vec![1]);
    }

    #[test]
    fn a_poisoned_table_is_taken_as_it_is() {
        let t = Table::new(7);
        poison(&t.0);
        assert_eq!(*t.lock(), 7);
    }
}
