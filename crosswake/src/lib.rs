//! Waiting on a thread-per-core executor for a wake that comes from another thread.
//!
//! A glommio task's waker may be woken from another thread (glommio queues it to the owning
//! executor), but dropping the last clone of it on another thread races with the task's own
//! completion: glommio's foreign `drop_waker` brings the reference count to zero and then
//! clones the waker to send it home, and if the owning thread finishes the task in between
//! (it sees no reference left and frees it), the clone and the later wake touch freed memory
//! — a double free. Cross-thread channels do exactly that: a flume sender that fires a
//! waiting receiver's hook drops its copy of the hook, with the receiver's waker in it, on the
//! sending thread, possibly after the receiving task already took the message and finished.
//!
//! [`home_wake`] wraps a future so that everything another thread ever holds is a thread-safe
//! `Arc` slot: the task's own waker sits inside it, is only ever woken by reference from
//! there, and is taken out (and dropped) on the task's thread when the wrapper is dropped.
//! Every await on something another thread completes (cross-core replies and inboxes,
//! metastore replies and changes, the shutdown signal) goes through it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

/// The home task's waker, shared with the threads that may wake it.
struct Slot {
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Option<Waker>> {
        // A panic while holding the lock leaves nothing half done: the value is a waker.
        self.waker.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wake for Slot {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(w) = self.lock().as_ref() {
            w.wake_by_ref();
        }
    }
}

/// `fut`, polled with a waker that is safe to keep, wake and drop on any thread.
pub fn home_wake<F: Future>(fut: F) -> HomeWake<F> {
    HomeWake {
        inner: Box::pin(fut),
        slot: Arc::new(Slot {
            waker: Mutex::new(None),
        }),
    }
}

/// See [`home_wake`].
pub struct HomeWake<F> {
    inner: Pin<Box<F>>,
    slot: Arc<Slot>,
}

impl<F: Future> Future for HomeWake<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        {
            let mut w = this.slot.lock();
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                // The one replaced, if any, is dropped here, on the home thread.
                *w = Some(cx.waker().clone());
            }
        }
        let waker = Waker::from(this.slot.clone());
        this.inner.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

impl<F> Drop for HomeWake<F> {
    fn drop(&mut self) {
        // The home task's waker leaves the slot on the home thread; a thread that still holds
        // the slot finds it empty.
        let taken = self.slot.lock().take();
        drop(taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_from_another_thread_wake_a_glommio_task() {
        const ROUNDS: usize = 20_000;
        let (jobs_tx, jobs_rx) = flume::unbounded::<(usize, flume::Sender<usize>)>();
        let replier = std::thread::spawn(move || {
            for (n, reply) in jobs_rx {
                let _ = reply.send(n * 2);
            }
        });
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(move || async move {
                let tasks: Vec<_> = (0..4)
                    .map(|t| {
                        let jobs_tx = jobs_tx.clone();
                        glommio::spawn_local(async move {
                            for i in 0..ROUNDS / 4 {
                                let n = t * ROUNDS + i;
                                let (tx, rx) = flume::bounded(1);
                                jobs_tx.send((n, tx)).unwrap();
                                assert_eq!(home_wake(rx.recv_async()).await.unwrap(), n * 2);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await;
                }
            })
            .unwrap()
            .join()
            .unwrap();
        replier.join().unwrap();
    }

    #[test]
    fn a_dropped_wrapper_leaves_an_empty_slot() {
        let (tx, rx) = flume::bounded::<u8>(1);
        let mut fut = home_wake(rx.recv_async());
        let waker = Waker::from(Arc::new(Slot {
            waker: Mutex::new(None),
        }));
        assert!(Pin::new(&mut fut)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let slot = fut.slot.clone();
        assert!(slot.lock().is_some());
        drop(fut);
        assert!(slot.lock().is_none());
        drop(tx);
    }
}
