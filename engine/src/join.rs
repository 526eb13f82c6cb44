//! Combinators for futures on one executor (no spawning, no threads): run several at once and
//! take all results, or the first. Both are futures-util's, which give every child future its
//! own waker: a hand-written combinator that hands each child the task's own waker makes
//! glommio count one waker reference per child in an `i16`, and a request touching enough
//! partitions overflowed it ("Waker invariant broken").

use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

/// Runs the futures concurrently on the current executor and returns their results in order
/// (e.g. the writes and syncs of one flush go to the ring together).
pub async fn join_all<F: Future>(futs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    futures_util::future::join_all(futs).await
}

/// Runs `f` on every item with at most `limit` running at once (e.g. a core opening its
/// partitions: each open waits on small file reads and fsyncs, so a few dozen in flight keep
/// the disk busy where one at a time leaves it idle), in no particular order.
pub async fn for_each_bounded<T, Fut: Future<Output = ()>>(
    items: impl IntoIterator<Item = T>,
    limit: usize,
    f: impl FnMut(T) -> Fut,
) {
    assert!(limit > 0, "at least one at a time");
    futures_util::stream::iter(items)
        .for_each_concurrent(limit, f)
        .await
}

/// Waits for the first of `futs` to complete and returns its index and output; the others are
/// dropped. Pending forever if `futs` is empty.
pub async fn first_of<F: Future>(futs: impl IntoIterator<Item = F>) -> (usize, F::Output) {
    let mut set: FuturesUnordered<_> = futs
        .into_iter()
        .enumerate()
        .map(|(i, f)| async move { (i, f.await) })
        .collect();
    match set.next().await {
        Some(first) => first,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 40,000 children on one task: more than an `i16` of waker references.
    #[test]
    fn many_children_on_one_glommio_task() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(|| async {
                let timers = (0..40_000u64).map(|i| async move {
                    glommio::timer::sleep(std::time::Duration::from_millis(1 + i % 3)).await;
                    i
                });
                let all = join_all(timers).await;
                assert_eq!(all.len(), 40_000);
                assert_eq!(all[39_999], 39_999);
                let sleeps = (0..40_000u64).map(|i| async move {
                    glommio::timer::sleep(std::time::Duration::from_millis(5 + i)).await;
                    i
                });
                let (i, v) = first_of(sleeps).await;
                assert_eq!((i, v), (0, 0));
            })
            .unwrap();
        ex.join().unwrap();
    }
}
