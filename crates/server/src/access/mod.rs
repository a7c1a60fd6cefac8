//! Access control on an Aerospike connection: its login, the security frames it sends (login,
//! authentication, user and role admin), and the check of each of its requests against its
//! user's privileges. Off (everything allowed, security frames answered "not enabled") unless
//! `[security]` is enabled.
//!
//! - A connection logs in (LOGIN with a credential, or AUTHENTICATE with the token a LOGIN
//!   gave) before anything else: until then a data request gets NOT_AUTHENTICATED (80) and
//!   an info request the single line `ERROR:80:not authenticated`, as Aerospike answers.
//! - A request is checked against the privileges of its user's roles that apply from the
//!   connection's address. They are compiled once and again only when the tables change, so
//!   a role revoked, or a user dropped, takes effect at the connection's next request.
//! - A batch is checked row by row before any row runs: one row its user may not run refuses
//!   the whole batch with ROLE_VIOLATION (81).
//!
//! Invariants:
//! - `session` is `Some` only after a LOGIN or AUTHENTICATE the tables accepted, and its
//!   grants are those of the tables' version they carry or a later one by the next check.

mod admin;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use engine::Clock;
use model::ResultCode;
use security::{Action, Grants, Origin, Protocol, Security, SecurityError, quota};
use tracing::{info, warn};
use wire_aerospike::{
    BatchRequest, Fields, MESSAGE_HEADER_SIZE_BYTES, Message, MessageHeader, info1, info2,
};

/// The whole reply to any info request on a connection that has not logged in.
pub const NOT_AUTHENTICATED_INFO: &[u8] = b"ERROR:80:not authenticated\n";

/// A connection's standing with access control.
#[derive(Debug)]
pub struct Access {
    security: Option<Arc<Security>>,
    client: IpAddr,
    protocol: Protocol,
    session: Option<Session>,
    /// The common name of the client certificate its TLS handshake verified: the user a
    /// certificate login (Aerospike's PKI) logs in as.
    certificate_user: Option<String>,
}

/// A logged-in user and what it may do.
#[derive(Debug)]
struct Session {
    user: String,
    grants: Grants,
}

impl Access {
    /// The access of a connection from `client` through `protocol`'s port (security off when
    /// `security` is `None`).
    pub fn new(
        security: Option<Arc<Security>>,
        client: Option<IpAddr>,
        protocol: Protocol,
    ) -> Access {
        Access {
            security,
            client: client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            protocol,
            session: None,
            certificate_user: None,
        }
    }

    /// The same, for a connection whose verified client certificate names `user`.
    pub fn with_certificate(mut self, user: Option<&str>) -> Access {
        self.certificate_user = user.map(str::to_owned);
        self
    }

    /// The user the client certificate names, if it presented one.
    pub fn certificate_user(&self) -> Option<&str> {
        self.certificate_user.as_deref()
    }

    /// Logs the connection in as the user its client certificate names (Valkey's
    /// `tls-auth-clients-user CN`); a certificate that names no user leaves it logged out.
    ///
    /// # Errors
    /// Why not: no certificate, security off, or the login refused (logged).
    pub fn log_in_with_certificate(&mut self) -> Result<security::LoggedIn, SecurityError> {
        let Some(security) = self.security.clone() else {
            return Err(SecurityError::NotEnabled);
        };
        let Some(user) = self.certificate_user.clone() else {
            return Err(SecurityError::InvalidCredential);
        };
        let outcome = security
            .login_certified(&user, self.client, now_s())
            .and_then(|logged_in| self.start_session(&security, &user).map(|()| logged_in));
        self.audit_login(&user, "certificate", &outcome);
        outcome.inspect_err(|error| warn!(client = %self.client, user, %error, "login refused"))
    }

    /// The access of a request another node forwarded here, checked where it arrived.
    pub fn trusted() -> Access {
        Access::new(None, None, Protocol::Redis)
    }

    fn origin<'a>(&self, user: &'a str) -> Origin<'a> {
        Origin {
            protocol: self.protocol,
            client: self.client,
            user,
        }
    }

    /// Writes a login's outcome to the audit trail.
    fn audit_login<T>(&self, user: &str, method: &str, outcome: &Result<T, SecurityError>) {
        if let Some(security) = &self.security {
            let refused = outcome.as_ref().err().map(ToString::to_string);
            security
                .audit
                .login(now_ms(), self.origin(user), method, refused.as_deref());
        }
    }

    /// Writes a refused request (`what` names it) to the audit trail.
    pub fn audit_denied(&self, what: &str) {
        if let Some(security) = &self.security {
            let user = self.user().unwrap_or_default();
            security.audit.denied(now_ms(), self.origin(user), what);
        }
    }

    /// Writes a change to the users and roles to the audit trail (and the log).
    pub fn audit_change(&self, change: &str, target: &str) {
        if let Some(security) = &self.security {
            let user = self.user().unwrap_or_default();
            info!(client = %self.client, user, change, target, "security tables changed");
            security
                .audit
                .changed(now_ms(), self.origin(user), change, target);
        }
    }

    /// Whether the connection may send requests: security is off, or it has logged in.
    pub fn is_authenticated(&self) -> bool {
        self.security.is_none() || self.session.is_some()
    }

    /// The security tables, when security is on.
    pub fn security(&self) -> Option<&Arc<Security>> {
        self.security.as_ref()
    }

    /// The logged-in user.
    pub fn user(&self) -> Option<&str> {
        self.session.as_ref().map(|session| session.user.as_str())
    }

    /// Logs the connection in as `user` with its password itself (Redis's AUTH): costs a
    /// bcrypt unless the pair logged in lately ([`Security::knows_password`]).
    ///
    /// # Errors
    /// Why the login was refused (logged); the connection's login is unchanged then.
    pub fn log_in_with_password(
        &mut self,
        user: &str,
        password: &[u8],
    ) -> Result<(), SecurityError> {
        let Some(security) = self.security.clone() else {
            return Err(SecurityError::NotEnabled);
        };
        let outcome = security
            .login_with_password(user, password, self.client, now_s())
            .and_then(|_| self.start_session(&security, user));
        self.audit_login(user, "auth", &outcome);
        outcome.inspect_err(|error| warn!(client = %self.client, user, %error, "login refused"))
    }

    /// Ends the login (Redis's RESET).
    pub fn log_out(&mut self) {
        self.session = None;
    }

    /// Whether the logged-in user may do `action` on `namespace` and `set` (the caller writes
    /// a refusal to the audit trail, naming what it refused).
    ///
    /// # Errors
    /// NOT_AUTHENTICATED before a login, ROLE_VIOLATION where a privilege is missing.
    pub fn check(
        &mut self,
        action: Action,
        namespace: &[u8],
        set: &[u8],
    ) -> Result<(), ResultCode> {
        match self.current_grants()? {
            Some(grants) if !grants.allows(action, namespace, set) => {
                Err(ResultCode::RoleViolation)
            }
            _ => Ok(()),
        }
    }

    /// Checks an AS_MSG body (a record request, a batch, a scan or query) against the
    /// user's privileges.
    ///
    /// # Errors
    /// NOT_AUTHENTICATED before a login, ROLE_VIOLATION where a privilege is missing. A body
    /// that does not parse passes: the dispatch refuses it as it would without security.
    pub fn check_message(&mut self, body: &[u8]) -> Result<(), ResultCode> {
        let Some((header, fields)) = body.split_first_chunk::<MESSAGE_HEADER_SIZE_BYTES>() else {
            return self.check_parsed_with(|_| true, String::new);
        };
        let header = MessageHeader::decode(header);
        if header.info1 & info1::BATCH != 0 {
            return self.check_batch(body);
        }
        match Fields::parse(fields, header.field_count) {
            Ok((fields, _)) => self.check_parsed(&header, &fields),
            Err(_) => self.check_parsed_with(|_| true, String::new),
        }
    }

    /// Checks a parsed record request, scan or query (no digest).
    ///
    /// # Errors
    /// As [`Access::check_message`].
    pub fn check_parsed(
        &mut self,
        header: &MessageHeader,
        fields: &Fields<'_>,
    ) -> Result<(), ResultCode> {
        let needs = if fields.digest.is_some() {
            record_needs(header, fields)
        } else {
            scan_needs(header, fields)
        };
        let kind = if needs
            .iter()
            .any(|&action| quota::Kind::of(action) == Some(quota::Kind::Write))
        {
            quota::Kind::Write
        } else {
            quota::Kind::Read
        };
        self.check_parsed_with(
            |grants| allows_all(grants, needs, fields),
            || {
                let names: Vec<&str> = needs.iter().map(|action| action.name()).collect();
                let scope = |field: Option<&[u8]>| {
                    String::from_utf8_lossy(field.unwrap_or_default()).into_owned()
                };
                format!(
                    "{} {}/{}",
                    names.join("+"),
                    scope(fields.namespace),
                    scope(fields.set)
                )
            },
        )?;
        self.take_quota(kind, 1)
    }

    /// Checks a batch, every row before any runs.
    ///
    /// # Errors
    /// As [`Access::check_message`]; one row not allowed refuses the batch.
    pub fn check_batch(&mut self, body: &[u8]) -> Result<(), ResultCode> {
        let mut rows = RowCounts::default();
        self.check_parsed_with(
            |grants| {
                let Ok(parent) = Message::parse_batch_parent(body) else {
                    return true;
                };
                batch_allowed(grants, &parent.fields, &mut rows)
            },
            || "batch".to_owned(),
        )?;
        if rows.reads > 0 {
            self.take_quota(quota::Kind::Read, rows.reads)?;
        }
        if rows.writes > 0 {
            self.take_quota(quota::Kind::Write, rows.writes)?;
        }
        Ok(())
    }

    /// Counts `count` requests of `kind` against the user's quota.
    ///
    /// # Errors
    /// QUOTA_EXCEEDED past the quota in this second (written to the audit trail).
    pub fn take_quota(&mut self, kind: quota::Kind, count: u32) -> Result<(), ResultCode> {
        let Some(quota) = self
            .session
            .as_ref()
            .and_then(|session| session.grants.quota.as_ref())
        else {
            return Ok(());
        };
        if quota.take(kind, count, now_s()) {
            return Ok(());
        }
        let what = match kind {
            quota::Kind::Read => "read quota",
            quota::Kind::Write => "write quota",
        };
        self.audit_denied(what);
        Err(ResultCode::QuotaExceeded)
    }

    /// `Ok` when security is off, or when `allowed` says the logged-in user's grants allow;
    /// a refusal goes to the audit trail as `what` names it.
    fn check_parsed_with(
        &mut self,
        allowed: impl FnOnce(&Grants) -> bool,
        what: impl FnOnce() -> String,
    ) -> Result<(), ResultCode> {
        match self.current_grants()? {
            None => Ok(()),
            Some(grants) if allowed(grants) => Ok(()),
            Some(_) => {
                self.audit_denied(&what());
                Err(ResultCode::RoleViolation)
            }
        }
    }

    /// Why the info command `name` (with parameters `params`) may not run, as the value to
    /// answer in its place; `None` when it may.
    pub fn info_refusal(&mut self, name: &[u8], params: &[u8]) -> Option<String> {
        let (action, permission) = info_needs(name)?;
        let grants = match self.current_grants() {
            Ok(Some(grants)) => grants,
            Ok(None) => return None,
            Err(_) => return Some("ERROR:80:not authenticated".to_owned()),
        };
        let namespace = wire_aerospike::info_param(params, b"namespace").unwrap_or_default();
        let set = wire_aerospike::info_param(params, b"set").unwrap_or_default();
        // Without a namespace (truncate's) it needs the global privilege.
        if grants.allows(action, namespace, set) {
            return None;
        }
        self.audit_denied(&String::from_utf8_lossy(name));
        Some(format!(
            "ERROR:81:role violation - requires permission '{permission}'"
        ))
    }

    /// The grants of the logged-in user, compiled again when the tables changed since.
    /// `Ok(None)` when security is off.
    fn current_grants(&mut self) -> Result<Option<&Grants>, ResultCode> {
        let Some(security) = &self.security else {
            return Ok(None);
        };
        let session = self.session.as_mut().ok_or(ResultCode::NotAuthenticated)?;
        if session.grants.version != security.version() {
            match security.grants(&session.user, self.client) {
                Some(grants) => session.grants = grants,
                None => {
                    info!(user = %session.user, "session ended: the user was dropped");
                    self.session = None;
                    return Err(ResultCode::NotAuthenticated);
                }
            }
        }
        Ok(self.session.as_ref().map(|session| &session.grants))
    }

    fn start_session(&mut self, security: &Security, user: &str) -> Result<(), SecurityError> {
        let grants = security
            .grants(user, self.client)
            .ok_or(SecurityError::InvalidUser)?;
        self.session = Some(Session {
            user: user.to_owned(),
            grants,
        });
        Ok(())
    }
}

/// What a single-record request (or batch row) needs: a UDF call needs UDF; a write or delete
/// needs write, and read too when it also reads; anything else needs read.
fn record_needs(header: &MessageHeader, fields: &Fields<'_>) -> &'static [Action] {
    if fields.udf {
        &[Action::Udf]
    } else if header.info2 & (info2::WRITE | info2::DELETE) != 0 {
        if header.info1 & info1::READ != 0 {
            &[Action::Read, Action::Write]
        } else {
            &[Action::Write]
        }
    } else {
        &[Action::Read]
    }
}

/// What a scan or query needs: a UDF (background or aggregation) needs UDF; background ops
/// need read and write; anything else needs read.
fn scan_needs(header: &MessageHeader, fields: &Fields<'_>) -> &'static [Action] {
    if fields.udf {
        &[Action::Udf]
    } else if header.info2 & info2::WRITE != 0 {
        &[Action::Read, Action::Write]
    } else {
        &[Action::Read]
    }
}

fn allows_all(grants: &Grants, needs: &[Action], fields: &Fields<'_>) -> bool {
    let namespace = fields.namespace.unwrap_or_default();
    let set = fields.set.unwrap_or_default();
    needs
        .iter()
        .all(|&action| grants.allows(action, namespace, set))
}

/// A batch's rows by what they count as against a quota.
#[derive(Default)]
struct RowCounts {
    reads: u32,
    writes: u32,
}

/// Whether every row of a batch is allowed (a batch that does not parse is the dispatch's to
/// refuse), counting the rows in `rows`.
fn batch_allowed(grants: &Grants, parent: &Fields<'_>, rows: &mut RowCounts) -> bool {
    let Some(request) = parent.batch.and_then(|data| BatchRequest::parse(data).ok()) else {
        return true;
    };
    for row in request.rows() {
        let Ok(row) = row else {
            return true;
        };
        let needs = record_needs(&row.header, &row.fields);
        if !allows_all(grants, needs, &row.fields) {
            return false;
        }
        match needs.iter().any(|&action| action != Action::Read) {
            true => rows.writes = rows.writes.saturating_add(1),
            false => rows.reads = rows.reads.saturating_add(1),
        }
    }
    true
}

/// The action an info command needs and Aerospike's name for that permission; `None` for
/// the commands any logged-in user may run.
fn info_needs(name: &[u8]) -> Option<(Action, &'static str)> {
    Some(match name {
        b"set-config" | b"config-set" => (Action::SysAdmin, "set-config"),
        b"cluster-leave" | b"recluster" | b"tls-reload" => (Action::SysAdmin, "service-ctrl"),
        b"log-set" | b"set-log" => (Action::SysAdmin, "logging-ctrl"),
        b"sindex-create" | b"sindex-delete" => (Action::SindexAdmin, "sindex-admin"),
        b"udf-put" | b"udf-remove" | b"udf-clear-cache" => (Action::UdfAdmin, "udf-admin"),
        b"truncate" | b"truncate-namespace" | b"truncate-undo" | b"truncate-namespace-undo" => {
            (Action::Truncate, "truncate")
        }
        b"query-abort" | b"scan-abort" | b"query-abort-all" | b"scan-abort-all" => {
            (Action::QueryAdmin, "query-admin")
        }
        _ => return None,
    })
}

fn now_s() -> u64 {
    now_ms() / 1000
}

fn now_ms() -> u64 {
    engine::SystemClock.now_unix_ms()
}

/// Appends the reply refusing the AS_MSG `body` with `code`: a batch, scan or query gets the
/// message that ends a stream, a single-record request a bare reply.
pub fn write_refusal(out: &mut Vec<u8>, body: &[u8], code: ResultCode) {
    let streamed = match body.first_chunk::<MESSAGE_HEADER_SIZE_BYTES>() {
        Some(header) => {
            let header = MessageHeader::decode(header);
            header.info1 & info1::BATCH != 0
                || Message::parse(body).is_ok_and(|message| message.fields.digest.is_none())
        }
        None => false,
    };
    if streamed {
        crate::dispatch::write_stream_error(out, code);
    } else {
        crate::dispatch::reply_error(out, code);
    }
}
