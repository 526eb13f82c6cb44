//! Cross-core routing for the handlers: run work on the core that owns a partition (or
//! coordinates a group), and scatter a request over its partitions' owner cores and gather the
//! answers back in request order. Every handler that touches another core's state goes
//! through here; it is the one place that picks a direct call or `Shards::invoke_on`.

use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use tracing::Instrument;

pub use engine::shard::CoreGone;

use crate::core::CoreState;

/// Runs `f` on `core`: called directly when it is this core, else sent over
/// `Shards::invoke_on` (bounded inbox, reply on a one-shot channel).
pub async fn on_core<R, F, Fut>(state: &Rc<CoreState>, core: usize, f: F) -> Result<R, CoreGone>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    if core == state.core {
        return Ok(f(state.clone()).await);
    }
    // The caller's tracing span goes along, so a request can be followed across cores.
    let span = tracing::Span::current();
    let sent = Instant::now();
    let (r, work) = state
        .shards
        .invoke_on(core, move |target| async move {
            let started = Instant::now();
            target.metrics.record_queued(started - sent);
            let r = f(target).instrument(span).await;
            (r, started.elapsed())
        })
        .await?;
    state.metrics.record_hop(sent.elapsed(), work);
    Ok(r)
}

/// Where a coordinator's key (a group, a transactional id, a barrier group) is coordinated:
/// its internal topic and, as this node's metadata places it, the partition and core (`None`
/// when no core here coordinates it; `key_partition` names the partition for the error).
pub struct CoordinatorAt {
    pub internal: &'static str,
    pub at: Option<(u32, usize)>,
    pub key_partition: Option<u32>,
}

/// Runs `f(s, partition)` on the core of this node coordinating the key `at` names. `Err`:
/// NOT_COORDINATOR (another node
/// coordinates it, or the replica here no longer leads), COORDINATOR_LOAD_IN_PROGRESS (this
/// core leads it but has not loaded it yet) or COORDINATOR_NOT_AVAILABLE.
pub async fn on_coordinator_core<R, F, Fut>(
    state: &Rc<CoreState>,
    at: CoordinatorAt,
    f: F,
) -> Result<R, i16>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    let CoordinatorAt {
        internal,
        at,
        key_partition,
    } = at;
    let Some((partition, core)) = at else {
        return Err(state.not_coordinator_code(internal, key_partition));
    };
    on_core(state, core, move |s| async move {
        s.check_coordinates(internal, partition)?;
        Ok(f(s, partition).await)
    })
    .await
    .map_err(|_| crate::codes::COORDINATOR_NOT_AVAILABLE)?
}

/// Where an item's answer goes in the response: (topic index, partition index).
pub type Slot = (usize, usize);

/// The items of one request, grouped by owner core, each with its slot in the response.
pub struct Scatter<I> {
    by_core: BTreeMap<usize, Vec<(Slot, I)>>,
}

impl<I> Default for Scatter<I> {
    fn default() -> Self {
        Self {
            by_core: BTreeMap::new(),
        }
    }
}

impl<I: Clone + Send + 'static> Scatter<I> {
    pub fn push(&mut self, core: usize, slot: Slot, item: I) {
        self.by_core.entry(core).or_default().push((slot, item));
    }

    pub fn is_empty(&self) -> bool {
        self.by_core.is_empty()
    }

    /// Runs `per_core(state, items)` on every owner core concurrently, each with its items in
    /// request order; `per_core` answers one result per item, in the same order. Returns every
    /// item's slot with its result, or the error of a core that could not be reached.
    pub async fn gather<R, F, Fut>(
        &self,
        state: &Rc<CoreState>,
        per_core: F,
    ) -> Vec<(Slot, Result<R, CoreGone>)>
    where
        R: Send + 'static,
        F: Fn(Rc<CoreState>, Vec<I>) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Vec<R>> + 'static,
    {
        let rounds = self.by_core.iter().map(|(&core, items)| {
            let slots: Vec<Slot> = items.iter().map(|(s, _)| *s).collect();
            let batch: Vec<I> = items.iter().map(|(_, i)| i.clone()).collect();
            let f = per_core.clone();
            async move {
                match on_core(state, core, move |s| f(s, batch)).await {
                    Ok(results) => {
                        assert_eq!(results.len(), slots.len(), "one answer per item");
                        slots.into_iter().zip(results.into_iter().map(Ok)).collect()
                    }
                    Err(e) => slots.into_iter().map(|s| (s, Err(e))).collect::<Vec<_>>(),
                }
            }
        });
        engine::join::join_all(rounds)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Runs `per_core(state, items)` on every owner core and returns when the first of them
    /// does (a long-poll that ends when any partition has data).
    pub async fn first<F, Fut>(&self, state: &Rc<CoreState>, per_core: F)
    where
        F: Fn(Rc<CoreState>, Vec<I>) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let waits = self.by_core.iter().map(|(&core, items)| {
            let batch: Vec<I> = items.iter().map(|(_, i)| i.clone()).collect();
            let f = per_core.clone();
            async move {
                let _ = on_core(state, core, move |s| f(s, batch)).await;
            }
        });
        engine::join::first_of(waits).await;
    }
}
