//! [`FrameReader`]: whole frames out of the read half of a stream.
//!
//! Invariants:
//! - The buffer grows only by bytes that arrived, [`READ_CHUNK_BYTES`] of room at a time,
//!   never by a size the peer declared; the header is judged (and an oversized body refused)
//!   as soon as its 8 bytes are present. So the buffer never holds more than one largest
//!   frame plus one read chunk.
//! - A frame leaves the buffer whole, as [`OwnedFrame`] bytes split off without copying;
//!   the bytes after it stay for the next frame.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use wire_fabric::{FRAME_HEADER_SIZE_BYTES, Malformed, decode_frame};

use crate::config::READ_CHUNK_BYTES;
use crate::frame::OwnedFrame;

/// Why no frame came: the stream ended or failed, or the peer sent bytes that are not a
/// frame.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The stream ended cleanly between frames.
    Closed,
    /// The stream failed, or ended inside a frame.
    Io(std::io::Error),
    /// The bytes are not a valid frame (or its declared size is over the limit).
    Malformed(Malformed),
}

/// Reads frames from `stream`, buffering at most one frame and one read chunk.
pub(crate) struct FrameReader<R> {
    stream: R,
    buffer: BytesMut,
    body_size_bytes_max: u32,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader of frames whose bodies are at most `body_size_bytes_max` bytes.
    pub(crate) fn new(stream: R, body_size_bytes_max: u32) -> FrameReader<R> {
        FrameReader {
            stream,
            buffer: BytesMut::new(),
            body_size_bytes_max,
        }
    }

    /// The next whole frame.
    ///
    /// # Errors
    ///
    /// [`ReadError`]: the stream closed, failed, or carried something that is not a frame.
    /// The reader is of no further use after an error.
    pub(crate) async fn next_frame(&mut self) -> Result<OwnedFrame, ReadError> {
        loop {
            if let Some(frame) = self.take_frame()? {
                return Ok(frame);
            }
            self.fill().await?;
        }
    }

    /// How many bytes the buffer can hold without growing, for the bound tests.
    #[cfg(test)]
    pub(crate) fn buffer_capacity_bytes(&self) -> usize {
        self.buffer.capacity()
    }

    fn take_frame(&mut self) -> Result<Option<OwnedFrame>, ReadError> {
        let decoded = decode_frame(&self.buffer, self.body_size_bytes_max)
            .map_err(ReadError::Malformed)?
            .map(|(message, frame_size_bytes)| {
                (
                    message.message_type(),
                    message.request_id(),
                    frame_size_bytes,
                )
            });
        let Some((message_type, request_id, frame_size_bytes)) = decoded else {
            return Ok(None);
        };
        let bytes = self.buffer.split_to(frame_size_bytes).freeze();
        let frame = OwnedFrame::new(bytes, message_type, request_id);
        Ok(Some(frame))
    }

    async fn fill(&mut self) -> Result<(), ReadError> {
        let buffer_bytes_max = FRAME_HEADER_SIZE_BYTES + body_size_usize(self.body_size_bytes_max);
        assert!(
            self.buffer.len() < buffer_bytes_max,
            "a buffer of {} bytes holds a whole frame of at most {buffer_bytes_max} bytes",
            self.buffer.len(),
        );
        self.buffer.reserve(READ_CHUNK_BYTES);
        let read_bytes = self
            .stream
            .read_buf(&mut self.buffer)
            .await
            .map_err(ReadError::Io)?;
        if read_bytes > 0 {
            return Ok(());
        }
        if self.buffer.is_empty() {
            Err(ReadError::Closed)
        } else {
            Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()))
        }
    }
}

fn body_size_usize(body_size_bytes: u32) -> usize {
    usize::try_from(body_size_bytes).expect("a u32 fits in usize on every supported target")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use wire_fabric::{FRAME_MAGIC, Message, MessageType, encode};

    fn header(message_type: MessageType, body_size_bytes: u32) -> Vec<u8> {
        let mut header = FRAME_MAGIC.to_vec();
        header.extend_from_slice(&[wire_fabric::FABRIC_VERSION, message_type as u8]);
        header.extend_from_slice(&body_size_bytes.to_be_bytes());
        header
    }

    /// A peer declares a 100 MiB body (within the limit) and sends only a little of it: the
    /// reader's buffer grows by what arrived, not by what was declared.
    #[tokio::test]
    async fn buffer_grows_by_bytes_received_not_by_declared_size() {
        let (mut peer, ours) = tokio::io::duplex(1 << 20);
        let mut reader = FrameReader::new(ours, 200 << 20);
        peer.write_all(&header(MessageType::ForwardReply, 100 << 20))
            .await
            .unwrap();
        peer.write_all(&[0; 1000]).await.unwrap();
        drop(peer);
        let result = reader.next_frame().await;
        assert!(matches!(result, Err(ReadError::Io(_))), "{result:?}");
        assert!(reader.buffer_capacity_bytes() < 4 * READ_CHUNK_BYTES);
    }

    #[tokio::test]
    async fn declared_size_over_the_limit_is_refused_from_the_header_alone() {
        let (mut peer, ours) = tokio::io::duplex(1 << 20);
        let mut reader = FrameReader::new(ours, 1024);
        peer.write_all(&header(MessageType::ForwardReply, 1025))
            .await
            .unwrap();
        let result = reader.next_frame().await;
        assert!(matches!(result, Err(ReadError::Malformed(_))), "{result:?}");
    }

    #[tokio::test]
    async fn frames_split_across_reads_and_packed_in_one_read_both_decode() {
        let (mut peer, ours) = tokio::io::duplex(1 << 20);
        let mut reader = FrameReader::new(ours, 1024);
        let mut bytes = Vec::new();
        for request_id in 1..=3 {
            let reply = Message::ReplicaAck {
                request_id,
                result_code: 0,
            };
            encode(&reply, &mut bytes);
        }
        let (first, rest) = bytes.split_at(5);
        peer.write_all(first).await.unwrap();
        let read = tokio::spawn(async move {
            let mut request_ids = Vec::new();
            for _ in 0..3 {
                request_ids.push(reader.next_frame().await.unwrap().request_id());
            }
            (request_ids, reader.next_frame().await)
        });
        peer.write_all(rest).await.unwrap();
        drop(peer);
        let (request_ids, last) = read.await.unwrap();
        assert_eq!(request_ids, [Some(1), Some(2), Some(3)]);
        assert!(matches!(last, Err(ReadError::Closed)), "{last:?}");
    }
}
