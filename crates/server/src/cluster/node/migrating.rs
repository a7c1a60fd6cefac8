//! A node's migrations: the task that starts fills and reports them, the fills themselves,
//! the master's side of a stream, handovers drained, and the progress figures and log.
//! The protocol is described in `super::super::migration`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cluster::metadata::MetaCommand;
use engine::{Namespace, PartitionRole};
use model::PartitionId;
use tracing::{debug, info};

use super::ClusterNode;
use crate::cluster::layout::Layout;
use crate::cluster::migration::{self, Fill};
use crate::cluster::view::MigrationSummary;

/// How often the migration task starts fills and reports filled partitions.
const MIGRATION_PERIOD: Duration = Duration::from_millis(100);
/// How long a fill that stopped waits before its slot is free again.
const FILL_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How often the migration task logs progress while partitions move to or from this node.
const MIGRATION_LOG_PERIOD: Duration = Duration::from_secs(5);
/// How often it checks whether a partition this node hands over has drained.
const HANDOFF_DRAIN_PERIOD: Duration = Duration::from_millis(2);

impl ClusterNode {
    /// Starts the fills this node's table asks for and reports the partitions filled, until
    /// the node stops.
    pub(super) async fn migrate(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let mut handoffs_pending = false;
        let mut progress = MigrationProgress::default();
        let mut reported_at = tokio::time::Instant::now();
        loop {
            // A handover holds its partition's writes back: check its drain often.
            let period = match handoffs_pending {
                true => HANDOFF_DRAIN_PERIOD,
                false => MIGRATION_PERIOD,
            };
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                () = self.migration_wake.notified() => {}
                _ = stop.changed() => return,
            }
            if !self.is_member_now(&self.meta.state()) {
                continue;
            }
            let layout = self.layout.read().clone();
            progress.log(&self.migration_summary(&layout));
            let (drained, pending) = self.drained_handoffs(&layout);
            handoffs_pending = pending;
            // Filled partitions are reported once a period, not on every new state: each
            // report is a metadata commit carrying a new table, and fills end every few
            // milliseconds while a node fills.
            let report_due = reported_at.elapsed() >= MIGRATION_PERIOD;
            let reports = match report_due {
                true => {
                    reported_at = tokio::time::Instant::now();
                    self.migrations.reports(self.me.0)
                }
                false => Vec::new(),
            };
            for command in drained.into_iter().chain(reports) {
                if let Err(error) = self.meta.propose_via_leader(command).await {
                    debug!(%error, "filled partitions not reported yet");
                }
            }
            self.start_fills();
        }
    }

    /// The handovers this node (their master) has drained, one command per namespace; and
    /// whether any handover from this node is still draining.
    fn drained_handoffs(&self, layout: &Layout) -> (Vec<MetaCommand>, bool) {
        let mut commands = Vec::new();
        let mut pending = false;
        for ((namespace, _), sink) in self.namespaces.iter().zip(&self.sinks) {
            let mut partitions = Vec::new();
            for &(pid, version) in layout.handing_off(namespace.name()) {
                // Drained: the role no longer takes writes here (applied under the partition
                // lock), and every replica write sent before has been answered.
                let applied = namespace.partition_role(pid) == (PartitionRole::Replica, version);
                match applied && sink.drained(pid) {
                    true => partitions.push((pid.0, version)),
                    false => pending = true,
                }
            }
            if !partitions.is_empty() {
                commands.push(MetaCommand::HandedOver {
                    namespace: namespace.name().to_owned(),
                    node: self.me.0,
                    partitions,
                });
            }
        }
        (commands, pending)
    }

    /// Runs one fill and records its end.
    async fn fill(self: Arc<Self>, fill: Fill) {
        let still_filling = || {
            self.layout
                .read()
                .assignment(fill.namespace.name(), fill.partition)
                .is_some_and(|a| {
                    a.master_since == fill.master_since
                        && a.has(self.me.0, cluster::metadata::ReplicaState::Filling)
                })
        };
        let config = self.migrations.config();
        let outcome = migration::run_fill(
            &fill,
            config.chunk_bytes,
            &self.migrations.stats,
            still_filling,
            &self.fabric,
        )
        .await;
        migration::log_fill_end(&fill, &outcome);
        if outcome.is_err() {
            // Not at once again: the master may be out of reach until a failover.
            tokio::time::sleep(FILL_RETRY_PAUSE).await;
        }
        self.migrations.finished(&fill, outcome.is_ok());
        // The next fill starts now, not at the next period: fills are short.
        self.start_fills();
    }

    /// Starts the fills the applied table asks for, within the limit of fills at once.
    fn start_fills(self: &Arc<Self>) {
        let namespaces: Vec<Arc<Namespace>> = self
            .namespaces
            .iter()
            .map(|(namespace, _)| namespace.clone())
            .collect();
        let layout = self.layout.read().clone();
        for fill in self.migrations.to_start(&layout, &namespaces) {
            tokio::spawn(Arc::clone(self).fill(fill));
        }
    }

    /// Answers a peer's request for the next chunk of a partition this node masters.
    pub fn stream_chunk(
        &self,
        asker: u64,
        namespace: &[u8],
        partition: PartitionId,
        after: Option<model::Digest>,
        chunk_bytes: u32,
    ) -> Option<(bool, Vec<engine::RecordVersion>)> {
        let index = self
            .namespaces
            .iter()
            .position(|(ns, _)| ns.name().as_bytes() == namespace)?;
        let namespace = &self.namespaces[index].0;
        let layout = self.layout.read().clone();
        let chunk_bytes = chunk_bytes.clamp(1, self.migrations.config().chunk_bytes.max(1));
        let was_streaming = layout
            .assignment(namespace.name(), partition)
            .is_some_and(|a| {
                a.master() == Some(self.me.0)
                    && a.has(asker, cluster::metadata::ReplicaState::Filling)
            });
        if was_streaming {
            self.sinks[index].start_fill(partition, asker);
        }
        let (done, records) = migration::next_chunk(
            namespace,
            &layout,
            self.me.0,
            asker,
            partition,
            after,
            chunk_bytes,
        );
        let stats = &self.migrations.stats;
        stats
            .tx_records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        if done {
            stats.tx_partitions_done.fetch_add(1, Ordering::Relaxed);
        }
        Some((done, records))
    }
}

impl ClusterNode {
    pub(super) fn migration_summary(&self, layout: &Layout) -> MigrationSummary {
        let stats = &self.migrations.stats;
        let (rx_remaining, tx_remaining) = layout.migrations();
        MigrationSummary {
            rx_partitions_active: self.migrations.active_count() as u64,
            rx_partitions_remaining: rx_remaining,
            tx_partitions_remaining: tx_remaining,
            rx_partitions_done: stats.rx_partitions_done.load(Ordering::Relaxed),
            tx_partitions_done: stats.tx_partitions_done.load(Ordering::Relaxed),
            records_received: stats.rx_records.load(Ordering::Relaxed),
            records_transmitted: stats.tx_records.load(Ordering::Relaxed),
        }
    }
}

/// When the migration task last logged, and whether anything was moving then.
#[derive(Debug, Default)]
struct MigrationProgress {
    logged_at: Option<Instant>,
    moving: bool,
}

impl MigrationProgress {
    /// Logs this node's migrations every [`MIGRATION_LOG_PERIOD`] while partitions move to
    /// or from it, and once when they stop.
    fn log(&mut self, summary: &MigrationSummary) {
        let moving = summary.rx_partitions_remaining + summary.tx_partitions_remaining > 0;
        let due = self
            .logged_at
            .is_none_or(|at| at.elapsed() >= MIGRATION_LOG_PERIOD);
        if moving && due {
            info!(
                rx_remaining = summary.rx_partitions_remaining,
                rx_active = summary.rx_partitions_active,
                tx_remaining = summary.tx_partitions_remaining,
                rx_done = summary.rx_partitions_done,
                records_received = summary.records_received,
                records_transmitted = summary.records_transmitted,
                "migrations in progress"
            );
            self.logged_at = Some(Instant::now());
        }
        if self.moving && !moving {
            info!(
                rx_done = summary.rx_partitions_done,
                tx_done = summary.tx_partitions_done,
                records_received = summary.records_received,
                records_transmitted = summary.records_transmitted,
                "migrations to and from this node finished"
            );
            self.logged_at = None;
        }
        self.moving = moving;
    }
}
