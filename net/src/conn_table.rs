//! Open Kafka connections, broker-wide and per client IP (`max-connections`,
//! `max-connections-per-ip`): the one piece of connection state the cores share.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Open connections, broker-wide and per client IP. Shared by the cores; touched only when a
/// connection is accepted or closed, never on the request path.
#[derive(Default)]
pub struct ConnectionTable {
    total: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection; dropping it gives its place back.
pub struct ConnectionSlot<'a> {
    table: &'a ConnectionTable,
    ip: IpAddr,
}

impl ConnectionTable {
    /// Admits a connection from `ip` if both limits allow it; the error names the limit.
    pub fn admit(
        &self,
        ip: IpAddr,
        max_total: usize,
        max_per_ip: usize,
    ) -> Result<ConnectionSlot<'_>, String> {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if self.total.load(Ordering::Relaxed) >= max_total {
            return Err(format!("max-connections ({max_total}) reached"));
        }
        let n = per_ip.entry(ip).or_insert(0);
        if *n >= max_per_ip {
            if *n == 0 {
                per_ip.remove(&ip);
            }
            return Err(format!(
                "max-connections-per-ip ({max_per_ip}) reached for {ip}"
            ));
        }
        *n += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(ConnectionSlot { table: self, ip })
    }

    pub fn open(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

impl Drop for ConnectionSlot<'_> {
    fn drop(&mut self) {
        let mut per_ip = self.table.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
        let before = self.table.total.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(before > 0, "connection count underflow");
    }
}
