//! Batch requests (info1 BATCH): many single-record commands in one message, answered as a
//! stream of per-row results ending with a LAST message.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use model::ResultCode;
use wire_aerospike::{MessageHeader, info3};

use crate::state::ServerState;

/// Node-wide batch counters, for `statistics`.
#[derive(Debug, Default)]
pub struct BatchStats {
    /// Batches started.
    pub initiated: AtomicU64,
    /// Batches answered to the end.
    pub completed: AtomicU64,
    /// Batches refused or ended early by an error.
    pub errors: AtomicU64,
}

/// One batch being answered, a chunk at a time.
pub struct BatchJob {
    #[expect(dead_code, reason = "the batch protocol lands next")]
    state: Arc<ServerState>,
    #[expect(dead_code, reason = "the batch protocol lands next")]
    body: Vec<u8>,
}

impl BatchJob {
    /// A batch over the request `body` (a whole AS_MSG, header included).
    pub fn new(state: Arc<ServerState>, body: Vec<u8>) -> BatchJob {
        BatchJob { state, body }
    }

    /// Appends the next complete proto frames of the reply to `out`; returns true once the
    /// reply, LAST message included, is complete.
    pub fn next_chunk(&mut self, out: &mut Vec<u8>) -> bool {
        let start = wire_aerospike::begin_response(out);
        let header = MessageHeader {
            info3: info3::LAST,
            result_code: ResultCode::UnsupportedFeature.code(),
            ..MessageHeader::default()
        };
        wire_aerospike::finish_response(out, start, &header);
        true
    }
}
