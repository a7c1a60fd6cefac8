//! The nodes a command talks to: the seed alone, or every node of its cluster (learned from
//! the seed's peers, as a client learns them), each with its own info connection.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use client::Client;
use client::ClusterMap;

/// How long connecting to a node, and each answer, may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// One node and its connection.
pub struct Node {
    /// Its id, as `node` answers it.
    pub id: String,
    /// Where it was reached.
    pub address: SocketAddr,
    client: Client,
}

impl Node {
    /// The value of one info command.
    ///
    /// # Errors
    /// The connection's failure.
    pub fn info(&mut self, command: &str) -> Result<String, String> {
        self.client
            .info(command)
            .map_err(|error| format!("{} ({}): {error}", self.id, self.address))
    }

    /// The `key=value` pairs of an info command's value, split on `;`.
    ///
    /// # Errors
    /// As [`Node::info`].
    pub fn pairs(&mut self, command: &str) -> Result<Vec<(String, String)>, String> {
        Ok(pairs(&self.info(command)?, ';'))
    }
}

/// The `key=value` pairs of `text`, split on `separator`, in order.
pub fn pairs(text: &str, separator: char) -> Vec<(String, String)> {
    text.split(separator)
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// The seed's address.
///
/// # Errors
/// A host that resolves to no address.
pub fn seed_address(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|error| format!("{host}:{port}: {error}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))
}

/// Connects to the node at `address`.
///
/// # Errors
/// Why it could not be reached or did not answer.
pub fn connect(address: SocketAddr) -> Result<Node, String> {
    let mut client = Client::connect_timeout(&address, TIMEOUT)
        .map_err(|error| format!("{address}: {error}"))?;
    let id = client
        .info("node")
        .map_err(|error| format!("{address}: {error}"))?;
    Ok(Node {
        id,
        address,
        client,
    })
}

/// The seed alone, or (`all`) every node of its cluster, sorted by id.
///
/// # Errors
/// When the seed, or with `all` the cluster's map, cannot be reached.
pub fn reach(seed: SocketAddr, all: bool) -> Result<Vec<Node>, String> {
    if !all {
        return Ok(vec![connect(seed)?]);
    }
    let map = ClusterMap::learn(&[seed]).map_err(|error| format!("{seed}: {error}"))?;
    let mut nodes = map
        .nodes()
        .map(|node| connect(node.address))
        .collect::<Result<Vec<Node>, String>>()?;
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(nodes)
}
