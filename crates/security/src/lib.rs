//! Access control: users, roles and privileges as Aerospike models them, shared by both
//! protocols. A client logs in with a user's credential (or, on RESP, its password), gets a
//! session token, and each request it makes is checked against the privileges its user's
//! roles grant from the client's address.
//!
//! - `privilege`: the codes, their scopes and the actions each allows.
//! - `password`: credentials (the clients' bcrypt) and the verifiers kept of them.
//! - `token`: session tokens, sealed so the server keeps nothing per session.
//! - `tables`: users and roles, and the admin commands' changes to them.
//! - `store`: where the tables are kept.
//!
//! Invariants:
//! - The tables in memory are the last ones the store kept: a change is saved before it is
//!   made visible, and one the store could not keep is not made at all.
//! - `version` grows at every change, so a connection that compiled its [`Grants`] at an
//!   older version compiles them again before its next check: a revoked role takes effect on
//!   open connections at their next request.

pub mod audit;
pub mod password;
pub mod privilege;
pub mod quota;
pub mod store;
pub mod tables;
pub mod throttle;
pub mod token;

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use tracing::warn;

pub use audit::{Audit, AuditSink, Origin, Protocol};
pub use password::{Verifier, credential_of};
pub use privilege::{Action, Privilege, PrivilegeCode};
pub use store::{FileStore, MemoryStore, Snapshot, Store};
pub use tables::{Role, RoleView, Tables, User};
pub use throttle::LoginThrottle;
pub use token::{TokenClaims, TokenError, TokenKey};

/// The user a node with no kept tables starts with, as Aerospike's: `admin`, password `admin`,
/// role `user-admin`.
pub const DEFAULT_ADMIN: &str = "admin";

/// Aerospike's default `session-ttl`, in seconds.
pub const SESSION_TTL_S_DEFAULT: u32 = 86_400;

/// Why a security request failed; each is an Aerospike result code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// Security is not enabled on this node.
    #[error("security not enabled")]
    NotEnabled,
    /// An unknown security command.
    #[error("invalid command")]
    InvalidCommand,
    /// A missing or malformed field.
    #[error("invalid field")]
    InvalidField,
    /// No such user, or a bad user name.
    #[error("invalid user")]
    InvalidUser,
    /// The user exists already.
    #[error("user already exists")]
    UserAlreadyExists,
    /// A malformed password (credential).
    #[error("invalid password")]
    InvalidPassword,
    /// The credential does not match.
    #[error("invalid credential")]
    InvalidCredential,
    /// The session token has expired.
    #[error("expired session")]
    ExpiredSession,
    /// No such role, a bad role name, or a predefined role that may not change.
    #[error("invalid role")]
    InvalidRole,
    /// The role exists already.
    #[error("role already exists")]
    RoleAlreadyExists,
    /// An unknown privilege code or a scope it may not have.
    #[error("invalid privilege")]
    InvalidPrivilege,
    /// A malformed allow-list entry.
    #[error("invalid whitelist")]
    InvalidWhitelist,
    /// A quota set while quotas are off (`enable-quotas`).
    #[error("quotas not enabled")]
    QuotasNotEnabled,
    /// The connection has not logged in.
    #[error("not authenticated")]
    NotAuthenticated,
    /// The user's roles do not allow the request.
    #[error("role violation")]
    RoleViolation,
    /// The client's address is in none of the allow-lists of the user's roles.
    #[error("not whitelisted")]
    NotWhitelisted,
    /// Too many failed logins from the client's address lately; answered as a bad
    /// credential (INVALID_CREDENTIAL), without a check.
    #[error("too many failed logins from this address")]
    Throttled,
    /// The tables could not be kept (logged); nothing changed.
    #[error("could not keep the security tables")]
    Storage,
}

impl SecurityError {
    /// The Aerospike result code.
    pub fn code(self) -> u8 {
        match self {
            SecurityError::NotEnabled => 52,
            SecurityError::InvalidCommand => 54,
            SecurityError::InvalidField => 55,
            SecurityError::InvalidUser => 60,
            SecurityError::UserAlreadyExists => 61,
            SecurityError::InvalidPassword => 62,
            SecurityError::InvalidCredential | SecurityError::Throttled => 65,
            SecurityError::ExpiredSession => 66,
            SecurityError::InvalidRole => 70,
            SecurityError::RoleAlreadyExists => 71,
            SecurityError::InvalidPrivilege => 72,
            SecurityError::InvalidWhitelist => 73,
            SecurityError::QuotasNotEnabled => 74,
            SecurityError::NotAuthenticated => 80,
            SecurityError::RoleViolation => 81,
            SecurityError::NotWhitelisted => 82,
            // AS_SEC_ERR_ILLEGAL_STATE.
            SecurityError::Storage => 56,
        }
    }
}

/// `N` random bytes from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if let Err(error) = getrandom::fill(&mut bytes) {
        // Without randomness no salt or key is safe to make; nothing can go on.
        panic!("the operating system gave no random bytes: {error}");
    }
    bytes
}

/// A successful login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedIn {
    /// The session token for the client's next connections.
    pub token: Vec<u8>,
    /// Seconds the token is valid for.
    pub ttl_s: u32,
}

/// What one user may do from one address, compiled from the tables at `version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grants {
    /// The tables' version these were compiled at.
    pub version: u64,
    privileges: Vec<Privilege>,
    /// The user's rate quotas, when quotas are on and its roles set any.
    pub quota: Option<quota::UserQuota>,
}

impl Grants {
    /// Whether `action` on `namespace` and `set` is allowed.
    pub fn allows(&self, action: Action, namespace: &[u8], set: &[u8]) -> bool {
        self.privileges
            .iter()
            .any(|privilege| privilege.allows(action, namespace, set))
    }
}

/// Credentials of passwords that logged in lately, so that a client that sends its password
/// (Redis's AUTH) costs one bcrypt per password, not one per connection. Keyed by a SHA-256 of
/// a per-process salt, the user and the password; at most [`PASSWORDS_REMEMBERED_MAX`].
#[derive(Debug)]
struct PasswordCache {
    salt: [u8; 16],
    credentials: parking_lot::Mutex<std::collections::HashMap<[u8; 32], String>>,
}

/// Passwords [`PasswordCache`] remembers at most (it forgets all when full).
const PASSWORDS_REMEMBERED_MAX: usize = 4096;

impl PasswordCache {
    fn new() -> PasswordCache {
        PasswordCache {
            salt: random_bytes::<16>(),
            credentials: parking_lot::Mutex::default(),
        }
    }

    fn key(&self, user: &str, password: &[u8]) -> [u8; 32] {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.salt);
        hasher.update(user.as_bytes());
        hasher.update([0]);
        hasher.update(password);
        hasher.finalize().into()
    }

    fn credential(&self, key: &[u8; 32]) -> Option<String> {
        self.credentials.lock().get(key).cloned()
    }

    fn remember(&self, key: [u8; 32], credential: String) {
        let mut credentials = self.credentials.lock();
        if credentials.len() >= PASSWORDS_REMEMBERED_MAX {
            credentials.clear();
        }
        credentials.insert(key, credential);
    }
}

/// Login counters, for the statistics.
#[derive(Debug, Default)]
pub struct LoginStats {
    /// Logins accepted.
    pub accepted: AtomicU64,
    /// Logins refused for a bad user, credential or address.
    pub refused: AtomicU64,
    /// Logins refused unchecked, their address past its failures.
    pub throttled: AtomicU64,
}

/// What a change's kept tables are handed to.
struct Replicator(Box<dyn Fn(String) + Send + Sync>);

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Replicator(..)")
    }
}

/// The users and roles of a node, and the checks made against them.
#[derive(Debug)]
pub struct Security {
    tables: RwLock<Tables>,
    version: AtomicU64,
    /// Replaced only with the tables, when another node's are applied here.
    key: RwLock<TokenKey>,
    store: Box<dyn Store>,
    /// Called with the kept form of the tables after each change made here (a cluster
    /// commits it to the metadata group).
    replicator: std::sync::OnceLock<Replicator>,
    session_ttl_s: u32,
    throttle: LoginThrottle,
    passwords: PasswordCache,
    /// Whether rate quotas are enforced (Aerospike's `enable-quotas`).
    quotas_enabled: bool,
    meters: quota::Meters,
    /// What logins there were.
    pub stats: LoginStats,
    /// The audit trail (written by the protocols' sides, which know who asked and how).
    pub audit: Audit,
}

impl Security {
    /// The tables `store` kept, or, where it kept none, the default admin alone (then kept).
    pub fn open(store: Box<dyn Store>, session_ttl_s: u32) -> io::Result<Security> {
        let snapshot = match store.load()? {
            Some(snapshot) => snapshot,
            None => {
                let snapshot = first_snapshot();
                store.save(&snapshot)?;
                snapshot
            }
        };
        let key = parse_key(&snapshot.token_key)?;
        Ok(Security {
            tables: RwLock::new(snapshot.tables),
            version: AtomicU64::new(1),
            key: RwLock::new(key),
            replicator: std::sync::OnceLock::new(),
            store,
            session_ttl_s,
            throttle: LoginThrottle::default(),
            passwords: PasswordCache::new(),
            stats: LoginStats::default(),
            audit: Audit::default(),
            quotas_enabled: false,
            meters: quota::Meters::default(),
        })
    }

    /// This with rate quotas enforced (or not).
    pub fn with_quotas(mut self, enabled: bool) -> Security {
        self.quotas_enabled = enabled;
        self
    }

    /// Whether rate quotas are enforced.
    pub fn quotas_enabled(&self) -> bool {
        self.quotas_enabled
    }

    /// `user`'s reads and writes counted in the second `now_s` (zeros with quotas off).
    pub fn rates(&self, user: &str, now_s: u64) -> (u32, u32) {
        if !self.quotas_enabled {
            return (0, 0);
        }
        let meter = self.meters.of(user);
        (
            meter.rate(quota::Kind::Read, now_s),
            meter.rate(quota::Kind::Write, now_s),
        )
    }

    /// This with its audit trail written to `sink`.
    pub fn with_audit(mut self, sink: Box<dyn AuditSink>) -> Security {
        self.audit = Audit::new(Some(sink));
        self
    }

    /// The tables' version: grows at every change.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Logs `user` in with `credential` from `client` at `now_s` (seconds since the Unix
    /// epoch). Failures are counted against the address ([`LoginThrottle`]).
    pub fn login(
        &self,
        user: &str,
        credential: &[u8],
        client: IpAddr,
        now_s: u64,
    ) -> Result<LoggedIn, SecurityError> {
        if !self.throttle.allows(client, now_s) {
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
            return Err(SecurityError::Throttled);
        }
        let outcome = self.check_login(user, Some(credential), client, now_s);
        self.count_login(client, Some(now_s), &outcome);
        outcome
    }

    /// Logs `user` in on the strength of a client certificate the TLS handshake verified
    /// (Aerospike's PKI login, Valkey's `tls-auth-clients-user`): its name is the user's.
    ///
    /// # Errors
    /// As [`Security::login`], but for the credential, which there is none of.
    pub fn login_certified(
        &self,
        user: &str,
        client: IpAddr,
        now_s: u64,
    ) -> Result<LoggedIn, SecurityError> {
        let outcome = self.check_login(user, None, client, now_s);
        // Not a guess at a password: a refusal does not count toward the throttle.
        self.count_login(client, None, &outcome);
        outcome
    }

    /// Counts a login; a refused one against `client`'s throttle at `guessed_at_s`, if given.
    fn count_login(
        &self,
        client: IpAddr,
        guessed_at_s: Option<u64>,
        outcome: &Result<LoggedIn, SecurityError>,
    ) {
        match outcome {
            Ok(_) => {
                self.throttle.succeeded(client);
                self.stats.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                if let Some(now_s) = guessed_at_s {
                    self.throttle.failed(client, now_s);
                }
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// [`Security::login`] with the password itself (Redis's AUTH): its credential is
    /// computed (tens of milliseconds of bcrypt: run it off the request path) unless the same
    /// user logged in with the same password lately.
    pub fn login_with_password(
        &self,
        user: &str,
        password: &[u8],
        client: IpAddr,
        now_s: u64,
    ) -> Result<LoggedIn, SecurityError> {
        let key = self.passwords.key(user, password);
        let credential = self
            .passwords
            .credential(&key)
            .unwrap_or_else(|| credential_of(password));
        let logged_in = self.login(user, credential.as_bytes(), client, now_s)?;
        self.passwords.remember(key, credential);
        Ok(logged_in)
    }

    /// Whether `user` and `password` would log in without computing a credential: the same
    /// pair logged in lately (so a caller may skip moving the work off its thread).
    pub fn knows_password(&self, user: &str, password: &[u8]) -> bool {
        self.passwords
            .credential(&self.passwords.key(user, password))
            .is_some()
    }

    /// `credential`: the one to check, or `None` where a verified certificate vouches.
    fn check_login(
        &self,
        user: &str,
        credential: Option<&[u8]>,
        client: IpAddr,
        now_s: u64,
    ) -> Result<LoggedIn, SecurityError> {
        let tables = self.tables.read();
        let found = tables.users.get(user).ok_or(SecurityError::InvalidUser)?;
        if credential.is_some_and(|credential| !found.verifier.matches(credential)) {
            return Err(SecurityError::InvalidCredential);
        }
        check_whitelisted(&tables, found, client)?;
        let claims = TokenClaims {
            expires_s: now_s.saturating_add(u64::from(self.session_ttl_s)),
            epoch: found.epoch,
        };
        Ok(LoggedIn {
            token: self.key.read().issue(user, claims),
            ttl_s: self.session_ttl_s,
        })
    }

    /// Authenticates a new connection of `user` from `client` with a token LOGIN gave.
    pub fn authenticate(
        &self,
        user: &str,
        token: &[u8],
        client: IpAddr,
        now_s: u64,
    ) -> Result<(), SecurityError> {
        let claims = self
            .key
            .read()
            .verify(user, token, now_s)
            .map_err(|error| match error {
                TokenError::Invalid => SecurityError::InvalidCredential,
                TokenError::Expired => SecurityError::ExpiredSession,
            })?;
        let tables = self.tables.read();
        let found = tables.users.get(user).ok_or(SecurityError::InvalidUser)?;
        if found.epoch != claims.epoch {
            return Err(SecurityError::ExpiredSession);
        }
        check_whitelisted(&tables, found, client)
    }

    /// What `user` may do from `client` now; `None` once the user is gone.
    pub fn grants(&self, user: &str, client: IpAddr) -> Option<Grants> {
        let version = self.version();
        let tables = self.tables.read();
        let found = tables.users.get(user)?;
        let roles: Vec<Role> = found
            .roles
            .iter()
            .filter_map(|name| tables.role(name))
            .filter(|role| role_applies_from(role, client))
            .collect();
        let read = quota::effective(roles.iter().map(|role| role.read_quota));
        let write = quota::effective(roles.iter().map(|role| role.write_quota));
        let quota = (self.quotas_enabled && (read, write) != (0, 0)).then(|| quota::UserQuota {
            read,
            write,
            meter: self.meters.of(user),
        });
        Some(Grants {
            version,
            privileges: roles.into_iter().flat_map(|role| role.privileges).collect(),
            quota,
        })
    }

    /// Reads the tables.
    pub fn read<R>(&self, read: impl FnOnce(&Tables) -> R) -> R {
        read(&self.tables.read())
    }

    /// Makes `change` to the tables, keeps them, and only then lets others see them.
    pub fn change(
        &self,
        change: impl FnOnce(&mut Tables) -> Result<(), SecurityError>,
    ) -> Result<(), SecurityError> {
        let mut tables = self.tables.write();
        let mut changed = tables.clone();
        change(&mut changed)?;
        let snapshot = Snapshot {
            token_key: hex(&self.key.read().bytes()),
            tables: changed,
        };
        if let Err(error) = self.store.save(&snapshot) {
            warn!(%error, "the security tables could not be kept; the change is refused");
            return Err(SecurityError::Storage);
        }
        let kept = self
            .replicator
            .get()
            .map(|_| serde_json::to_string(&snapshot));
        *tables = snapshot.tables;
        self.version.fetch_add(1, Ordering::AcqRel);
        drop(tables);
        if let (Some(replicate), Some(Ok(kept))) = (self.replicator.get(), kept) {
            (replicate.0)(kept);
        }
        Ok(())
    }

    /// Has `replicate` called with the kept form of the tables after each change made here
    /// (set once; a cluster commits them to its metadata group).
    pub fn set_replicator(&self, replicate: Box<dyn Fn(String) + Send + Sync>) {
        let _ = self.replicator.set(Replicator(replicate));
    }

    /// Replaces the tables and token key with `kept` (another node's, as its replicator
    /// gave them), keeps them, and lets connections see them at their next request. Nothing
    /// changes when they are the same.
    ///
    /// # Errors
    /// `kept` does not parse, or cannot be kept (nothing changed then).
    pub fn replace(&self, kept: &str) -> io::Result<()> {
        let snapshot: Snapshot = serde_json::from_str(kept)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        let key = parse_key(&snapshot.token_key)?;
        let mut tables = self.tables.write();
        if *tables == snapshot.tables && self.key.read().bytes() == key.bytes() {
            return Ok(());
        }
        self.store.save(&snapshot)?;
        *tables = snapshot.tables;
        *self.key.write() = key;
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// A role's privileges apply from the addresses of its allow-list, or from any when it has
/// none.
fn role_applies_from(role: &Role, client: IpAddr) -> bool {
    role.whitelist.is_empty()
        || role.whitelist.iter().any(|entry| {
            tables::parse_network(entry)
                .is_some_and(|network| tables::network_contains(network, client))
        })
}

/// A user whose every role has an allow-list, none of which holds `client`, may not log in
/// from there (`NOT_WHITELISTED`).
fn check_whitelisted(tables: &Tables, user: &User, client: IpAddr) -> Result<(), SecurityError> {
    let roles: Vec<Role> = user
        .roles
        .iter()
        .filter_map(|name| tables.role(name))
        .collect();
    let restricted = !roles.is_empty() && roles.iter().all(|role| !role.whitelist.is_empty());
    if restricted && !roles.iter().any(|role| role_applies_from(role, client)) {
        return Err(SecurityError::NotWhitelisted);
    }
    Ok(())
}

/// A node's first tables: the default admin, and a fresh token key.
fn first_snapshot() -> Snapshot {
    let mut tables = Tables::default();
    let credential = credential_of(DEFAULT_ADMIN.as_bytes());
    let created = tables.create_user(
        DEFAULT_ADMIN,
        credential.as_bytes(),
        &[PrivilegeCode::UserAdmin.name().to_owned()],
    );
    debug_assert_eq!(created, Ok(()));
    Snapshot {
        token_key: hex(&TokenKey::random().bytes()),
        tables,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn parse_key(text: &str) -> io::Result<TokenKey> {
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the kept token key is not 64 hex digits",
        )
    };
    if text.len() != 64 {
        return Err(invalid());
    }
    let mut bytes = [0u8; 32];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16).map_err(|_| invalid())?;
    }
    Ok(TokenKey::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    /// A store shared between two `Security`s, as a file is between two runs of a node.
    #[derive(Debug, Default)]
    struct Shared(Arc<MemoryStore>);

    impl Store for Shared {
        fn load(&self) -> io::Result<Option<Snapshot>> {
            self.0.load()
        }
        fn save(&self, snapshot: &Snapshot) -> io::Result<()> {
            self.0.save(snapshot)
        }
    }

    /// A store whose disk is full.
    #[derive(Debug)]
    struct Full;

    impl Store for Full {
        fn load(&self) -> io::Result<Option<Snapshot>> {
            Ok(Some(first_snapshot()))
        }
        fn save(&self, _: &Snapshot) -> io::Result<()> {
            Err(io::Error::other("no space left on device"))
        }
    }

    fn open() -> Security {
        Security::open(Box::new(MemoryStore::default()), 60).expect("opens")
    }

    fn admin_credential() -> String {
        credential_of(DEFAULT_ADMIN.as_bytes())
    }

    #[test]
    fn a_new_node_has_the_default_admin_who_may_only_manage_users() {
        let security = open();
        let logged_in = security
            .login(DEFAULT_ADMIN, admin_credential().as_bytes(), LOCAL, 1_000)
            .expect("the default admin logs in");
        assert_eq!(logged_in.ttl_s, 60);
        assert_eq!(
            security.authenticate(DEFAULT_ADMIN, &logged_in.token, LOCAL, 1_059),
            Ok(())
        );
        assert_eq!(
            security.authenticate(DEFAULT_ADMIN, &logged_in.token, LOCAL, 1_060),
            Err(SecurityError::ExpiredSession)
        );
        let grants = security.grants(DEFAULT_ADMIN, LOCAL).expect("exists");
        assert!(grants.allows(Action::UserAdmin, b"", b""));
        assert!(!grants.allows(Action::Read, b"test", b""));
        assert_eq!(
            security.login(DEFAULT_ADMIN, b"wrong", LOCAL, 0),
            Err(SecurityError::InvalidCredential)
        );
        assert_eq!(
            security.login("nobody", admin_credential().as_bytes(), LOCAL, 0),
            Err(SecurityError::InvalidUser)
        );
    }

    #[test]
    fn a_guessing_address_is_refused_even_the_right_credential_and_others_are_not() {
        let security = open();
        let guesser: IpAddr = "192.0.2.9".parse().expect("ip");
        for _ in 0..throttle::FAILURES_MAX {
            assert_eq!(
                security.login(DEFAULT_ADMIN, b"guess", guesser, 0),
                Err(SecurityError::InvalidCredential)
            );
        }
        let credential = admin_credential();
        assert_eq!(
            security.login(DEFAULT_ADMIN, credential.as_bytes(), guesser, 1),
            Err(SecurityError::Throttled)
        );
        assert!(
            security
                .login(DEFAULT_ADMIN, credential.as_bytes(), LOCAL, 1)
                .is_ok()
        );
        assert!(
            security
                .login(
                    DEFAULT_ADMIN,
                    credential.as_bytes(),
                    guesser,
                    throttle::WINDOW_S
                )
                .is_ok()
        );
        assert_eq!(security.stats.throttled.load(Ordering::Relaxed), 1);
        assert_eq!(
            security.stats.refused.load(Ordering::Relaxed),
            u64::from(throttle::FAILURES_MAX)
        );
    }

    #[test]
    fn a_certificate_logs_in_its_named_user_and_a_refusal_is_not_a_guess() {
        let security = open();
        let logged_in = security
            .login_certified(DEFAULT_ADMIN, LOCAL, 1_000)
            .expect("a verified certificate naming a user logs it in");
        assert_eq!(
            security.authenticate(DEFAULT_ADMIN, &logged_in.token, LOCAL, 1_001),
            Ok(())
        );
        for _ in 0..=throttle::FAILURES_MAX {
            assert_eq!(
                security.login_certified("nobody", LOCAL, 0),
                Err(SecurityError::InvalidUser)
            );
        }
        // Refused certificates do not throttle the address's password logins.
        assert!(
            security
                .login(DEFAULT_ADMIN, admin_credential().as_bytes(), LOCAL, 1)
                .is_ok()
        );
    }

    #[test]
    fn a_password_logs_in_as_its_credential_and_is_remembered_until_it_changes() {
        let security = open();
        assert!(!security.knows_password(DEFAULT_ADMIN, b"admin"));
        security
            .login_with_password(DEFAULT_ADMIN, b"admin", LOCAL, 0)
            .expect("the password of the credential logs in");
        assert!(security.knows_password(DEFAULT_ADMIN, b"admin"));
        assert!(!security.knows_password(DEFAULT_ADMIN, b"other"));
        assert_eq!(
            security.login_with_password(DEFAULT_ADMIN, b"other", LOCAL, 0),
            Err(SecurityError::InvalidCredential)
        );
        let new = credential_of(b"new");
        security
            .change(|tables| tables.set_password(DEFAULT_ADMIN, new.as_bytes()))
            .expect("changed");
        assert_eq!(
            security.login_with_password(DEFAULT_ADMIN, b"admin", LOCAL, 0),
            Err(SecurityError::InvalidCredential),
            "a remembered password no longer logs in once changed"
        );
        assert!(
            security
                .login_with_password(DEFAULT_ADMIN, b"new", LOCAL, 0)
                .is_ok()
        );
    }

    #[test]
    fn with_quotas_on_a_users_grants_carry_its_largest_quota_and_one_meter() {
        let security = open().with_quotas(true);
        let credential = credential_of(b"pw");
        security
            .change(|tables| {
                for (name, quota) in [("slow", 10), ("faster", 20)] {
                    let role = Role {
                        privileges: vec![Privilege::global(PrivilegeCode::Read)],
                        read_quota: quota,
                        ..Role::default()
                    };
                    tables.create_role(name, role)?;
                }
                tables.create_user(
                    "q",
                    credential.as_bytes(),
                    &["slow".to_owned(), "faster".to_owned()],
                )
            })
            .expect("created");
        let grants = security.grants("q", LOCAL).expect("exists");
        let quota = grants.quota.clone().expect("a quota");
        assert_eq!((quota.read, quota.write), (20, 0));
        let again = security.grants("q", LOCAL).expect("exists");
        assert_eq!(again.quota, grants.quota, "one meter per user");
        for _ in 0..20 {
            assert!(quota.take(quota::Kind::Read, 1, 7));
        }
        assert!(!quota.take(quota::Kind::Read, 1, 7));
        assert_eq!(security.rates("q", 7), (21, 0));
        let unlimited = open().with_quotas(false);
        assert!(
            unlimited
                .grants(DEFAULT_ADMIN, LOCAL)
                .expect("exists")
                .quota
                .is_none()
        );
    }

    #[test]
    fn a_change_is_replicated_and_another_nodes_tables_replace_these() {
        let here = open();
        let there = open();
        let replicated = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sent = Arc::clone(&replicated);
        here.set_replicator(Box::new(move |kept| sent.lock().push(kept)));
        let credential = credential_of(b"pw");
        here.change(|tables| tables.create_user("everywhere", credential.as_bytes(), &[]))
            .expect("created");
        let kept = replicated.lock().pop().expect("the change was replicated");
        let token = here
            .login("everywhere", credential.as_bytes(), LOCAL, 0)
            .expect("logs in here")
            .token;
        assert_eq!(
            there.authenticate("everywhere", &token, LOCAL, 1),
            Err(SecurityError::InvalidCredential),
            "another node's key did not seal it"
        );
        let version = there.version();
        there.replace(&kept).expect("applied");
        assert!(there.version() > version);
        assert_eq!(
            there.authenticate("everywhere", &token, LOCAL, 1),
            Ok(()),
            "the same key seals tokens on both nodes"
        );
        let version = there.version();
        there.replace(&kept).expect("applied again");
        assert_eq!(there.version(), version, "the same tables change nothing");
        assert!(there.replace("{ not the tables").is_err());
    }

    #[test]
    fn a_password_change_ends_the_users_sessions() {
        let security = open();
        let token = security
            .login(DEFAULT_ADMIN, admin_credential().as_bytes(), LOCAL, 0)
            .expect("logs in")
            .token;
        let new = credential_of(b"new password");
        security
            .change(|tables| tables.set_password(DEFAULT_ADMIN, new.as_bytes()))
            .expect("changed");
        assert_eq!(
            security.authenticate(DEFAULT_ADMIN, &token, LOCAL, 1),
            Err(SecurityError::ExpiredSession)
        );
        security
            .login(DEFAULT_ADMIN, new.as_bytes(), LOCAL, 1)
            .expect("the new password logs in");
    }

    #[test]
    fn a_change_moves_the_version_and_survives_a_restart() {
        let kept = Arc::new(MemoryStore::default());
        let security = Security::open(Box::new(Shared(Arc::clone(&kept))), 60).expect("opens");
        let token = security
            .login(DEFAULT_ADMIN, admin_credential().as_bytes(), LOCAL, 0)
            .expect("logs in")
            .token;
        let before = security.version();
        let credential = credential_of(b"reader");
        security
            .change(|tables| {
                tables.create_user("reader", credential.as_bytes(), &["read".to_owned()])
            })
            .expect("created");
        assert!(security.version() > before);
        let restarted = Security::open(Box::new(Shared(kept)), 60).expect("opens again");
        restarted
            .login("reader", credential.as_bytes(), LOCAL, 0)
            .expect("the user is still there");
        assert_eq!(
            restarted.authenticate(DEFAULT_ADMIN, &token, LOCAL, 1),
            Ok(()),
            "a session outlives a restart"
        );
    }

    #[test]
    fn a_change_the_store_cannot_keep_is_not_made() {
        let security = Security::open(Box::new(Full), 60).expect("opens");
        let version = security.version();
        let credential = credential_of(b"x");
        assert_eq!(
            security.change(|tables| tables.create_user("lost", credential.as_bytes(), &[])),
            Err(SecurityError::Storage)
        );
        assert_eq!(security.version(), version);
        assert!(security.read(|tables| !tables.users.contains_key("lost")));
    }

    #[test]
    fn a_role_with_an_allow_list_applies_only_from_it() {
        let security = open();
        let credential = credential_of(b"pw");
        let remote: IpAddr = "192.0.2.7".parse().expect("ip");
        security
            .change(|tables| {
                let role = Role {
                    privileges: vec![Privilege::global(PrivilegeCode::Read)],
                    whitelist: vec!["127.0.0.0/8".to_owned()],
                    ..Role::default()
                };
                tables.create_role("local-reader", role)?;
                tables.create_user("carol", credential.as_bytes(), &["local-reader".to_owned()])
            })
            .expect("created");
        assert!(
            security
                .login("carol", credential.as_bytes(), LOCAL, 0)
                .is_ok()
        );
        assert_eq!(
            security.login("carol", credential.as_bytes(), remote, 0),
            Err(SecurityError::NotWhitelisted)
        );
        let from_remote = security.grants("carol", remote).expect("exists");
        assert!(!from_remote.allows(Action::Read, b"test", b""));
        let from_local = security.grants("carol", LOCAL).expect("exists");
        assert!(from_local.allows(Action::Read, b"test", b""));
    }
}
