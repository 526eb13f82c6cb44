//! The one scheduler of each core's periodic work: the coordinators' ticks
//! (`coordinators::start_ticks`) and retention (`reconcile::enforce_retention`).

use std::rc::Rc;
use std::time::Duration;

use crate::core::CoreState;

/// Runs `tick` on `state`'s core every `period_ms` (at least 1) until the core stops: the one
/// scheduler of each core's periodic work (the coordinators' ticks, retention).
pub(crate) fn every<F, Fut>(state: &Rc<CoreState>, period_ms: u64, tick: F)
where
    F: Fn(Rc<CoreState>) -> Fut + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let state = state.clone();
    let period = Duration::from_millis(period_ms.max(1));
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(period).await;
            tick(state.clone()).await;
        }
    })
    .detach();
}
