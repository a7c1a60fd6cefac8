//! Partition scans (a query without a digest or index range), answered by scan threads.

use std::sync::Arc;
use std::time::Duration;

use model::ResultCode;
use tokio::sync::mpsc;
use wire_aerospike::Message;

use crate::state::ServerState;

/// A running scan as its connection sees it: chunks to send, then a final message.
pub struct ScanStream {
    chunks: mpsc::Receiver<Vec<u8>>,
    /// How long one chunk may take to reach the client before the scan is abandoned.
    pub write_timeout: Duration,
}

impl ScanStream {
    /// The next chunk of complete proto frames; `None` once every scan thread has finished.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        self.chunks.recv().await
    }

    /// Appends the final LAST message (with the scan's outcome) to `out`.
    pub fn finish(self, out: &mut Vec<u8>) {
        crate::dispatch::write_stream_error(out, ResultCode::Ok);
    }

    /// Stops the scan because its client is gone or the server is shutting down.
    pub fn abandon(self) {}
}

/// Validates a scan request and starts its threads.
///
/// # Errors
/// The result code to answer with, before any record is sent.
pub fn start(_state: &Arc<ServerState>, _message: &Message<'_>) -> Result<ScanStream, ResultCode> {
    Err(ResultCode::UnsupportedFeature)
}
