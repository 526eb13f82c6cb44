//! The per-core shard runtime: one pinned glommio executor per core, each owning a state value
//! `S` that never leaves its thread, and the one cross-core primitive every room uses:
//! "run this on the owner core and send back the result" (`Shards::invoke_on`).
//!
//! Cross-core messages travel over bounded flume channels (`CORE_INBOX_CAPACITY`), so a slow
//! core pushes back on its senders instead of growing a queue without bound.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use glommio::{LocalExecutorBuilder, Placement};

/// Jobs a core's inbox holds before senders wait.
pub const CORE_INBOX_CAPACITY: usize = 1024;
/// Cross-core jobs one core runs at once. Past it the core stops taking jobs from its inbox,
/// so the inbox fills and senders wait: the work in flight is bounded, not only the queue.
pub const MAX_JOBS_IN_FLIGHT_PER_CORE: u64 = 8_192;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;
type Job<S> = Box<dyn FnOnce(Rc<S>) -> LocalFuture + Send>;

/// Counters of cross-core traffic (relaxed atomics; metrics only).
#[derive(Debug, Default)]
pub struct CrossCoreStats {
    pub messages_sent: AtomicU64,
    /// Jobs each core has taken from its inbox, indexed by core.
    pub received: Vec<AtomicU64>,
}

/// Handle to every core's inbox. Cheap to clone, `Send + Sync`.
pub struct Shards<S> {
    inboxes: Arc<Vec<flume::Sender<Job<S>>>>,
    stats: Arc<CrossCoreStats>,
}

impl<S> Clone for Shards<S> {
    fn clone(&self) -> Self {
        Self {
            inboxes: self.inboxes.clone(),
            stats: self.stats.clone(),
        }
    }
}

/// The error when the target core has stopped (shutdown) before answering.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("core {core} is not running (shutting down)")]
pub struct CoreGone {
    pub core: usize,
}

impl<S: 'static> Shards<S> {
    pub fn cores(&self) -> usize {
        self.inboxes.len()
    }

    pub fn stats(&self) -> &CrossCoreStats {
        &self.stats
    }

    /// Jobs waiting in `core`'s inbox.
    pub fn inbox_len(&self, core: usize) -> usize {
        self.inboxes[core].len()
    }

    /// Jobs `core` has taken from its inbox so far.
    pub fn received(&self, core: usize) -> u64 {
        self.stats.received[core].load(Ordering::Relaxed)
    }

    /// Runs `f` with the state of `core` on that core's executor and returns its result. The
    /// closure and its result cross threads; the future it makes stays on the target core.
    pub async fn invoke_on<R, F, Fut>(&self, core: usize, f: F) -> Result<R, CoreGone>
    where
        R: Send + 'static,
        F: FnOnce(Rc<S>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        assert!(core < self.inboxes.len(), "core {core} out of range");
        let (tx, rx) = flume::bounded::<R>(1);
        let job: Job<S> = Box::new(move |state| {
            Box::pin(async move {
                let r = f(state).await;
                let _ = tx.send(r);
            })
        });
        self.stats.messages_sent.fetch_add(1, Ordering::Relaxed);
        // The target core wakes this task from its thread: see `crosswake`.
        crosswake::home_wake(async {
            self.inboxes[core]
                .send_async(job)
                .await
                .map_err(|_| CoreGone { core })?;
            rx.recv_async().await.map_err(|_| CoreGone { core })
        })
        .await
    }
}

/// Settings of the executors.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// CPUs to pin the executors to, one executor each; empty = unpinned, `unpinned_cores` of
    /// them.
    pub cpus: Vec<usize>,
    pub unpinned_cores: usize,
    /// Registered I/O memory of each executor (3 rings each; keep 3 × this × cores under the
    /// memlock limit).
    pub io_memory_bytes: usize,
    /// How long an idle executor busy-polls before it parks (sleeps in the kernel). Waking a
    /// parked vCPU costs tens to hundreds of µs on a VM, which every fdatasync round pays.
    pub spin_before_park_us: u64,
}

/// The online CPUs, in order (DESIGN.md §4: derive cores from the online set; a fixed
/// placement on a CPU that does not exist fails).
pub fn online_cpus() -> std::io::Result<Vec<usize>> {
    let set = glommio::CpuSet::online().map_err(std::io::Error::from)?;
    let mut cpus: Vec<usize> = set.into_iter().map(|l| l.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Starts one executor per core. `init(core, shards)` builds each core's state on its own
/// thread; `run(state)` is the core's main future: when it returns, the core stops. Returns
/// the handle and a join function that waits for every core and reports failures.
pub fn start<S, I, IFut, R, RFut>(
    config: &ShardConfig,
    init: I,
    run: R,
) -> std::io::Result<(Shards<S>, ShardJoin)>
where
    S: 'static,
    I: Fn(usize, Shards<S>) -> IFut + Send + Sync + Clone + 'static,
    IFut: Future<Output = std::io::Result<Rc<S>>> + 'static,
    R: Fn(Rc<S>) -> RFut + Send + Sync + Clone + 'static,
    RFut: Future<Output = ()> + 'static,
{
    let n = if config.cpus.is_empty() {
        config.unpinned_cores.max(1)
    } else {
        config.cpus.len()
    };
    let mut senders = Vec::with_capacity(n);
    let mut receivers = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = flume::bounded::<Job<S>>(CORE_INBOX_CAPACITY);
        senders.push(tx);
        receivers.push(rx);
    }
    let shards = Shards {
        inboxes: Arc::new(senders),
        stats: Arc::new(CrossCoreStats {
            messages_sent: AtomicU64::new(0),
            received: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }),
    };
    let mut handles = Vec::with_capacity(n);
    for (core, inbox) in receivers.into_iter().enumerate() {
        let placement = match config.cpus.get(core) {
            Some(&cpu) => Placement::Fixed(cpu),
            None => Placement::Unbound,
        };
        let (init, run, shards) = (init.clone(), run.clone(), shards.clone());
        let shards_for_inbox = shards.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("core-{core}"))
            .io_memory(config.io_memory_bytes)
            .spin_before_park(std::time::Duration::from_micros(config.spin_before_park_us))
            .spawn(move || async move {
                let state = match init(core, shards).await {
                    Ok(s) => s,
                    Err(e) => return Err(e),
                };
                let inbox_state = state.clone();
                let stats = shards_for_inbox.stats.clone();
                let running = Rc::new(glommio::sync::Semaphore::new(MAX_JOBS_IN_FLIGHT_PER_CORE));
                let inbox_task = glommio::spawn_local(async move {
                    while let Ok(job) = crosswake::home_wake(inbox.recv_async()).await {
                        stats.received[core].fetch_add(1, Ordering::Relaxed);
                        let Ok(permit) = running.acquire_static_permit(1).await else {
                            break;
                        };
                        let fut = job(inbox_state.clone());
                        glommio::spawn_local(async move {
                            fut.await;
                            drop(permit);
                        })
                        .detach();
                    }
                })
                .detach();
                run(state).await;
                inbox_task.cancel();
                Ok(())
            })
            .map_err(std::io::Error::from)?;
        handles.push(handle);
    }
    Ok((shards, ShardJoin { handles }))
}

/// Waits for the executors started by `start`.
pub struct ShardJoin {
    handles: Vec<glommio::ExecutorJoinHandle<std::io::Result<()>>>,
}

impl ShardJoin {
    /// Waits for every core. A core that fails (init error or panic) while others run is
    /// fatal: the process exits with status 70, as a crash-only service does; the next start
    /// recovers from disk. Returns once all cores stopped cleanly.
    pub fn join_or_exit(self) -> std::io::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        let n = self.handles.len();
        for (core, h) in self.handles.into_iter().enumerate() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let res = match h.join() {
                    Ok(r) => r,
                    Err(e) => Err(std::io::Error::other(format!(
                        "core {core} panicked: {e:?}"
                    ))),
                };
                let _ = tx.send((core, res));
            });
        }
        for _ in 0..n {
            let (core, res) = rx
                .recv()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if let Err(e) = res {
                tracing::error!(core, error = %e, "core failed; exiting so that a restart recovers");
                eprintln!("ringlog: core {core} failed: {e}");
                std::process::exit(70);
            }
        }
        Ok(())
    }
}
