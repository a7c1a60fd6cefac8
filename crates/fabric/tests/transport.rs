//! The fabric through its public API: fabrics on a [`MemoryNetwork`] (tokio's clock paused,
//! so timings are exact and fast) and one pair on real TCP loopback. Handshakes and learning
//! node ids from seeds, requests matched by id, call order kept, connections cut and
//! healed, suspicion, and the peers a fabric must refuse: garbage, another cluster, a frame
//! over the limit.
//!
//! The randomized test prints its seed; `FABRIC_SEED=<n> cargo test -p fabric --test
//! transport` replays it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use fabric::{Channel, Fabric, FabricError, MemoryNetwork, Network, TcpNetwork};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;
use tokio::time::sleep;
use wire_fabric::MessageType;

use support::{
    CLUSTER, HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_COUNT, Recorder, closed_by_peer, config,
    connected_to, forward, raw_header, raw_hello, read_raw_frame, reply_payload, start, start_with,
    suspects, wait_until, write_raw,
};

/// The seed from `FABRIC_SEED`, or a fresh one; printed so a failure can be replayed.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("FABRIC_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("{test}: FABRIC_SEED={seed}");
    seed
}

/// Nodes 1 and 2, node 1 seeded with node 2's address, both connected both ways.
async fn connected_pair(
    network: &MemoryNetwork,
) -> ((Fabric, Arc<Recorder>), (Fabric, Arc<Recorder>)) {
    let (a, a_recorder) = start(network, 1, "a").await;
    let (b, b_recorder) = start(network, 2, "b").await;
    a.add_peer("b");
    wait_until("a and b are connected both ways", || {
        connected_to(&a, 2) && connected_to(&b, 1)
    })
    .await;
    ((a, a_recorder), (b, b_recorder))
}

/// Node 1 knows only node 2's address; the handshake tells it node 2's id, and node 2 learns
/// node 1 (and its fabric address) from the `Hello`, so it dials back.
#[tokio::test(start_paused = true)]
async fn two_fabrics_learn_each_other_from_one_seed_address() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let a_peers = a.peers();
    assert_eq!(a_peers.len(), 1);
    assert_eq!(
        (a_peers[0].node_id, a_peers[0].address.as_str()),
        (Some(2), "b")
    );
    let b_peers = b.peers();
    assert_eq!(b_peers.len(), 1);
    assert_eq!(
        (b_peers[0].node_id, b_peers[0].address.as_str()),
        (Some(1), "a")
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// Seeds in a ring (1 knows 2, 2 knows 3, 3 knows 1): every node ends up connected to both
/// others, by seed or by being dialed.
#[tokio::test(start_paused = true)]
async fn three_fabrics_seeded_in_a_ring_learn_every_node_id() {
    let network = MemoryNetwork::new();
    let (a, _) = start(&network, 1, "a").await;
    let (b, _) = start(&network, 2, "b").await;
    let (c, _) = start(&network, 3, "c").await;
    a.add_peer("b");
    b.add_peer("c");
    c.add_peer("a");
    wait_until("every node is connected to both others", || {
        connected_to(&a, 2)
            && connected_to(&a, 3)
            && connected_to(&b, 1)
            && connected_to(&b, 3)
            && connected_to(&c, 1)
            && connected_to(&c, 2)
    })
    .await;
    for fabric in [&a, &b, &c] {
        assert_eq!(fabric.peers().len(), 2, "{fabric:?}");
        fabric.shutdown().await;
    }
}

/// Many requests in flight at once, each answered after a random delay so that replies come
/// back out of order: each caller gets the reply to its own request.
#[tokio::test(start_paused = true)]
async fn concurrent_requests_are_matched_to_their_replies_by_id() {
    let mut rng = SmallRng::seed_from_u64(seed("concurrent_requests"));
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let mut requests = JoinSet::new();
    for request_index in 0..500_u32 {
        let payload = request_index.to_be_bytes();
        let delay_ms = rng.random_range(0..50);
        let reply = a.request(2, &forward(&payload, delay_ms));
        requests.spawn(async move { (payload, reply.await) });
    }
    while let Some(joined) = requests.join_next().await {
        let (payload, reply) = joined.unwrap();
        assert_eq!(reply_payload(&reply.unwrap()), payload);
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// 1,000 frames to one peer, alternating `send` and `request` (whose futures are awaited only
/// at the end): the handler sees them in the order of the calls.
#[tokio::test(start_paused = true)]
async fn frames_to_one_peer_arrive_in_call_order() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, b_recorder)) = connected_pair(&network).await;
    let mut replies = Vec::new();
    for sequence in 0..1_000_u32 {
        let payload = sequence.to_be_bytes();
        if sequence % 2 == 0 {
            a.send(2, &forward(&payload, 0)).unwrap();
        } else {
            replies.push(a.request(2, &forward(&payload, 0)));
        }
    }
    for reply in replies {
        reply.await.unwrap();
    }
    wait_until("every frame arrived", || {
        b_recorder.forwards.lock().len() == 1_000
    })
    .await;
    let arrived: Vec<Vec<u8>> = b_recorder
        .forwards
        .lock()
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    let sent: Vec<Vec<u8>> = (0..1_000_u32).map(|s| s.to_be_bytes().to_vec()).collect();
    assert_eq!(arrived, sent);
    assert!(
        b_recorder
            .forwards
            .lock()
            .iter()
            .all(|(from, _)| *from == 1)
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// A request waits for a slow reply when the network cuts the connection: it fails with
/// "connection lost" (maybe delivered), new requests fail with "not connected" (not sent)
/// while the partition lasts, and after the heal the dialer reconnects and requests work.
#[tokio::test(start_paused = true)]
async fn cut_connection_fails_pending_requests_and_reconnects_after_heal() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let slow = a.request(2, &forward(b"slow", 500));
    sleep(Duration::from_millis(10)).await;
    network.partition("a", "b");
    let error = slow.await.unwrap_err();
    assert_eq!(error, FabricError::ConnectionLost { node_id: 2 });
    assert!(error.maybe_delivered());
    wait_until("a notices the cut", || !connected_to(&a, 2)).await;
    let error = a.request(2, &forward(b"refused", 0)).await.unwrap_err();
    assert_eq!(error, FabricError::NotConnected { node_id: 2 });
    assert!(!error.maybe_delivered());
    sleep(Duration::from_millis(500)).await;
    assert!(!connected_to(&a, 2), "a dial got through a partition");
    network.heal("a", "b");
    wait_until("a reconnects after the heal", || connected_to(&a, 2)).await;
    let reply = a.request(2, &forward(b"again", 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), b"again");
    a.shutdown().await;
    b.shutdown().await;
}

/// Heartbeats every 10 ms, suspect after 5 silent intervals: a partitioned peer is not
/// suspect 30 ms into the partition, is suspect from 50 ms (at most 60 ms), and stops being
/// suspect once the heal lets heartbeats through again. Heartbeats carry the map version.
#[tokio::test(start_paused = true)]
async fn partitioned_peer_becomes_suspect_after_the_timeout_and_recovers_after_heal() {
    let network = MemoryNetwork::new();
    let ((a, a_recorder), (b, _)) = connected_pair(&network).await;
    b.set_map_version(7);
    wait_until("a hears b's map version", || {
        a_recorder.heartbeats.lock().contains(&(2, 7))
    })
    .await;
    assert!(!suspects(&a, 2));
    network.partition("a", "b");
    sleep(Duration::from_millis(30)).await;
    assert!(!suspects(&a, 2), "suspect before the timeout");
    let timeout_ms = HEARTBEAT_INTERVAL_MS * u64::from(HEARTBEAT_TIMEOUT_COUNT);
    sleep(Duration::from_millis(timeout_ms)).await;
    assert!(suspects(&a, 2), "not suspect after the timeout");
    assert!(suspects(&b, 1));
    network.heal("a", "b");
    wait_until("neither suspects the other", || {
        !suspects(&a, 2) && !suspects(&b, 1)
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
}

/// A one-way drop from a to b: b stops hearing a after the timeout while a still hears b
/// (b's heartbeats travel on streams whose a-to-b half is held); healed, the held bytes
/// arrive and b hears a again.
#[tokio::test(start_paused = true)]
async fn a_one_way_drop_makes_only_the_receiving_side_suspect() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    network.drop_one_way("a", "b");
    let timeout_ms = HEARTBEAT_INTERVAL_MS * u64::from(HEARTBEAT_TIMEOUT_COUNT);
    sleep(Duration::from_millis(2 * timeout_ms)).await;
    assert!(
        suspects(&b, 1),
        "b still hears a through a one-way drop from a"
    );
    assert!(
        !suspects(&a, 2),
        "a stopped hearing b, whose bytes still arrive"
    );
    assert!(
        network.endpoint("a").dial("b").await.is_err(),
        "a dial across a one-way drop connected"
    );
    network.heal_one_way("a", "b");
    wait_until("b hears a again", || !suspects(&b, 1)).await;
    assert!(!suspects(&a, 2));
    a.shutdown().await;
    b.shutdown().await;
}

/// A raw peer sends bytes that are not a frame, first instead of a `Hello` and then after a
/// good handshake: each time its connection is closed, and node 1's connection to node 2
/// goes on serving requests.
#[tokio::test(start_paused = true)]
async fn peer_sending_garbage_is_disconnected_without_affecting_others() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let evil = network.endpoint("evil");
    let mut before_hello = evil.dial("b").await.unwrap();
    write_raw(&mut before_hello, b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(closed_by_peer(&mut before_hello).await);
    let mut after_hello = evil.dial("b").await.unwrap();
    write_raw(&mut after_hello, &raw_hello(66, CLUSTER)).await;
    assert!(
        read_raw_frame(&mut after_hello).await.is_some(),
        "no HelloAck"
    );
    write_raw(&mut after_hello, &[0xff; 64]).await;
    assert!(closed_by_peer(&mut after_hello).await);
    let reply = a.request(2, &forward(b"still fine", 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), b"still fine");
    assert!(connected_to(&a, 2) && connected_to(&b, 1));
    a.shutdown().await;
    b.shutdown().await;
}

/// Node 3 belongs to another cluster and is seeded with node 2's address: node 2 answers its
/// `Hello` (so node 3 can log why) and closes; neither learns the other, and node 3 keeps
/// retrying with backoff without connecting.
#[tokio::test(start_paused = true)]
async fn peer_of_another_cluster_is_refused() {
    let network = MemoryNetwork::new();
    let (b, _) = start(&network, 2, "b").await;
    let mut other_config = config(3, "c");
    other_config.cluster_name = "another-cluster".to_owned();
    let (c, _) = start_with(&network, other_config).await;
    c.add_peer("b");
    sleep(Duration::from_millis(1_000)).await;
    let c_peers = c.peers();
    assert_eq!(c_peers.len(), 1);
    assert_eq!((c_peers[0].node_id, c_peers[0].connected), (None, false));
    assert!(b.peers().is_empty(), "{:?}", b.peers());
    let mut raw = network.endpoint("raw").dial("b").await.unwrap();
    write_raw(&mut raw, &raw_hello(4, "another-cluster")).await;
    assert!(read_raw_frame(&mut raw).await.is_some(), "no HelloAck");
    assert!(closed_by_peer(&mut raw).await);
    b.shutdown().await;
    c.shutdown().await;
}

/// Node 2 accepts bodies of at most 4 KiB. A raw peer handshakes, then sends only a header
/// declaring a body one byte over: the connection closes at once, before any body byte is
/// sent, so nothing waited for (or reserved) the declared size.
#[tokio::test(start_paused = true)]
async fn declared_frame_size_over_the_limit_closes_the_connection_before_the_body() {
    let network = MemoryNetwork::new();
    let mut b_config = config(2, "b");
    b_config.frame_body_size_bytes_max = 4096;
    let (b, _) = start_with(&network, b_config).await;
    let (a, _) = start(&network, 1, "a").await;
    a.add_peer("b");
    wait_until("a is connected", || {
        connected_to(&a, 2) && connected_to(&b, 1)
    })
    .await;
    let mut raw = network.endpoint("raw").dial("b").await.unwrap();
    write_raw(&mut raw, &raw_hello(9, CLUSTER)).await;
    assert!(read_raw_frame(&mut raw).await.is_some(), "no HelloAck");
    write_raw(&mut raw, &raw_header(MessageType::Forward as u8, 4097)).await;
    assert!(closed_by_peer(&mut raw).await);
    let reply = a.request(2, &forward(&[7; 4000], 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), [7; 4000]);
    a.shutdown().await;
    b.shutdown().await;
}

/// The write queue takes 4 frames; without yielding, the writer cannot drain it, so the
/// fifth call is refused at once as "overloaded" (not sent), and the four queued still go
/// out.
#[tokio::test(start_paused = true)]
async fn a_full_write_queue_refuses_at_once_with_overloaded() {
    let network = MemoryNetwork::new();
    let mut a_config = config(1, "a");
    a_config.write_queue_frames_max = 4;
    // Heartbeats only at start (before any connection), so none sits in the queue.
    a_config.heartbeat_interval_ms = 100_000;
    let (a, _) = start_with(&network, a_config).await;
    let (b, b_recorder) = start(&network, 2, "b").await;
    a.add_peer("b");
    wait_until("a is connected", || connected_to(&a, 2)).await;
    for sequence in 0..4_u8 {
        a.send(2, &forward(&[sequence], 0)).unwrap();
    }
    let error = a.send(2, &forward(b"fifth", 0)).unwrap_err();
    assert_eq!(error, FabricError::Overloaded { node_id: 2 });
    assert!(!error.maybe_delivered());
    wait_until("the four queued arrive", || {
        b_recorder.forwards.lock().len() == 4
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Bulk transfers travel on a connection of their own: with the bulk connection's write queue
/// full, a general request still goes out at once and is answered, and the bulk requests
/// queued before it are answered too. (On one connection, a slow link's megabytes of
/// partition records held the metadata group's messages back past their deadlines.)
#[tokio::test(start_paused = true)]
async fn a_full_bulk_channel_does_not_hold_back_general_requests() {
    let network = MemoryNetwork::new();
    let mut a_config = config(1, "a");
    a_config.write_queue_frames_max = 4;
    // Heartbeats only at start (before any connection), so none sits in a queue.
    a_config.heartbeat_interval_ms = 100_000;
    let (a, _) = start_with(&network, a_config).await;
    let (b, _) = start(&network, 2, "b").await;
    a.add_peer("b");
    wait_until("a is connected", || connected_to(&a, 2)).await;
    loop {
        match a.request_on(Channel::Bulk, 2, &forward(b"probe", 0)).await {
            Ok(_) => break,
            Err(FabricError::NotConnected { .. }) => sleep(Duration::from_millis(10)).await,
            Err(error) => panic!("the bulk connection failed: {error}"),
        }
    }
    let bulk: Vec<_> = (0..4_u8)
        .map(|sequence| a.request_on(Channel::Bulk, 2, &forward(&[sequence], 0)))
        .collect();
    let refused = a.request_on(Channel::Bulk, 2, &forward(b"fifth", 0)).await;
    assert_eq!(refused.unwrap_err(), FabricError::Overloaded { node_id: 2 });
    let general = a.request(2, &forward(b"general", 0)).await;
    assert_eq!(reply_payload(&general.expect("answered")), b"general");
    for (sequence, reply) in (0..4_u8).zip(bulk) {
        assert_eq!(reply_payload(&reply.await.expect("answered")), [sequence]);
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// Shutdown ends every task: a request waiting for a slow reply fails with "connection
/// lost", and `shutdown` returns.
#[tokio::test(start_paused = true)]
async fn shutdown_fails_waiting_requests_and_returns() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let slow = a.request(2, &forward(b"slow", 500));
    sleep(Duration::from_millis(10)).await;
    a.shutdown().await;
    assert_eq!(
        slow.await.unwrap_err(),
        FabricError::ConnectionLost { node_id: 2 }
    );
    assert!(a.peers().is_empty());
    b.shutdown().await;
}

/// A request whose handler never answers in time fails with "timeout" after the request
/// timeout.
#[tokio::test(start_paused = true)]
async fn unanswered_request_times_out() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let started = tokio::time::Instant::now();
    let error = a.request(2, &forward(b"late", 5_000)).await.unwrap_err();
    assert_eq!(
        error,
        FabricError::Timeout {
            node_id: 2,
            timeout_ms: support::REQUEST_TIMEOUT_MS
        }
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(support::REQUEST_TIMEOUT_MS)
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// The same handshake and round trip on real TCP loopback, ports picked by the system.
#[tokio::test]
async fn two_fabrics_on_tcp_loopback_exchange_requests() {
    let network: Arc<dyn Network> = Arc::new(TcpNetwork);
    let recorder = Arc::new(Recorder::default());
    let mut fabrics = Vec::new();
    for node_id in [1, 2] {
        let mut node_config = config(node_id, "127.0.0.1:0");
        node_config.request_timeout_ms = 5_000;
        let handler = Arc::clone(&recorder) as Arc<dyn fabric::FabricHandler>;
        fabrics.push(
            Fabric::start(node_config, Arc::clone(&network), handler)
                .await
                .unwrap(),
        );
    }
    let (a, b) = (&fabrics[0], &fabrics[1]);
    assert!(!b.local_address().ends_with(":0"));
    a.add_peer(b.local_address());
    wait_until("a and b are connected both ways", || {
        connected_to(a, 2) && connected_to(b, 1)
    })
    .await;
    let reply = a.request(2, &forward(b"over tcp", 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), b"over tcp");
    let reply = b.request(1, &forward(b"and back", 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), b"and back");
    for fabric in &fabrics {
        fabric.shutdown().await;
    }
}

/// With a one-way delay of 20 ms, a dial and a handshake take their round trips, and a
/// request's reply comes back exactly 40 ms after it was sent.
#[tokio::test(start_paused = true)]
async fn memory_network_delay_holds_every_byte_for_the_delay() {
    let network = MemoryNetwork::new();
    network.set_delay_ms(20);
    let ((a, _), (b, _)) = connected_pair(&network).await;
    let started = tokio::time::Instant::now();
    let reply = a.request(2, &forward(b"delayed", 0)).await.unwrap();
    assert_eq!(reply_payload(&reply), b"delayed");
    assert_eq!(started.elapsed(), Duration::from_millis(40));
    a.shutdown().await;
    b.shutdown().await;
}

/// `request_then`, the replication path: each callback runs exactly once, with the reply to
/// its own request (answered out of order), with "timeout" at most a tenth of the timeout
/// after the deadline, with "connection lost" when the connection is cut, and at once with
/// "not connected" when the request cannot be sent.
#[tokio::test(start_paused = true)]
async fn request_then_calls_back_once_with_the_reply_the_timeout_or_the_loss() {
    let network = MemoryNetwork::new();
    let ((a, _), (b, _)) = connected_pair(&network).await;
    type Outcomes = Arc<parking_lot::Mutex<Vec<(u32, Result<Vec<u8>, FabricError>)>>>;
    let outcomes: Outcomes = Arc::default();
    let call = |index: u32, delay_ms: u32| {
        let outcomes = Arc::clone(&outcomes);
        let payload = index.to_be_bytes();
        a.request_then(2, &forward(&payload, delay_ms), move |reply| {
            let reply = reply.map(|frame| reply_payload(&frame));
            outcomes.lock().push((index, reply));
        });
    };
    for index in 0..100 {
        call(index, 100 - index);
    }
    wait_until("every reply", || outcomes.lock().len() == 100).await;
    for (index, reply) in outcomes.lock().drain(..) {
        assert_eq!(reply.unwrap(), index.to_be_bytes());
    }

    let started = tokio::time::Instant::now();
    call(1_000, 60_000);
    wait_until("the timeout", || outcomes.lock().len() == 1).await;
    let late = started.elapsed() - Duration::from_millis(support::REQUEST_TIMEOUT_MS);
    assert!(
        late <= Duration::from_millis(support::REQUEST_TIMEOUT_MS / 10),
        "{late:?}"
    );
    let timeout = FabricError::Timeout {
        node_id: 2,
        timeout_ms: support::REQUEST_TIMEOUT_MS,
    };
    assert_eq!(outcomes.lock().pop(), Some((1_000, Err(timeout))));

    call(2_000, 500);
    sleep(Duration::from_millis(10)).await;
    network.partition("a", "b");
    wait_until("the loss", || outcomes.lock().len() == 1).await;
    let lost = FabricError::ConnectionLost { node_id: 2 };
    assert_eq!(outcomes.lock().pop(), Some((2_000, Err(lost))));
    wait_until("a notices the cut", || !connected_to(&a, 2)).await;
    call(3_000, 0);
    let refused = FabricError::NotConnected { node_id: 2 };
    assert_eq!(outcomes.lock().pop(), Some((3_000, Err(refused))));
    sleep(Duration::from_millis(support::REQUEST_TIMEOUT_MS * 2)).await;
    assert!(outcomes.lock().is_empty(), "a callback ran twice");
    a.shutdown().await;
    b.shutdown().await;
}
