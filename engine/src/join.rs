//! Combinators for futures on one executor (no spawning, no threads): run several at once and
//! take all results, or the first.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Runs the futures concurrently on the current executor and returns their results in order
/// (e.g. the writes and syncs of one flush go to the ring together).
pub async fn join_all<F: Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut tasks: Vec<Option<Pin<Box<F>>>> = futs.map(|f| Some(Box::pin(f))).collect();
    let mut results: Vec<Option<F::Output>> = (0..tasks.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, result) in tasks.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results
        .into_iter()
        .map(|r| r.expect("every future completed"))
        .collect()
}

/// Waits for the first of `futs` to complete and returns its index and output; the others are
/// dropped. Pending forever if `futs` is empty.
pub async fn first_of<F: Future>(futs: impl Iterator<Item = F>) -> (usize, F::Output) {
    let mut tasks: Vec<Pin<Box<F>>> = futs.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        for (i, f) in tasks.iter_mut().enumerate() {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready((i, v));
            }
        }
        Poll::Pending
    })
    .await
}
