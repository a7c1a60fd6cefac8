//! Placement of partitions on nodes.
