//! [`PeerTable`]: the nodes this node keeps outgoing connections to, one per [`Channel`],
//! and when each was last heard from.
//!
//! A peer is an entry with a dialer task per channel, found by a slot number that never
//! changes. A seed entry knows only an address until its first handshake tells its node id.
//!
//! Invariants:
//! - At most one entry per node id, and at most one seed entry per address; never an entry
//!   for this node itself.
//! - At most [`PEERS_MAX`] entries.
//! - An entry's connection on a channel, when present, is open or about to be detached by
//!   its dialer: only the dialer of that entry and channel attaches and detaches it.
//! - Removing an entry notifies every channel's `stop`, so its dialers end.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;
use wire_fabric::PEERS_PER_HEARTBEAT_MAX;

use crate::connection::Connection;

/// Most peers a node keeps: as many as one heartbeat can name.
pub const PEERS_MAX: usize = PEERS_PER_HEARTBEAT_MAX;

/// Which of a peer's outgoing connections a request travels on. Bulk transfers (a partition
/// streamed to a new replica, hundreds of KiB per answer) have a connection of their own, as
/// in Aerospike's fabric: on a slow link, consensus messages, heartbeats and replica writes
/// must not wait behind megabytes of records in one byte stream, or the metadata group
/// misses its deadlines and elects again and again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Everything but bulk transfers; heartbeats go here.
    General,
    /// Partition streams.
    Bulk,
}

impl Channel {
    fn index(self) -> usize {
        match self {
            Channel::General => 0,
            Channel::Bulk => 1,
        }
    }
}

/// What [`crate::Fabric::peers`] reports about one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerStatus {
    /// The peer's node id; `None` for a seed not yet handshaken.
    pub node_id: Option<u64>,
    /// Where this node dials it.
    pub address: String,
    /// Whether the general outgoing connection to it is up.
    pub connected: bool,
    /// Milliseconds since any frame arrived from it, on any connection (or since it was
    /// added, if none ever did).
    pub last_heard_ms_ago: u64,
    /// Whether it has been silent for the heartbeat interval times the timeout count. Only
    /// suspicion: the metadata group decides membership.
    pub suspect: bool,
}

/// Identifies one entry for its whole life.
pub(crate) type PeerSlot = u64;

/// What a dialer learnt from a handshake means for its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Learned {
    /// The entry is this node id: go on.
    Kept,
    /// The entry was removed (it is this node, another entry has the id, or it was removed
    /// meanwhile): the dialer ends.
    Removed,
}

/// The peers, by slot and by node id.
#[derive(Default)]
pub(crate) struct PeerTable {
    entries: HashMap<PeerSlot, PeerEntry>,
    slot_by_node_id: HashMap<u64, PeerSlot>,
    next_slot: PeerSlot,
}

/// One peer.
pub(crate) struct PeerEntry {
    address: String,
    node_id: Option<u64>,
    /// By channel index.
    connections: [Option<Arc<Connection>>; 2],
    last_heard: Instant,
    /// By channel index: one per dialer, since a `notify_one` wakes one waiter.
    stops: [Arc<Notify>; 2],
}

impl PeerEntry {
    /// Ends the entry's dialers and closes its connections.
    pub(crate) fn stop(&self) {
        for stop in &self.stops {
            stop.notify_one();
        }
        for connection in self.connections.iter().flatten() {
            connection.close();
        }
    }
}

/// A new entry whose dialers (one per channel, each with its `stop`) the caller starts.
pub(crate) struct NewPeer {
    pub(crate) slot: PeerSlot,
    pub(crate) stops: [(Channel, Arc<Notify>); 2],
}

impl PeerTable {
    /// Adds a seed at `address`, unless an entry has that address already or the table is
    /// full.
    pub(crate) fn insert_seed(&mut self, address: &str, now: Instant) -> Option<NewPeer> {
        if self.entries.values().any(|entry| entry.address == address) {
            return None;
        }
        self.insert(address, None, now)
    }

    /// Adds node `node_id` at `address`. A known node only has its address updated (used
    /// from the next dial on); a seed at the same address learns the id.
    pub(crate) fn insert_node(
        &mut self,
        node_id: u64,
        address: &str,
        now: Instant,
    ) -> Option<NewPeer> {
        if let Some(entry) = self.entry_of_node_mut(node_id) {
            if entry.address != address {
                address.clone_into(&mut entry.address);
            }
            return None;
        }
        let seed_slot = self
            .entries
            .iter()
            .find(|(_, entry)| entry.node_id.is_none() && entry.address == address)
            .map(|(slot, _)| *slot);
        if let Some(slot) = seed_slot {
            self.assign_node_id(slot, node_id);
            return None;
        }
        self.insert(address, Some(node_id), now)
    }

    /// Removes node `node_id`'s entry, and returns it for the caller to stop.
    pub(crate) fn remove_node(&mut self, node_id: u64) -> Option<PeerEntry> {
        let slot = self.slot_by_node_id.remove(&node_id)?;
        self.entries.remove(&slot)
    }

    /// Removes every entry, for shutdown.
    pub(crate) fn remove_all(&mut self) -> Vec<PeerEntry> {
        self.slot_by_node_id.clear();
        self.entries.drain().map(|(_, entry)| entry).collect()
    }

    /// The address to dial for `slot`; `None` once the entry is removed.
    pub(crate) fn address_of(&self, slot: PeerSlot) -> Option<String> {
        self.entries.get(&slot).map(|entry| entry.address.clone())
    }

    /// Records the node id a handshake on `slot` told, `own_node_id` being this node's.
    pub(crate) fn learn_node_id(
        &mut self,
        slot: PeerSlot,
        node_id: u64,
        own_node_id: u64,
    ) -> Learned {
        let Some(entry) = self.entries.get(&slot) else {
            return Learned::Removed;
        };
        if entry.node_id == Some(node_id) {
            return Learned::Kept;
        }
        let taken = self.slot_by_node_id.contains_key(&node_id);
        if node_id == own_node_id || taken {
            self.remove_slot(slot);
            return Learned::Removed;
        }
        self.assign_node_id(slot, node_id);
        Learned::Kept
    }

    /// Makes `connection` the entry's outgoing connection on `channel`; `false` if the entry
    /// is gone.
    pub(crate) fn attach(
        &mut self,
        slot: PeerSlot,
        channel: Channel,
        connection: &Arc<Connection>,
    ) -> bool {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return false;
        };
        entry.connections[channel.index()] = Some(Arc::clone(connection));
        true
    }

    /// Forgets the entry's connection on `channel` if it is still `connection`.
    pub(crate) fn detach(
        &mut self,
        slot: PeerSlot,
        channel: Channel,
        connection: &Arc<Connection>,
    ) {
        if let Some(entry) = self.entries.get_mut(&slot) {
            let attached = &mut entry.connections[channel.index()];
            if attached
                .as_ref()
                .is_some_and(|attached| Arc::ptr_eq(attached, connection))
            {
                *attached = None;
            }
        }
    }

    /// The outgoing connection to node `node_id` on `channel`, if it is up.
    pub(crate) fn connection_of(&self, node_id: u64, channel: Channel) -> Option<Arc<Connection>> {
        let slot = self.slot_by_node_id.get(&node_id)?;
        self.entries.get(slot)?.connections[channel.index()].clone()
    }

    /// Every general outgoing connection that is up.
    pub(crate) fn connections(&self) -> Vec<Arc<Connection>> {
        self.entries
            .values()
            .filter_map(|entry| entry.connections[Channel::General.index()].clone())
            .collect()
    }

    /// Notes that a frame arrived from node `node_id`.
    pub(crate) fn heard(&mut self, node_id: u64, now: Instant) {
        if let Some(entry) = self.entry_of_node_mut(node_id) {
            entry.last_heard = now;
        }
    }

    /// The node ids heard from within `suspect_after_ms`, at most [`PEERS_MAX`] of them.
    pub(crate) fn hearing_node_ids(&self, now: Instant, suspect_after_ms: u64) -> Vec<u64> {
        self.entries
            .values()
            .filter(|entry| !is_suspect(silent_ms(entry, now), suspect_after_ms))
            .filter_map(|entry| entry.node_id)
            .take(PEERS_MAX)
            .collect()
    }

    /// Every peer's status, by node id (seeds last, by address).
    pub(crate) fn statuses(&self, now: Instant, suspect_after_ms: u64) -> Vec<PeerStatus> {
        let mut statuses: Vec<PeerStatus> = self
            .entries
            .values()
            .map(|entry| {
                let last_heard_ms_ago = silent_ms(entry, now);
                PeerStatus {
                    node_id: entry.node_id,
                    address: entry.address.clone(),
                    connected: entry.connections[Channel::General.index()].is_some(),
                    last_heard_ms_ago,
                    suspect: is_suspect(last_heard_ms_ago, suspect_after_ms),
                }
            })
            .collect();
        statuses.sort_by(|a, b| {
            (a.node_id.is_none(), a.node_id, &a.address).cmp(&(
                b.node_id.is_none(),
                b.node_id,
                &b.address,
            ))
        });
        statuses
    }

    fn insert(&mut self, address: &str, node_id: Option<u64>, now: Instant) -> Option<NewPeer> {
        if self.entries.len() >= PEERS_MAX {
            return None;
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let stops = [Arc::new(Notify::new()), Arc::new(Notify::new())];
        let entry = PeerEntry {
            address: address.to_owned(),
            node_id,
            connections: [None, None],
            last_heard: now,
            stops: stops.clone(),
        };
        self.entries.insert(slot, entry);
        if let Some(node_id) = node_id {
            self.slot_by_node_id.insert(node_id, slot);
        }
        let [general, bulk] = stops;
        let stops = [(Channel::General, general), (Channel::Bulk, bulk)];
        Some(NewPeer { slot, stops })
    }

    fn assign_node_id(&mut self, slot: PeerSlot, node_id: u64) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return;
        };
        if let Some(old_node_id) = entry.node_id.replace(node_id) {
            self.slot_by_node_id.remove(&old_node_id);
        }
        let replaced = self.slot_by_node_id.insert(node_id, slot);
        assert!(replaced.is_none(), "node {node_id} has one entry");
    }

    /// Removes entry `slot` and stops it.
    pub(crate) fn remove_slot(&mut self, slot: PeerSlot) {
        if let Some(entry) = self.entries.remove(&slot) {
            if let Some(node_id) = entry.node_id {
                self.slot_by_node_id.remove(&node_id);
            }
            entry.stop();
        }
    }

    fn entry_of_node_mut(&mut self, node_id: u64) -> Option<&mut PeerEntry> {
        let slot = self.slot_by_node_id.get(&node_id)?;
        self.entries.get_mut(slot)
    }
}

fn silent_ms(entry: &PeerEntry, now: Instant) -> u64 {
    let silent = now.saturating_duration_since(entry.last_heard);
    u64::try_from(silent.as_millis()).unwrap_or(u64::MAX)
}

fn is_suspect(silent_ms: u64, suspect_after_ms: u64) -> bool {
    silent_ms >= suspect_after_ms
}
