//! A new configuration for a running engine (iked's reload on SIGHUP), without dropping
//! the established SAs of the connections that stay.
//!
//! ```text
//!  Ike::reconfigure(now, new, out)
//!   │ each IKE SA, by its connection's name:
//!   │   gone from `new` ──▶ terminate (established: Delete sent, CHILD_SAs removed;
//!   │                        the SA waits in Deleting under a retired connection)
//!   │   still in `new`  ──▶ its connection index moved to the new one;
//!   │                        a CHILD_SA whose child is gone ──▶ removed, Delete queued;
//!   │                        a negotiation whose child is gone ──▶ terminated
//!   │ config = new.connections ++ retired (the removed ones a Deleting SA still needs)
//!   ▼ live = new.connections.len(): only those are initiated or chosen as a responder
//! ```
//!
//! What stays is not renegotiated: a connection whose settings changed keeps its IKE SA
//! and CHILD_SAs, and the new settings apply from the next negotiation on (a rekey, a new
//! IKE SA, the next peer's IKE_SA_INIT). The secrets and credentials are the new ones for
//! every authentication from now on.

use std::collections::HashMap;
use std::time::Instant;

use crate::ike_sa::State;
use crate::io::Output;
use crate::{Config, Ike};

impl Ike {
    /// Takes `config` in place of the running configuration (see the module doc): SAs of
    /// removed connections are terminated, CHILD_SAs of removed children deleted, all
    /// others kept under their connection's new settings.
    pub fn reconfigure(&mut self, now: Instant, config: Config, out: &mut Vec<Output>) {
        let new_index: HashMap<String, usize> =
            config.connections.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        // The SAs of removed connections (and of connections retired earlier).
        let gone: Vec<u64> = self
            .sas
            .iter()
            .filter(|(_, sa)| {
                sa.state != State::Deleting
                    && (sa.conn >= self.live
                        || !new_index.contains_key(self.config.connections[sa.conn].name.as_str()))
            })
            .map(|(&spi, _)| spi)
            .collect();
        for spi in gone {
            self.terminate(now, spi, out);
        }
        // The children that left a connection that stays.
        let mut dropped_children = Vec::new();
        let mut dropped_negotiations = Vec::new();
        for (&spi, sa) in &self.sas {
            if sa.state == State::Deleting {
                continue;
            }
            let old = &self.config.connections[sa.conn];
            let new = &config.connections[new_index[old.name.as_str()]];
            let kept = |name: &str| new.children.iter().any(|c| c.name == name);
            for c in sa.children.iter().filter(|c| !kept(&c.name)) {
                dropped_children.push((spi, c.spi_in));
            }
            if let Some(p) = &sa.pending_child {
                if !kept(&old.children[p.child].name) {
                    dropped_negotiations.push(spi);
                }
            }
        }
        for (spi, spi_in) in dropped_children {
            self.delete_child(spi, spi_in, out);
            self.pump(now, spi, out);
        }
        for spi in dropped_negotiations {
            self.terminate(now, spi, out);
        }
        // The new table of connections: the new ones, then those a Deleting SA still uses.
        let live = config.connections.len();
        let mut connections = config.connections;
        let mut retired: HashMap<usize, usize> = HashMap::new();
        for sa in self.sas.values_mut() {
            let old = &self.config.connections[sa.conn];
            let at = match new_index.get(old.name.as_str()) {
                Some(&i) if sa.conn < self.live => i,
                _ => *retired.entry(sa.conn).or_insert_with(|| {
                    connections.push(old.clone());
                    connections.len() - 1
                }),
            };
            if let Some(p) = sa.pending_child.as_mut() {
                let name = &old.children[p.child].name;
                if let Some(ci) = connections[at].children.iter().position(|c| &c.name == name) {
                    p.child = ci;
                }
            }
            sa.conn = at;
        }
        self.config = Config { connections, secrets: config.secrets, credentials: config.credentials };
        self.live = live;
    }

    /// The connections that are configured now (those past them are retired: removed by a
    /// reload, kept while an SA of theirs is being deleted).
    pub(crate) fn live_connections(&self) -> &[crate::config::Connection] {
        &self.config.connections[..self.live]
    }
}
