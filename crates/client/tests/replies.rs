//! The client reads replies through a buffer (one receive per reply, not one per few hundred
//! bytes: osprey-bench's range queries were limited by the client's own receives). These tests
//! check what buffering could break: a reply that arrives in pieces, and two replies that
//! arrive in one piece, the second kept for the next call.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use client::Client;

/// An info reply proto (version 2, type 1) carrying `text`.
fn info_reply(text: &str) -> Vec<u8> {
    let size = text.len() as u64;
    let mut bytes = vec![2, 1];
    bytes.extend_from_slice(&size.to_be_bytes()[2..]);
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// Starts a server that reads nothing back and writes `pieces` with a pause between them.
fn serve(pieces: Vec<Vec<u8>>) -> (Client, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let server = thread::spawn(move || {
        let (mut stream, _): (TcpStream, _) = listener.accept().expect("accept");
        for piece in pieces {
            stream.write_all(&piece).expect("write");
            stream.flush().expect("flush");
            thread::sleep(Duration::from_millis(2));
        }
        // Keep the connection open until the client has read everything.
        thread::sleep(Duration::from_millis(200));
    });
    (Client::connect(address).expect("connect"), server)
}

#[test]
fn a_reply_arriving_a_few_bytes_at_a_time_is_read_whole() {
    let reply = info_reply("build\t8.1.0.0\n");
    let pieces = reply.chunks(3).map(<[u8]>::to_vec).collect();
    let (mut client, server) = serve(pieces);
    assert_eq!(client.info("build").expect("info"), "8.1.0.0");
    server.join().expect("server");
}

#[test]
fn two_replies_in_one_segment_answer_two_calls() {
    let mut both = info_reply("build\t8.1.0.0\n");
    both.extend(info_reply("node\tBB9\n"));
    let (mut client, server) = serve(vec![both]);
    assert_eq!(client.info("build").expect("first"), "8.1.0.0");
    assert_eq!(client.info("node").expect("second"), "BB9");
    server.join().expect("server");
}
