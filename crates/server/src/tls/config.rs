//! The `[tls]` section, and the ports that serve TLS.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[tls]` section: this node's certificate and what it asks of clients. Any
/// `tls-port` (in `[service]` or `[resp]`) and `[cluster] tls` need it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsConfig {
    /// PEM file of this node's certificate chain, its own certificate first.
    pub cert_file: PathBuf,
    /// PEM file of the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM file of the authorities whose client (and peer node) certificates are trusted.
    pub ca_file: PathBuf,
    /// The name clients check the certificate against, and are told in `peers-tls-std`
    /// (Aerospike's `tls-name`); empty: the certificate's first DNS name, else its common name.
    pub name: String,
    /// Aerospike's `tls-authenticate-client`: `"false"` (no certificate asked), `"optional"`
    /// (asked, checked when given), `"any"` (one signed by `ca-file` required), or the names a
    /// client certificate must carry, comma separated (one of them, required).
    pub authenticate_client: String,
    /// A client that has not finished its handshake within this long is closed.
    pub handshake_timeout_ms: u64,
    /// Seconds between looks at the files' modification times; a change is loaded for the
    /// connections that start after it (0: only the `tls-reload` info command reloads).
    pub reload_check_s: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            ca_file: PathBuf::new(),
            name: String::new(),
            authenticate_client: "false".to_owned(),
            handshake_timeout_ms: 5_000,
            reload_check_s: 60,
        }
    }
}

/// What a TLS port asks of a client's certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// None is asked.
    Off,
    /// One is asked; a client without one is served, one with a bad one refused.
    Optional,
    /// One signed by `ca-file` is required.
    Required,
    /// One signed by `ca-file`, carrying one of these names, is required.
    Named(Vec<String>),
}

impl TlsConfig {
    /// Whether TLS is configured at all.
    pub fn is_configured(&self) -> bool {
        !self.cert_file.as_os_str().is_empty()
    }

    /// `authenticate-client` read.
    ///
    /// # Errors
    /// An empty name in the list.
    pub fn client_auth(&self) -> Result<ClientAuth, String> {
        match self.authenticate_client.trim() {
            "false" => Ok(ClientAuth::Off),
            "optional" => Ok(ClientAuth::Optional),
            "any" => Ok(ClientAuth::Required),
            names => {
                let names: Vec<String> = names.split(',').map(|n| n.trim().to_owned()).collect();
                match names.iter().any(String::is_empty) {
                    true => Err(format!(
                        "tls.authenticate-client = {names:?}: \"false\", \"optional\", \"any\" \
                         or names separated by commas"
                    )),
                    false => Ok(ClientAuth::Named(names)),
                }
            }
        }
    }

    /// What is wrong with the section given what uses it (`used_by` names the first user),
    /// if anything.
    pub fn problem(&self, used_by: Option<&str>) -> Option<String> {
        let client_auth = match self.client_auth() {
            Ok(client_auth) => client_auth,
            Err(problem) => return Some(problem),
        };
        let incomplete = !self.is_configured() || self.key_file.as_os_str().is_empty();
        if let Some(user) = used_by
            && incomplete
        {
            return Some(format!("{user} needs [tls] cert-file and key-file"));
        }
        if client_auth != ClientAuth::Off && self.ca_file.as_os_str().is_empty() {
            return Some(format!(
                "tls.authenticate-client = {:?} needs tls.ca-file (or \"false\")",
                self.authenticate_client
            ));
        }
        if self.handshake_timeout_ms == 0 || self.handshake_timeout_ms > 3_600_000 {
            return Some("tls.handshake-timeout-ms must be between 1 and 3600000".to_owned());
        }
        None
    }
}
