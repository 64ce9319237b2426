//! The threads a store's operations run on: the store's own, never libuv's
//! thread pool.
//!
//! libuv's pool (4 threads by default) is shared by everything in the
//! harness's process: `fs.*`, `dns.lookup`, `crypto`, `zlib`. An operation
//! that waits — SQLite's busy handler while another connection holds the
//! database's write lock (up to `busyTimeoutMs`), a PostgreSQL query behind
//! a row lock or a slow network, an fsync on a slow disk — would hold one
//! of those threads the whole time, and four such waits would stop the
//! harness's unrelated I/O. So each store runs its operations on a few
//! threads of its own ([`MAX_THREADS`]), started when work arrives and
//! ended after [`IDLE`] without any; a Promise is settled on the
//! JavaScript thread through a napi deferred (a threadsafe function).
//!
//! A waiting store holds back only its own later operations (which would
//! mostly wait for the same lock), never another store's or the process's.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, JsDeferred};

/// At most this many operations of one store run at once; more wait in
/// the store's queue, in order. libuv's default pool size: a store never
/// runs more at once than it did on the pool.
pub const MAX_THREADS: usize = 4;

/// A thread with nothing to do for this long ends (the next operation
/// starts one again, ~20 µs).
pub const IDLE: Duration = Duration::from_secs(10);

/// Work for one of a store's threads.
pub type Job = Box<dyn FnOnce() + Send>;

/// A store's threads and the operations waiting for one.
#[derive(Clone, Default)]
pub struct Workers {
    shared: Arc<(Mutex<Queue>, Condvar)>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

impl Workers {
    /// Runs `work` on one of the store's threads and returns a Promise
    /// settled with its result, converted by `to_js` on the JavaScript
    /// thread.
    pub fn run<'env, T, D>(
        &self,
        env: &'env Env,
        work: impl FnOnce() -> napi::Result<T> + Send + 'static,
        to_js: impl FnOnce(T) -> napi::Result<D> + Send + 'static,
    ) -> napi::Result<Object<'env>>
    where
        T: Send + 'static,
        D: ToNapiValue + 'static,
    {
        let (deferred, promise): (JsDeferred<D, _>, _) = env.create_deferred()?;
        self.submit(Box::new(move || match work() {
            Ok(value) => deferred.resolve(move |_: Env| to_js(value)),
            Err(error) => deferred.reject(error),
        }));
        Ok(promise)
    }

    /// Queues `job` (work no Promise waits for: idle work after an
    /// operation settled) behind the operations already waiting.
    pub fn later(&self, job: Job) {
        self.submit(job);
    }

    fn submit(&self, job: Job) {
        let (lock, wake) = &*self.shared;
        let mut queue = lock.lock().unwrap_or_else(|e| e.into_inner());
        queue.jobs.push_back(job);
        // A thread more only when the idle ones cannot take every queued
        // job.
        if queue.jobs.len() > queue.idle && queue.threads < MAX_THREADS {
            queue.threads += 1;
            let shared = self.shared.clone();
            let started = std::thread::Builder::new()
                .name("turnwal-store".to_owned())
                .spawn(move || work_until_idle(&shared));
            if started.is_err() {
                // No thread could be started (the process is at its
                // limit): the job waits for a running one, or, with none,
                // runs here rather than never.
                queue.threads -= 1;
                if queue.threads == 0 {
                    let job = queue.jobs.pop_back().expect("pushed above");
                    drop(queue);
                    job();
                    return;
                }
            }
        }
        wake.notify_one();
    }
}

fn work_until_idle(shared: &(Mutex<Queue>, Condvar)) {
    let (lock, wake) = shared;
    let mut queue = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = queue.jobs.pop_front() {
            drop(queue);
            // A job settles its own Promise and catches its own panics
            // (`guarded`); one that unwound anyway must not end the
            // thread with the queue's count wrong.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            queue = lock.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        queue.idle += 1;
        let (next, waited) = wake
            .wait_timeout(queue, IDLE)
            .unwrap_or_else(|e| e.into_inner());
        queue = next;
        queue.idle -= 1;
        if waited.timed_out() && queue.jobs.is_empty() {
            queue.threads -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// `MAX_THREADS` jobs run at once (each waits until all have started);
    /// the next waits for a free thread and then runs; jobs start in the
    /// order they were submitted.
    #[test]
    fn runs_up_to_max_threads_at_once_in_order() {
        let workers = Workers::default();
        let (started, starts) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        for i in 0..=MAX_THREADS {
            let started = started.clone();
            let gate = gate.clone();
            workers.submit(Box::new(move || {
                started.send(i).unwrap();
                let _ = gate.lock().unwrap().recv();
            }));
        }
        let first: Vec<usize> = (0..MAX_THREADS)
            .map(|_| starts.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..MAX_THREADS).collect::<Vec<_>>());
        assert!(
            starts.recv_timeout(Duration::from_millis(100)).is_err(),
            "the job past MAX_THREADS waits for a thread"
        );
        assert_eq!(workers.shared.0.lock().unwrap().threads, MAX_THREADS);
        release.send(()).unwrap();
        assert_eq!(
            starts.recv_timeout(Duration::from_secs(10)).unwrap(),
            MAX_THREADS
        );
        for _ in 0..MAX_THREADS {
            release.send(()).unwrap();
        }
    }

    /// A job that panics does not take its thread's place in the count
    /// with it: later jobs still run.
    #[test]
    fn a_panicking_job_leaves_the_pool_working() {
        let workers = Workers::default();
        for _ in 0..MAX_THREADS * 2 {
            workers.submit(Box::new(|| panic!("a job that unwinds")));
        }
        let (done, finished) = mpsc::channel();
        for i in 0..MAX_THREADS * 2 {
            let done = done.clone();
            workers.submit(Box::new(move || done.send(i).unwrap()));
        }
        let mut seen: Vec<usize> = (0..MAX_THREADS * 2)
            .map(|_| finished.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..MAX_THREADS * 2).collect::<Vec<_>>());
        assert!(workers.shared.0.lock().unwrap().threads <= MAX_THREADS);
    }
}
