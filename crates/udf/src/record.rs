//! The record a record UDF runs against, as the server provides it.

use crate::Value;

/// The server's side of a record UDF: what Lua's `record` type, `rec['bin']`
/// and `aerospike:create/update/remove/exists` call.
///
/// As in Aerospike's `udf_record.c`, bin writes are staged: `set_bin` records
/// the new value (Nil removes the bin) and `rec['bin']` reads it back, while
/// `create`, `update` and `remove` apply the staged writes (or delete the
/// record). A UDF that never calls them changes nothing. The integer results
/// follow Aerospike: 0 on success, non-zero (1, -1, -2, 4, ...) on failure.
pub trait UdfRecord {
    /// Whether the record exists (and is live).
    fn exists(&self) -> bool;
    /// A bin's current value (staged writes included), None when absent.
    fn bin(&self, name: &str) -> Option<Value>;
    /// Stages a bin write; [`Value::Nil`] removes the bin.
    fn set_bin(&mut self, name: &str, value: Value);
    /// The names of the record's bins.
    fn bin_names(&self) -> Vec<String>;
    /// Seconds to live, as `record.ttl(rec)` answers.
    fn ttl(&self) -> u32;
    /// Sets the TTL the next `create`/`update` applies (`record.set_ttl`).
    fn set_ttl(&mut self, ttl: u32);
    /// The generation (`record.gen`).
    fn generation(&self) -> u32;
    /// The last-update time in milliseconds since the Unix epoch.
    fn last_update_ms(&self) -> u64;
    /// The set name, if any.
    fn set_name(&self) -> Option<String>;
    /// The 20-byte RIPEMD-160 digest.
    fn digest(&self) -> [u8; 20];
    /// The stored user key, if any.
    fn key(&self) -> Option<Value>;
    /// The stored size in bytes (`record.device_size`, `record.size`).
    fn device_size(&self) -> u64;
    /// Asks that the stored key be dropped on the next write
    /// (`record.drop_key`). Defaults to doing nothing.
    fn drop_key(&mut self) {}
    /// `aerospike:create(rec)`: creates the record with the staged bins.
    fn create(&mut self) -> i32;
    /// `aerospike:update(rec)`: applies the staged bins.
    fn update(&mut self) -> i32;
    /// `aerospike:remove(rec)`: deletes the record.
    fn remove(&mut self) -> i32;
}
