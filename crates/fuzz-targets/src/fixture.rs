//! What the engine targets share: a fresh in-memory namespace on a stopped clock, and the
//! requests and reply sink they drive it with.
//!
//! Invariants:
//! - Every namespace starts empty at the same instant, so a target's run is a pure function of
//!   its input.

use std::sync::Arc;

use engine::{
    Acks, BinRef, ExistsPolicy, GenerationPolicy, ManualClock, Namespace, NamespaceConfig,
    ReadRequest, RecordMeta, ReplySink, WriteRequest,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Op, OpCode, ResultCode, TtlRequest, UserKey};

/// Where every namespace's clock starts: a million seconds after Aerospike's epoch.
pub const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;

/// The set every target record lives in.
pub const SET_NAME: &[u8] = b"fuzz";

/// A bin as a reply carried it: name, particle type, value.
pub type OwnedBin = (Vec<u8>, u8, Vec<u8>);

/// An empty in-memory namespace whose TTLs are allowed, and the clock it runs on.
pub fn namespace() -> (Namespace, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let config = NamespaceConfig {
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("fuzz")
    };
    (Namespace::new(config, clock.clone()), clock)
}

/// The digest of the record with integer user key `key` in [`SET_NAME`].
pub fn digest(key: u8) -> Digest {
    Digest::compute(SET_NAME, &UserKey::Integer(i64::from(key)))
}

/// A reply sink that keeps every bin.
#[derive(Debug, Default)]
pub struct Collect(pub Vec<OwnedBin>);

impl ReplySink for Collect {
    fn bin(&mut self, _op_code: OpCode, bin: BinRef<'_>) {
        self.0
            .push((bin.name.to_vec(), bin.particle_type, bin.value.to_vec()));
    }
}

/// A write of `ops` to `digest` under an update policy, no generation check and no TTL.
pub fn write(
    namespace: &Namespace,
    digest: Digest,
    ops: &[Op<'_>],
) -> Result<RecordMeta, ResultCode> {
    let request = WriteRequest {
        digest,
        set_name: SET_NAME,
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NamespaceDefault,
        respond_all_ops: false,
        deadline: engine::Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    namespace.write(
        &request,
        ops.iter().copied(),
        &mut Collect::default(),
        &mut Acks::default(),
    )
}

/// Every bin of the record at `digest`, with its metadata.
pub fn read_all(
    namespace: &Namespace,
    digest: Digest,
) -> Result<(RecordMeta, Vec<OwnedBin>), ResultCode> {
    let request = ReadRequest {
        digest,
        set_name: b"",
        key: None,
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    let mut sink = Collect::default();
    let meta = namespace.read(&request, std::iter::empty(), &mut sink)?;
    Ok((meta, sink.0))
}
