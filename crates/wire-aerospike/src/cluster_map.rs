//! The partition map and peer list as Aerospike's smart clients read them, byte for byte.
//!
//! A client learns the cluster from info commands: `peers-clear-std` (and `-alt`) names the
//! other nodes and their addresses, and `replicas` tells which partitions this node claims in
//! each column (column 0 = master, column k = the k-th replica). This module formats those
//! replies from plain inputs, and parses them back for our own benchmark tool, which learns the
//! map the way a smart client does. Formats: `cluster.md` §2.2, from the server's
//! `as_partition_get_replicas_all_str` and `service_list.c` `build_peers`.
//!
//! Invariants:
//! - A [`PartitionBitmap`] is 512 bytes; the bit of partition p is `byte[p >> 3] & (0x80 >>
//!   (p & 7))`; its text form is standard base64 with padding, exactly 684 characters (the C
//!   client rejects any other length).
//! - A `replicas` reply lists every namespace with at least one column; a namespace with none
//!   (before the first balance) is reported as one column with no bit set, as the server does.
//! - A peers reply never lists the replying node itself, nor a peer without an address; an
//!   address whose port is [`DEFAULT_SERVICE_PORT`] is written without its port.
//! - The parsers return an error for any malformed input and never panic.
//! - A partition id given to a bitmap is below [`PARTITION_COUNT`] (`model`'s invariant); one
//!   that is not is a bug, and indexing panics on it.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use model::{NodeId, PARTITION_COUNT, PartitionId};

/// Size of a partition bitmap: one bit per partition.
pub const BITMAP_SIZE_BYTES: usize = PARTITION_COUNT / 8;

/// Length of a bitmap in base64 with padding, the only length clients accept.
pub const BITMAP_BASE64_SIZE_CHARS: usize = 684;

const _: () = assert!(PARTITION_COUNT.is_multiple_of(8));
const _: () = assert!(BITMAP_BASE64_SIZE_CHARS == BITMAP_SIZE_BYTES.div_ceil(3) * 4);

/// The service port clients assume; peers replies leave it out of addresses (`:3000` is
/// stripped) and state it once in their second field.
pub const DEFAULT_SERVICE_PORT: u16 = 3000;

/// How much of an offending piece of text an error keeps, so that garbage stays small.
const ERROR_EXCERPT_CHARS_MAX: usize = 32;

/// One bit per partition: the partitions a node claims in one column of the map.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PartitionBitmap {
    bytes: [u8; BITMAP_SIZE_BYTES],
}

impl PartitionBitmap {
    /// No partition.
    pub fn empty() -> PartitionBitmap {
        PartitionBitmap {
            bytes: [0; BITMAP_SIZE_BYTES],
        }
    }

    /// Every partition.
    pub fn full() -> PartitionBitmap {
        PartitionBitmap {
            bytes: [0xFF; BITMAP_SIZE_BYTES],
        }
    }

    /// The bitmap with these bytes, partition 0 in the top bit of byte 0.
    pub fn from_bytes(bytes: [u8; BITMAP_SIZE_BYTES]) -> PartitionBitmap {
        PartitionBitmap { bytes }
    }

    /// The bytes, partition 0 in the top bit of byte 0.
    pub fn as_bytes(&self) -> &[u8; BITMAP_SIZE_BYTES] {
        &self.bytes
    }

    /// Sets the bit of `pid`.
    pub fn insert(&mut self, pid: PartitionId) {
        let (byte_index, mask) = bit_position(pid);
        self.bytes[byte_index] |= mask;
    }

    /// Clears the bit of `pid`.
    pub fn remove(&mut self, pid: PartitionId) {
        let (byte_index, mask) = bit_position(pid);
        self.bytes[byte_index] &= !mask;
    }

    /// Whether the bit of `pid` is set.
    pub fn contains(&self, pid: PartitionId) -> bool {
        let (byte_index, mask) = bit_position(pid);
        self.bytes[byte_index] & mask != 0
    }

    /// How many partitions are set.
    pub fn count(&self) -> usize {
        self.bytes
            .iter()
            .map(|byte| byte.count_ones() as usize)
            .sum()
    }

    /// The partitions set, in order.
    pub fn partition_ids(&self) -> impl Iterator<Item = PartitionId> + '_ {
        PartitionId::all().filter(|&pid| self.contains(pid))
    }

    /// The 684-character standard base64 form clients parse.
    pub fn to_base64(&self) -> String {
        BASE64.encode(self.bytes)
    }

    /// Reads the 684-character standard base64 form.
    ///
    /// # Errors
    /// [`ParseError::BadBitmap`] for any other length, or text that is not canonical base64.
    pub fn from_base64(text: &str) -> Result<PartitionBitmap, ParseError> {
        if text.len() != BITMAP_BASE64_SIZE_CHARS {
            return Err(ParseError::BadBitmap);
        }
        let decoded = BASE64.decode(text).map_err(|_| ParseError::BadBitmap)?;
        let bytes = decoded.try_into().map_err(|_| ParseError::BadBitmap)?;
        Ok(PartitionBitmap { bytes })
    }
}

impl Default for PartitionBitmap {
    fn default() -> PartitionBitmap {
        PartitionBitmap::empty()
    }
}

impl fmt::Debug for PartitionBitmap {
    /// The count of partitions set: 512 bytes would drown any assertion message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PartitionBitmap({} partitions)", self.count())
    }
}

/// What this node claims in one namespace: the input of the `replicas` replies, and what
/// [`parse_replicas`] gives back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceClaims {
    /// The namespace's name.
    pub name: String,
    /// The rebalance regime: 0 for AP namespaces; it must never go backwards (clients keep
    /// the highest they saw).
    pub regime: u32,
    /// Per column (0 = master, k = k-th replica), the partitions this node claims there. A
    /// node sets a bit only where it can serve: as working master, or as a fully migrated
    /// replica.
    pub columns: Vec<PartitionBitmap>,
}

/// A node this one reports to clients, with the addresses clients should connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer's node id.
    pub node_id: NodeId,
    /// Its service addresses, in the order clients should try them.
    pub addresses: Vec<SocketAddr>,
    /// The name its TLS certificate carries (`peers-tls-std`); empty for clear addresses.
    pub tls_name: String,
}

/// A peers reply as a client reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerList {
    /// The peers generation; it changes whenever the list changes.
    pub generation: u64,
    /// The port of addresses written without one.
    pub default_port: u16,
    /// The other nodes.
    pub peers: Vec<ParsedPeer>,
}

/// One peer of a [`PeerList`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedPeer {
    /// The peer's node id.
    pub node_id: NodeId,
    /// Its TLS name; empty in clear (non-TLS) replies.
    pub tls_name: String,
    /// Its addresses, with the default port filled in where none was written.
    pub addresses: Vec<PeerAddress>,
}

/// An address from a peers reply: an IP address (IPv6 without its brackets) or a DNS name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerAddress {
    /// The IP address or host name.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl PeerAddress {
    /// The socket address, when the host is an IP address rather than a name to resolve.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let ip: IpAddr = self.host.parse().ok()?;
        Some(SocketAddr::new(ip, self.port))
    }
}

/// A reply that is not in the format clients expect.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A structural piece is missing or out of place.
    #[error("malformed reply: expected {expected} at {excerpt:?}")]
    Malformed {
        /// What the grammar wanted there.
        expected: &'static str,
        /// The start of the remaining text.
        excerpt: String,
    },
    /// A number (generation, port, regime, column count or node id) does not parse.
    #[error("bad {field}: {excerpt:?}")]
    BadNumber {
        /// Which field.
        field: &'static str,
        /// The start of the offending text.
        excerpt: String,
    },
    /// A bitmap is not 684 characters of canonical base64.
    #[error("a partition bitmap is not {BITMAP_BASE64_SIZE_CHARS} characters of base64")]
    BadBitmap,
    /// A namespace declares a column count different from the bitmaps it carries.
    #[error("namespace {namespace:?} declares {declared} columns but carries {found}")]
    ColumnCount {
        /// The namespace's name.
        namespace: String,
        /// The count written in the reply.
        declared: usize,
        /// The bitmaps that follow it.
        found: usize,
    },
}

/// The `replicas` reply: `<ns>:<regime>,<n>,<b64_0>,…,<b64_{n-1}>` per namespace, joined by
/// `;`. `columns_max` is `replicas:max=<k>`: at most k columns per namespace (`None` or 0:
/// no cap, as in the server).
pub fn format_replicas(namespaces: &[NamespaceClaims], columns_max: Option<usize>) -> String {
    join_namespaces(namespaces, |out, claims| {
        out.push_str(&claims.regime.to_string());
        out.push(',');
        push_columns(out, claims, columns_max);
    })
}

/// The older `replicas-all` reply: `<ns>:<n>,<b64_0>,…` per namespace, joined by `;`.
pub fn format_replicas_all(namespaces: &[NamespaceClaims]) -> String {
    join_namespaces(namespaces, |out, claims| push_columns(out, claims, None))
}

/// The older `replicas-master` reply: `<ns>:<master bitmap>` per namespace, joined by `;`.
pub fn format_replicas_master(namespaces: &[NamespaceClaims]) -> String {
    join_namespaces(namespaces, |out, claims| {
        let master = claims.columns.first();
        out.push_str(&master.cloned().unwrap_or_default().to_base64());
    })
}

/// The `peers-clear-std` (or `-alt`) reply: `<generation>,3000,[<peer>,…]` with peer
/// `[<node-id>,,[<addr>,…]]`. `self_node_id` and peers without addresses are left out,
/// the others keep the given order.
pub fn format_peers(generation: u64, self_node_id: NodeId, peers: &[Peer]) -> String {
    let listed = peers
        .iter()
        .filter(|peer| peer.node_id != self_node_id && !peer.addresses.is_empty());
    let peer_texts: Vec<String> = listed
        .map(|peer| {
            let addresses: Vec<String> = peer.addresses.iter().map(format_address).collect();
            format!(
                "[{},{},[{}]]",
                peer.node_id,
                peer.tls_name,
                addresses.join(",")
            )
        })
        .collect();
    format!(
        "{generation},{DEFAULT_SERVICE_PORT},[{}]",
        peer_texts.join(",")
    )
}

/// Reads a `replicas` reply back (the format of [`format_replicas`]). Empty segments, such as
/// a trailing `;`, are skipped.
///
/// # Errors
/// Any [`ParseError`]: a segment without `:`, an empty name, a bad regime or count, a count
/// that differs from the bitmaps given, or a bad bitmap.
pub fn parse_replicas(reply: &str) -> Result<Vec<NamespaceClaims>, ParseError> {
    reply
        .split(';')
        .filter(|segment| !segment.is_empty())
        .map(parse_namespace_claims)
        .collect()
}

/// Reads a peers reply back (the format of [`format_peers`], including TLS names and DNS
/// names).
///
/// # Errors
/// Any [`ParseError`] where the text departs from the grammar.
pub fn parse_peers(reply: &str) -> Result<PeerList, ParseError> {
    let mut cursor = Cursor { rest: reply };
    let generation = parse_number(cursor.take_until(&[',']), "peers generation")?;
    cursor.expect(',')?;
    let default_port = parse_number(cursor.take_until(&[',']), "default port")?;
    cursor.expect(',')?;
    let peers = cursor.parse_list(|cursor| cursor.parse_peer(default_port))?;
    if !cursor.rest.is_empty() {
        return Err(cursor.malformed("end of reply"));
    }
    Ok(PeerList {
        generation,
        default_port,
        peers,
    })
}

/// The byte holding `pid`'s bit, and the bit's mask.
fn bit_position(pid: PartitionId) -> (usize, u8) {
    // Partition ids are below PARTITION_COUNT, so the byte index is below 512.
    let index = pid.index();
    (index >> 3, 0x80 >> (index & 7))
}

/// Writes `<name>:<body>` for each namespace, joined by `;` with none trailing.
fn join_namespaces(
    namespaces: &[NamespaceClaims],
    mut push_body: impl FnMut(&mut String, &NamespaceClaims),
) -> String {
    let columns_total: usize = namespaces.iter().map(|claims| claims.columns.len()).sum();
    let mut out = String::with_capacity((columns_total + 1) * (BITMAP_BASE64_SIZE_CHARS + 1));
    for (namespace_index, claims) in namespaces.iter().enumerate() {
        if namespace_index > 0 {
            out.push(';');
        }
        out.push_str(&claims.name);
        out.push(':');
        push_body(&mut out, claims);
    }
    out
}

/// Writes `<n>,<b64_0>,…`: at most `columns_max` columns, and one empty column for none.
fn push_columns(out: &mut String, claims: &NamespaceClaims, columns_max: Option<usize>) {
    let empty = [PartitionBitmap::empty()];
    let columns = if claims.columns.is_empty() {
        &empty[..]
    } else {
        &claims.columns[..]
    };
    let column_count = match columns_max {
        Some(max) if max > 0 => columns.len().min(max),
        _ => columns.len(),
    };
    out.push_str(&column_count.to_string());
    for column in &columns[..column_count] {
        out.push(',');
        out.push_str(&column.to_base64());
    }
}

/// `ip`, `ip:port`, `[v6]` or `[v6]:port`, the port left out when it is the default.
fn format_address(address: &SocketAddr) -> String {
    let host = match address {
        SocketAddr::V4(v4) => v4.ip().to_string(),
        SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
    };
    if address.port() == DEFAULT_SERVICE_PORT {
        host
    } else {
        format!("{host}:{}", address.port())
    }
}

/// One `<ns>:<regime>,<n>,<b64…>` segment.
fn parse_namespace_claims(segment: &str) -> Result<NamespaceClaims, ParseError> {
    let (name, body) = segment
        .split_once(':')
        .ok_or_else(|| malformed("`:` after the namespace name", segment))?;
    if name.is_empty() {
        return Err(malformed("a namespace name", segment));
    }
    let mut fields = body.split(',');
    let regime = parse_number(fields.next().unwrap_or_default(), "regime")?;
    let declared = parse_number(fields.next().unwrap_or_default(), "column count")?;
    let columns: Vec<PartitionBitmap> = fields
        .map(PartitionBitmap::from_base64)
        .collect::<Result<_, _>>()?;
    if columns.len() != declared {
        return Err(ParseError::ColumnCount {
            namespace: name.to_owned(),
            declared,
            found: columns.len(),
        });
    }
    Ok(NamespaceClaims {
        name: name.to_owned(),
        regime,
        columns,
    })
}

/// A decimal number; `+`, `-` and spaces are refused.
fn parse_number<T: std::str::FromStr>(text: &str, field: &'static str) -> Result<T, ParseError> {
    let digits_only = !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    let parsed = if digits_only { text.parse().ok() } else { None };
    parsed.ok_or_else(|| ParseError::BadNumber {
        field,
        excerpt: excerpt(text),
    })
}

fn malformed(expected: &'static str, at: &str) -> ParseError {
    ParseError::Malformed {
        expected,
        excerpt: excerpt(at),
    }
}

/// The first few characters of `text`, for an error message.
fn excerpt(text: &str) -> String {
    text.chars().take(ERROR_EXCERPT_CHARS_MAX).collect()
}

/// A reading position in a peers reply. Every successful step consumes at least one byte,
/// so parsing ends within the length of the reply.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    fn malformed(&self, expected: &'static str) -> ParseError {
        malformed(expected, self.rest)
    }

    /// Consumes `wanted`, or fails without consuming.
    fn expect(&mut self, wanted: char) -> Result<(), ParseError> {
        match self.rest.strip_prefix(wanted) {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(self.malformed(match wanted {
                '[' => "`[`",
                ']' => "`]`",
                ',' => "`,`",
                _ => "a delimiter",
            })),
        }
    }

    /// Consumes and returns everything before the first of `stops` (or the end).
    fn take_until(&mut self, stops: &[char]) -> &'a str {
        let end = self.rest.find(stops).unwrap_or(self.rest.len());
        let (taken, rest) = self.rest.split_at(end);
        self.rest = rest;
        taken
    }

    /// `[]` or `[<item>,…]`.
    fn parse_list<T>(
        &mut self,
        mut parse_item: impl FnMut(&mut Cursor<'a>) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        self.expect('[')?;
        let mut items = Vec::new();
        if self.expect(']').is_ok() {
            return Ok(items);
        }
        loop {
            items.push(parse_item(self)?);
            if self.expect(']').is_ok() {
                return Ok(items);
            }
            self.expect(',')?;
        }
    }

    /// `[<node-id>,<tls-name>,[<addr>,…]]`.
    fn parse_peer(&mut self, default_port: u16) -> Result<ParsedPeer, ParseError> {
        self.expect('[')?;
        let node_text = self.take_until(&[',']);
        let node_id = node_text.parse().map_err(|_| ParseError::BadNumber {
            field: "node id",
            excerpt: excerpt(node_text),
        })?;
        self.expect(',')?;
        let tls_name = self.take_until(&[',', '[', ']']).to_owned();
        self.expect(',')?;
        let addresses = self.parse_list(|cursor| cursor.parse_address(default_port))?;
        self.expect(']')?;
        Ok(ParsedPeer {
            node_id,
            tls_name,
            addresses,
        })
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    fn parse_address(&mut self, default_port: u16) -> Result<PeerAddress, ParseError> {
        let host = if self.expect('[').is_ok() {
            let host = self.take_until(&[']', ',', '[']);
            self.expect(']')?;
            host
        } else {
            let host = self.take_until(&[':', ',', ']', '[']);
            if host.contains(':') {
                return Err(self.malformed("an address"));
            }
            host
        };
        if host.is_empty() {
            return Err(self.malformed("a host"));
        }
        let port = if self.expect_colon() {
            parse_number(self.take_until(&[',', ']']), "port")?
        } else {
            default_port
        };
        Ok(PeerAddress {
            host: host.to_owned(),
            port,
        })
    }

    /// Consumes a `:` if one comes next.
    fn expect_colon(&mut self) -> bool {
        match self.rest.strip_prefix(':') {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV6};

    use super::*;

    fn bitmap_of(pids: &[u16]) -> PartitionBitmap {
        let mut bitmap = PartitionBitmap::empty();
        for &pid in pids {
            bitmap.insert(PartitionId(pid));
        }
        bitmap
    }

    fn claims(name: &str, regime: u32, columns: Vec<PartitionBitmap>) -> NamespaceClaims {
        NamespaceClaims {
            name: name.to_owned(),
            regime,
            columns,
        }
    }

    fn base64_of_zeros() -> String {
        // 170 groups of three zero bytes, then two zero bytes.
        format!("{}AAA=", "A".repeat(680))
    }

    #[test]
    fn bitmap_of_partition_zero_sets_the_top_bit_of_the_first_byte() {
        let bitmap = bitmap_of(&[0]);
        assert_eq!(bitmap.as_bytes()[0], 0x80);
        let text = bitmap.to_base64();
        assert_eq!(text.len(), BITMAP_BASE64_SIZE_CHARS);
        assert_eq!(text, format!("gA{}AAA=", "A".repeat(678)));
    }

    #[test]
    fn bitmap_bits_follow_the_server_layout() {
        let bitmap = bitmap_of(&[7, 9, 4095]);
        assert_eq!(bitmap.as_bytes()[0], 0x01);
        assert_eq!(bitmap.as_bytes()[1], 0x40);
        assert_eq!(bitmap.as_bytes()[511], 0x01);
        assert_eq!(bitmap.count(), 3);
        let pids: Vec<u16> = bitmap.partition_ids().map(|pid| pid.0).collect();
        assert_eq!(pids, [7, 9, 4095]);
        let mut cleared = bitmap.clone();
        cleared.remove(PartitionId(9));
        assert!(!cleared.contains(PartitionId(9)) && cleared.contains(PartitionId(7)));
    }

    #[test]
    fn full_and_empty_bitmaps_have_the_expected_base64() {
        assert_eq!(
            PartitionBitmap::full().to_base64(),
            format!("{}8=", "/".repeat(682))
        );
        assert_eq!(PartitionBitmap::empty().to_base64(), base64_of_zeros());
        assert_eq!(PartitionBitmap::full().count(), PARTITION_COUNT);
    }

    #[test]
    fn bitmap_base64_round_trips_and_refuses_other_lengths_or_alphabets() {
        let bitmap = bitmap_of(&[1, 2, 3, 1000, 4000]);
        let text = bitmap.to_base64();
        assert_eq!(PartitionBitmap::from_base64(&text), Ok(bitmap));
        let short = &text[..680];
        let url_safe = text.replace('A', "-");
        let unpadded = format!("{}AAAA", &text[..680]);
        for garbage in [short, "", &url_safe, &unpadded, &"é".repeat(342)] {
            assert_eq!(
                PartitionBitmap::from_base64(garbage),
                Err(ParseError::BadBitmap)
            );
        }
    }

    #[test]
    fn replicas_reply_lists_regime_count_and_columns_per_namespace() {
        let namespaces = [
            claims("test", 0, vec![bitmap_of(&[0]), PartitionBitmap::empty()]),
            claims("bar", 3, vec![PartitionBitmap::full()]),
        ];
        let master_pid_0 = bitmap_of(&[0]).to_base64();
        let full = PartitionBitmap::full().to_base64();
        let expected = format!(
            "test:0,2,{master_pid_0},{};bar:3,1,{full}",
            base64_of_zeros()
        );
        assert_eq!(format_replicas(&namespaces, None), expected);
        assert_eq!(format_replicas(&namespaces, Some(0)), expected);
        let capped = format!("test:0,1,{master_pid_0};bar:3,1,{full}");
        assert_eq!(format_replicas(&namespaces, Some(1)), capped);
        assert_eq!(format_replicas(&[], None), "");
    }

    #[test]
    fn namespace_without_columns_reports_one_empty_column() {
        let namespaces = [claims("test", 0, vec![])];
        let empty = base64_of_zeros();
        assert_eq!(
            format_replicas(&namespaces, None),
            format!("test:0,1,{empty}")
        );
        assert_eq!(format_replicas_all(&namespaces), format!("test:1,{empty}"));
        assert_eq!(format_replicas_master(&namespaces), format!("test:{empty}"));
    }

    #[test]
    fn older_replicas_replies_drop_the_regime_or_keep_only_the_master() {
        let namespaces = [
            claims("a", 5, vec![bitmap_of(&[0]), PartitionBitmap::full()]),
            claims("b", 5, vec![PartitionBitmap::full()]),
        ];
        let (pid_0, full) = (
            bitmap_of(&[0]).to_base64(),
            PartitionBitmap::full().to_base64(),
        );
        assert_eq!(
            format_replicas_all(&namespaces),
            format!("a:2,{pid_0},{full};b:1,{full}")
        );
        assert_eq!(
            format_replicas_master(&namespaces),
            format!("a:{pid_0};b:{full}")
        );
    }

    #[test]
    fn replicas_reply_parses_back_to_the_same_claims() {
        let namespaces = vec![
            claims("test", 0, vec![bitmap_of(&[0, 17]), bitmap_of(&[4095])]),
            claims("other", 7, vec![PartitionBitmap::full()]),
        ];
        let reply = format_replicas(&namespaces, None);
        assert_eq!(parse_replicas(&reply), Ok(namespaces.clone()));
        assert_eq!(parse_replicas(&format!("{reply};")), Ok(namespaces));
        assert_eq!(parse_replicas(""), Ok(vec![]));
    }

    #[test]
    fn malformed_replicas_replies_are_errors() {
        let empty = base64_of_zeros();
        let huge_count = format!("test:0,99999999999999999999999,{empty}");
        let cases = [
            "test".to_owned(),
            format!(":0,1,{empty}"),
            format!("test:x,1,{empty}"),
            format!("test:-1,1,{empty}"),
            format!("test:0,2,{empty}"),
            format!("test:0,1,{empty},{empty}"),
            "test:0,1,AAAA".to_owned(),
            "test:0".to_owned(),
            "test:".to_owned(),
            huge_count,
            "\u{0}:\u{0},,;;".to_owned(),
        ];
        for reply in &cases {
            assert!(parse_replicas(reply).is_err(), "{reply:?}");
        }
        assert_eq!(
            parse_replicas(&format!("test:0,2,{empty}")),
            Err(ParseError::ColumnCount {
                namespace: "test".to_owned(),
                declared: 2,
                found: 1
            })
        );
    }

    #[test]
    fn peers_reply_strips_the_default_port_and_leaves_out_self() {
        let self_node_id = NodeId(0xBB9020011AC4202);
        let peers = [
            Peer {
                node_id: NodeId(0xBB9030011AC4202),
                addresses: vec![SocketAddr::from((Ipv4Addr::new(10, 0, 0, 3), 3000))],
                tls_name: String::new(),
            },
            Peer {
                node_id: self_node_id,
                addresses: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 3000))],
                tls_name: String::new(),
            },
            Peer {
                node_id: NodeId(0xBB9010011AC4202),
                addresses: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 3010))],
                tls_name: String::new(),
            },
        ];
        assert_eq!(
            format_peers(7, self_node_id, &peers),
            "7,3000,[[BB9030011AC4202,,[10.0.0.3]],[BB9010011AC4202,,[127.0.0.1:3010]]]"
        );
    }

    #[test]
    fn tls_peers_carry_their_name_and_keep_their_port() {
        let peers = [Peer {
            node_id: NodeId(0xA1),
            addresses: vec![SocketAddr::from((Ipv4Addr::new(10, 0, 0, 3), 4333))],
            tls_name: "node1.example".to_owned(),
        }];
        let reply = format_peers(7, NodeId(0xA0), &peers);
        assert_eq!(reply, "7,3000,[[A1,node1.example,[10.0.0.3:4333]]]");
        let parsed = parse_peers(&reply).expect("our own format");
        assert_eq!(parsed.peers[0].tls_name, "node1.example");
    }

    #[test]
    fn peers_reply_brackets_ipv6_and_skips_peers_without_addresses() {
        let v6 = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let peers = [
            Peer {
                node_id: NodeId(0xA1),
                addresses: vec![
                    SocketAddr::from((Ipv6Addr::LOCALHOST, 3000)),
                    SocketAddr::V6(SocketAddrV6::new(v6, 3100, 0, 2)),
                    SocketAddr::from((Ipv4Addr::new(192, 168, 1, 9), 4000)),
                ],
                tls_name: String::new(),
            },
            Peer {
                node_id: NodeId(0xA2),
                addresses: vec![],
                tls_name: String::new(),
            },
        ];
        assert_eq!(
            format_peers(12, NodeId(0xA0), &peers),
            "12,3000,[[A1,,[[::1],[fe80::1]:3100,192.168.1.9:4000]]]"
        );
        assert_eq!(format_peers(0, NodeId(0xA0), &[]), "0,3000,[]");
    }

    #[test]
    fn peers_reply_parses_back_with_default_ports_filled_in() {
        let reply = "7,3000,[[BB9030011AC4202,,[10.0.0.3]],\
                     [BB9010011AC4202,myTls,[[::1]:3010,db.example:4000,[fe80::1]]]]";
        let parsed = parse_peers(reply).expect("a valid reply");
        assert_eq!(parsed.generation, 7);
        assert_eq!(parsed.default_port, 3000);
        assert_eq!(parsed.peers.len(), 2);
        assert_eq!(parsed.peers[0].node_id, NodeId(0xBB9030011AC4202));
        assert_eq!(parsed.peers[0].tls_name, "");
        assert_eq!(
            parsed.peers[0].addresses[0].socket_addr(),
            Some(SocketAddr::from((Ipv4Addr::new(10, 0, 0, 3), 3000)))
        );
        let second = &parsed.peers[1];
        assert_eq!(second.tls_name, "myTls");
        let hosts: Vec<(&str, u16)> = second
            .addresses
            .iter()
            .map(|address| (address.host.as_str(), address.port))
            .collect();
        assert_eq!(
            hosts,
            [("::1", 3010), ("db.example", 4000), ("fe80::1", 3000)]
        );
        assert_eq!(second.addresses[1].socket_addr(), None);
        let empty = parse_peers("0,3000,[]").expect("an empty list");
        assert!(empty.peers.is_empty());
    }

    #[test]
    fn peers_reply_formats_and_parses_back_to_the_same_addresses() {
        let addresses = vec![
            SocketAddr::from((Ipv4Addr::new(10, 1, 2, 3), 3000)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 3456)),
        ];
        let peers = [Peer {
            node_id: NodeId(0x1234ABCD),
            addresses: addresses.clone(),
            tls_name: String::new(),
        }];
        let parsed = parse_peers(&format_peers(3, NodeId(1), &peers)).expect("our own format");
        let round_trip: Vec<Option<SocketAddr>> = parsed.peers[0]
            .addresses
            .iter()
            .map(PeerAddress::socket_addr)
            .collect();
        assert_eq!(
            round_trip,
            addresses.into_iter().map(Some).collect::<Vec<_>>()
        );
        assert_eq!(parsed.peers[0].node_id, NodeId(0x1234ABCD));
    }

    #[test]
    fn malformed_peers_replies_are_errors() {
        let cases = [
            "",
            "7",
            "7,3000",
            "7,3000,",
            "7,3000,[",
            "7,3000,[]x",
            "7,3000,[[]]",
            "x,3000,[]",
            "7,70000,[]",
            "7,3000,[[ZZ,,[1.2.3.4]]]",
            "7,3000,[[A1,,[1.2.3.4]]",
            "7,3000,[[A1,,[1.2.3.4:]]]",
            "7,3000,[[A1,,[1.2.3.4:x]]]",
            "7,3000,[[A1,,[::1]]]",
            "7,3000,[[A1,,[[::1]]]",
            "7,3000,[[A1,,[[]]]]",
            "7,3000,[[A1,,[,]]]",
            "7,3000,[[A1,,]]",
            "7,3000,[[A1,,[1.2.3.4]],]",
            "7,3000,[[A1,,[1.2.3.4]][A2,,[1.2.3.5]]]",
            "-1,3000,[]",
            "7,3000,[[A1,,[é:1]]]x",
            "[[[[[[[[[[",
            "]]]]],,,,",
        ];
        for reply in cases {
            assert!(parse_peers(reply).is_err(), "{reply:?}");
        }
    }

    /// Random bytes and random splices of valid replies must produce errors or values,
    /// never a panic.
    #[test]
    fn parsers_never_panic_on_random_input() {
        use rand::{Rng, SeedableRng, rngs::SmallRng};
        let mut rng = SmallRng::seed_from_u64(0x05_9E_E7);
        let alphabet: Vec<char> = "[],:;0123456789ABCDEFabcdef=/+.é\u{0}".chars().collect();
        let valid_peers = "7,3000,[[BB9030011AC4202,,[10.0.0.3]],[A1,t,[[::1]:3010,h:1]]]";
        let valid_replicas = format_replicas(&[claims("t", 0, vec![bitmap_of(&[5])])], None);
        for _ in 0..20_000 {
            let length = rng.random_range(0..40);
            let random: String = (0..length)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            let _ = parse_peers(&random);
            let _ = parse_replicas(&random);
            let cut = rng.random_range(0..valid_peers.len());
            let _ = parse_peers(&format!("{}{random}", &valid_peers[..cut]));
            let cut = rng.random_range(0..valid_replicas.len());
            let _ = parse_replicas(&format!("{}{random}", &valid_replicas[..cut]));
        }
    }
}
