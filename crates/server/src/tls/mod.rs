//! TLS on the client ports and on the fabric, with rustls (ring provider).
//!
//! A [`Tls`] holds the rustls configurations built from `[tls]`'s files. Every handshake takes
//! the current ones, so a reload (the files changed, or the `tls-reload` info command) applies
//! to the connections that start after it, while open ones go on as they began.
//!
//! Invariants:
//! - A reload that fails (a file missing or unreadable, no certificate, a key that does not
//!   match it) changes nothing: the last good certificate goes on being served; the failure is
//!   logged and counted.
//! - The name a client certificate gives a connection ([`transport::Transport::certificate_name`])
//!   comes only from a certificate the handshake verified against `ca-file`.
//! - The fabric is mutual: both ends present a certificate signed by `ca-file` carrying this
//!   node's TLS name (the cluster shares one, as Aerospike's fabric `tls-name` does).

pub mod config;
pub mod network;
pub mod transport;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tracing::{info, warn};

pub use config::{ClientAuth, TlsConfig};

/// Counts of what TLS did, for the statistics.
#[derive(Debug, Default)]
pub struct TlsStats {
    /// Handshakes completed on the client ports.
    pub handshakes: AtomicU64,
    /// Handshakes refused, failed or timed out on the client ports.
    pub handshake_failures: AtomicU64,
    /// Certificates loaded again after start-up.
    pub reloads: AtomicU64,
    /// Reloads refused (the old certificate kept).
    pub reload_failures: AtomicU64,
}

/// This node's TLS: its certificate, what it asks of clients, and the fabric's configurations.
#[derive(Debug)]
pub struct Tls {
    settings: TlsConfig,
    client_auth: ClientAuth,
    current: RwLock<Arc<Loaded>>,
    /// The files' modification times when they were last looked at.
    stamp: Mutex<Vec<Option<SystemTime>>>,
    /// What TLS did.
    pub stats: TlsStats,
}

/// The rustls configurations of one load of the files.
#[derive(Debug)]
struct Loaded {
    clients: Arc<ServerConfig>,
    fabric: Option<(Arc<ServerConfig>, Arc<ClientConfig>)>,
    name: String,
}

impl Tls {
    /// Loads the files `settings` names.
    ///
    /// # Errors
    /// What cannot be read or used, naming the file.
    pub fn load(settings: &TlsConfig) -> Result<Tls, String> {
        let client_auth = settings.client_auth()?;
        let loaded = load(settings, &client_auth)?;
        info!(name = %loaded.name, cert = %settings.cert_file.display(), "TLS certificate loaded");
        Ok(Tls {
            stamp: Mutex::new(stamp(settings)),
            settings: settings.clone(),
            client_auth,
            current: RwLock::new(Arc::new(loaded)),
            stats: TlsStats::default(),
        })
    }

    /// The configuration a client port's handshake starts with now.
    pub fn client_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().clients)
    }

    /// The fabric's acceptor and dialer configurations now; `None` without `ca-file`.
    pub fn fabric_configs(&self) -> Option<(Arc<ServerConfig>, Arc<ClientConfig>)> {
        self.current.read().fabric.clone()
    }

    /// The TLS name clients are told (`peers-tls-std`) and check the certificate against.
    pub fn name(&self) -> String {
        self.current.read().name.clone()
    }

    /// What the client ports ask of a client's certificate.
    pub fn client_auth(&self) -> &ClientAuth {
        &self.client_auth
    }

    /// How long a client has to finish its handshake.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.handshake_timeout_ms)
    }

    /// How often the files are looked at for a change; `None`: never.
    pub fn reload_period(&self) -> Option<Duration> {
        (self.settings.reload_check_s > 0)
            .then(|| Duration::from_secs(self.settings.reload_check_s))
    }

    /// Loads the files again.
    ///
    /// # Errors
    /// Why the new files cannot be used; the old certificate is kept then.
    pub fn reload(&self) -> Result<(), String> {
        *self.stamp.lock() = stamp(&self.settings);
        match load(&self.settings, &self.client_auth) {
            Ok(loaded) => {
                info!(name = %loaded.name, "TLS certificate reloaded");
                *self.current.write() = Arc::new(loaded);
                self.stats.reloads.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(problem) => {
                warn!(%problem, "TLS reload refused; the previous certificate is kept");
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                Err(problem)
            }
        }
    }

    /// Loads the files again if any changed since they were last looked at.
    pub fn reload_if_changed(&self) {
        if stamp(&self.settings) != *self.stamp.lock() {
            let _ = self.reload();
        }
    }
}

/// The modification times of the files (`None` where one cannot be read).
fn stamp(settings: &TlsConfig) -> Vec<Option<SystemTime>> {
    [&settings.cert_file, &settings.key_file, &settings.ca_file]
        .iter()
        .map(|path| {
            std::fs::metadata(path)
                .and_then(|meta| meta.modified())
                .ok()
        })
        .collect()
}

fn load(settings: &TlsConfig, client_auth: &ClientAuth) -> Result<Loaded, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certificates(&settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|error| file_problem(&settings.key_file, &error))?;
    let roots = match settings.ca_file.as_os_str().is_empty() {
        true => None,
        false => Some(Arc::new(read_roots(&settings.ca_file)?)),
    };
    let name = match settings.name.is_empty() {
        false => settings.name.clone(),
        true => default_name(&chain[0]).ok_or_else(|| {
            format!(
                "{}: the certificate has no DNS name or common name; set tls.name",
                settings.cert_file.display()
            )
        })?,
    };
    let clients = client_port_config(&provider, client_auth, roots.as_ref(), &chain, &key)
        .map_err(|error| format!("{}: {error}", settings.cert_file.display()))?;
    let fabric = match &roots {
        None => None,
        Some(roots) => Some(
            fabric_configs(&provider, roots, &chain, &key)
                .map_err(|error| format!("{}: {error}", settings.cert_file.display()))?,
        ),
    };
    Ok(Loaded {
        clients,
        fabric,
        name,
    })
}

fn client_port_config(
    provider: &Arc<CryptoProvider>,
    client_auth: &ClientAuth,
    roots: Option<&Arc<RootCertStore>>,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let verifier = match (client_auth, roots) {
        (ClientAuth::Off, _) | (_, None) => WebPkiClientVerifier::no_client_auth(),
        (ClientAuth::Optional, Some(roots)) => {
            WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), Arc::clone(provider))
                .allow_unauthenticated()
                .build()
                .map_err(|error| rustls::Error::General(error.to_string()))?
        }
        (ClientAuth::Required | ClientAuth::Named(_), Some(roots)) => {
            WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), Arc::clone(provider))
                .build()
                .map_err(|error| rustls::Error::General(error.to_string()))?
        }
    };
    let config = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain.to_vec(), key.clone_key())?;
    Ok(Arc::new(config))
}

fn fabric_configs(
    provider: &Arc<CryptoProvider>,
    roots: &Arc<RootCertStore>,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<(Arc<ServerConfig>, Arc<ClientConfig>), rustls::Error> {
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), Arc::clone(provider))
            .build()
            .map_err(|error| rustls::Error::General(error.to_string()))?;
    let server = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain.to_vec(), key.clone_key())?;
    let client = ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(Arc::clone(roots))
        .with_client_auth_cert(chain.to_vec(), key.clone_key())?;
    Ok((Arc::new(server), Arc::new(client)))
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect)
        .map_err(|error| file_problem(path, &error))?;
    match chain.is_empty() {
        true => Err(format!("{}: no certificate in the file", path.display())),
        false => Ok(chain),
    }
}

fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for certificate in read_certificates(path)? {
        roots
            .add(certificate)
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    Ok(roots)
}

fn file_problem(path: &Path, error: &dyn std::fmt::Display) -> String {
    format!("{}: {error}", PathBuf::from(path).display())
}

/// The certificate's first DNS name, else its common name.
fn default_name(certificate: &CertificateDer<'_>) -> Option<String> {
    let names = certificate_names(certificate);
    names.dns.into_iter().next().or(names.common_name)
}

/// The names a certificate carries.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CertificateNames {
    /// The subject's common name.
    pub common_name: Option<String>,
    /// The DNS names of its subject alternative names.
    pub dns: Vec<String>,
}

impl CertificateNames {
    /// Whether any of its names is `name`.
    pub fn carries(&self, name: &str) -> bool {
        self.common_name.as_deref() == Some(name) || self.dns.iter().any(|dns| dns == name)
    }
}

/// The names `certificate` carries (none where it does not parse).
pub fn certificate_names(certificate: &CertificateDer<'_>) -> CertificateNames {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(certificate.as_ref()) else {
        return CertificateNames::default();
    };
    let common_name = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|name| name.as_str().ok())
        .map(str::to_owned);
    let dns = match parsed.subject_alternative_name() {
        Ok(Some(names)) => names
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    CertificateNames { common_name, dns }
}
