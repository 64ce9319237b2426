//! `store.follow(id, fromSeq)`: a session followed on a thread of its own
//! (`Store::follow`), its events handed to JavaScript one batch per
//! `next()`.
//!
//! A follower waits most of its life, so it never runs on the store's
//! operation threads ([`crate::workers`], which a waiting follower would
//! take from the store's appends) nor on libuv's pool: each has one
//! thread, started by its first `next()` and ended by `cancel()` (the
//! JavaScript iterator's `AbortSignal`, a `break`, or the store's close).
//! `next()` resolves to the JSON text of an array of stored envelopes (at
//! least one), or to null once the follower is cancelled.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Object;
use napi::{Env, JsDeferred};
use napi_derive::napi;
use turnwal::Store;
use turnwal::follow::Cancel;

/// What `next()` resolves to: a batch's JSON text, or null.
type Reply = JsDeferred<Option<String>, Box<dyn FnOnce(Env) -> napi::Result<Option<String>>>>;

/// How often an idle follower thread (no `next()` pending) checks whether
/// it was cancelled.
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// A followed session (see the module docs).
#[napi]
pub struct NativeFollow {
    handle: Handle,
}

/// What stops a follower: its `cancel()`, or its store's close.
#[derive(Clone)]
pub(crate) struct Handle {
    state: Arc<Mutex<State>>,
    cancel: Cancel,
}

struct State {
    /// What the thread needs to start: taken by the first `next()`.
    start: Option<(Arc<Store>, String, u64)>,
    /// Requests to the thread, one per `next()`; `None` once cancelled.
    requests: Option<mpsc::Sender<Reply>>,
}

impl Handle {
    /// Stops the follower: its wait ends, its thread ends, and what it
    /// held (the store, a watch, a PostgreSQL connection) is let go.
    pub(crate) fn stop(&self) {
        self.cancel.cancel();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.requests = None;
        state.start = None;
    }

    /// Whether it was stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

impl NativeFollow {
    /// A follower of `id` from `from_seq` in `store`, and the handle its
    /// store stops it with when it closes.
    pub(crate) fn new(store: Arc<Store>, id: String, from_seq: u64) -> (NativeFollow, Handle) {
        let handle = Handle {
            state: Arc::new(Mutex::new(State {
                start: Some((store, id, from_seq)),
                requests: None,
            })),
            cancel: Cancel::default(),
        };
        let follow = NativeFollow {
            handle: handle.clone(),
        };
        (follow, handle)
    }
}

#[napi]
impl NativeFollow {
    /// The next batch of stored events as JSON text (an array of
    /// envelopes), waiting for one; null once cancelled. Rejects with
    /// `FOLLOW_LOST` when the session is removed or recreated.
    #[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let (deferred, promise): (Reply, _) = env.create_deferred()?;
        let mut state = self.handle.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.handle.is_stopped() {
            deferred.resolve(Box::new(|_| Ok(None)));
            return Ok(promise);
        }
        if let Some((store, id, from_seq)) = state.start.take() {
            let (tx, rx) = mpsc::channel();
            let cancel = self.handle.cancel.clone();
            std::thread::Builder::new()
                .name("turnwal-follow".into())
                .spawn(move || serve(store, id, from_seq, cancel, rx))
                .map_err(|e| crate::invalid(format!("starting the follower's thread: {e}")))?;
            state.requests = Some(tx);
        }
        match &state.requests {
            Some(requests) => {
                if let Err(mpsc::SendError(deferred)) = requests.send(deferred) {
                    // The thread ended (an error was reported): done.
                    deferred.resolve(Box::new(|_| Ok(None)));
                }
            }
            None => deferred.resolve(Box::new(|_| Ok(None))),
        }
        Ok(promise)
    }

    /// Stops the follower: a pending `next()` resolves null within a few
    /// tens of milliseconds, later ones at once.
    #[napi(catch_unwind)]
    pub fn cancel(&self) {
        self.handle.stop();
    }
}

/// The follower's thread: opens the follow, then answers each request
/// with the next batch.
fn serve(
    store: Arc<Store>,
    id: String,
    from_seq: u64,
    cancel: Cancel,
    requests: mpsc::Receiver<Reply>,
) {
    let opened = crate::guarded("follow", || {
        store
            .follow_shared(&id, from_seq)
            .map(|f| f.raw().with_cancel(cancel.clone()))
            .map_err(crate::js_error)
    })
    .0;
    let mut follow = match opened {
        Ok(follow) => follow,
        Err(e) => {
            // The first request gets the error; the others end.
            let mut first = Some(e);
            for reply in requests {
                match first.take() {
                    Some(e) => reply.reject(e),
                    None => reply.resolve(Box::new(|_| Ok(None))),
                }
            }
            return;
        }
    };
    loop {
        let reply = match requests.recv_timeout(IDLE_CHECK) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) if !cancel.is_cancelled() => continue,
            // Cancelled, or its `NativeFollow` is gone: the thread ends.
            Err(_) => return,
        };
        let batch = crate::guarded("follow.next", || follow.wait(None).map_err(crate::js_error)).0;
        match batch {
            Ok(events) if events.is_empty() => reply.resolve(Box::new(|_| Ok(None))),
            Ok(events) => {
                let mut text = Vec::with_capacity(events.len() * 128);
                text.push(b'[');
                for (i, event) in events.iter().enumerate() {
                    if i > 0 {
                        text.push(b',');
                    }
                    event.write_json(&mut text);
                }
                text.push(b']');
                let text = String::from_utf8(text).expect("stored events are UTF-8");
                reply.resolve(Box::new(move |_| Ok(Some(text))));
            }
            Err(e) => {
                reply.reject(e);
                // A lost follow ends: later requests resolve null.
                cancel.cancel();
            }
        }
    }
}
