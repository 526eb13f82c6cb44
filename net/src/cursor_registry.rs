//! The fan-out cursors running on one core (tasks and their stats), held in `CoreState` and
//! driven by `fanout_runtime`'s reconciler.

use std::collections::HashMap;
use std::rc::Rc;

use fanout::cursor::CursorStats;

/// (parent, parent partition, child, epoch)
pub(crate) type CursorKey = (String, u32, String, String);

/// The cursors running on one core, with their stats for metrics.
#[derive(Default)]
pub struct Cursors {
    pub(crate) running: HashMap<CursorKey, (glommio::task::JoinHandle<()>, Rc<CursorStats>, u64)>,
}

impl Cursors {
    /// (parent, partition, child, delay_ms, stats) of every running cursor.
    pub fn stats(&self) -> Vec<(String, u32, String, u64, Rc<CursorStats>)> {
        self.running
            .iter()
            .map(|((p, i, c, _), (_, s, d))| (p.clone(), *i, c.clone(), *d, s.clone()))
            .collect()
    }
}
