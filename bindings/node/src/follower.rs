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

/// A followed session (see the module docs).
#[napi]
pub struct NativeFollow {
    state: Arc<Mutex<State>>,
    cancel: Cancel,
}

struct State {
    /// What the thread needs to start: taken by the first `next()`.
    start: Option<(Arc<Store>, String, u64)>,
    /// Requests to the thread, one per `next()`; `None` once cancelled.
    requests: Option<mpsc::Sender<Reply>>,
}

impl NativeFollow {
    pub(crate) fn new(
        store: Arc<Store>,
        id: String,
        from_seq: u64,
        cancel: Cancel,
    ) -> NativeFollow {
        NativeFollow {
            state: Arc::new(Mutex::new(State {
                start: Some((store, id, from_seq)),
                requests: None,
            })),
            cancel,
        }
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
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.cancel.is_cancelled() {
            deferred.resolve(Box::new(|_| Ok(None)));
            return Ok(promise);
        }
        if let Some((store, id, from_seq)) = state.start.take() {
            let (tx, rx) = mpsc::channel();
            let cancel = self.cancel.clone();
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
        self.cancel.cancel();
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests = None;
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
    for reply in requests {
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
