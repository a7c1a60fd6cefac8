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

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use engine::Clock;
use model::ResultCode;
use security::{
    Action, Grants, Origin, Privilege, PrivilegeCode, Protocol, Role, Security, SecurityError,
    quota,
};
use tracing::{info, warn};
use wire_aerospike::security::{
    self as wire, SecurityRequest, WirePrivilege, command, field, parse_names, parse_privileges,
    parse_u32,
};
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
        }
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

    /// Answers one security frame's body into `out`.
    pub fn answer_security(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let Some(security) = self.security.clone() else {
            // As an Aerospike server with security off: clients take it as "no login needed".
            wire::write_security_response(out, SecurityError::NotEnabled.code());
            return;
        };
        let request = match SecurityRequest::parse(body) {
            Ok(request) => request,
            Err(malformed) => {
                warn!(client = %self.client, reason = malformed.reason, "malformed security message");
                wire::write_security_response(out, SecurityError::InvalidField.code());
                return;
            }
        };
        let outcome = match request.command {
            command::LOGIN => self.login(&security, &request, out),
            command::AUTHENTICATE => self.authenticate(&security, &request),
            command::QUERY_USERS => self.query_users(&security, &request, out),
            command::QUERY_ROLES => self.query_roles(&security, &request, out),
            _ => self.administer(&security, &request),
        };
        match outcome {
            Ok(Answered::Written) => {}
            Ok(Answered::Done) => wire::write_security_response(out, 0),
            Err(error) => wire::write_security_response(out, error.code()),
        }
    }

    fn login(
        &mut self,
        security: &Security,
        request: &SecurityRequest<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Answered, SecurityError> {
        let user = text_field(request, field::USER, SecurityError::InvalidUser)?;
        let credential = request
            .field(field::CREDENTIAL)
            .ok_or(SecurityError::InvalidCredential)?;
        let outcome = security
            .login(user, credential, self.client, now_s())
            .and_then(|logged_in| self.start_session(security, user).map(|()| logged_in));
        self.audit_login(user, "login", &outcome);
        let logged_in = outcome.inspect_err(|error| {
            warn!(client = %self.client, user, %error, "login refused");
        })?;
        wire::write_login_response(out, &logged_in.token, logged_in.ttl_s);
        Ok(Answered::Written)
    }

    fn authenticate(
        &mut self,
        security: &Security,
        request: &SecurityRequest<'_>,
    ) -> Result<Answered, SecurityError> {
        let user = text_field(request, field::USER, SecurityError::InvalidUser)?;
        let token = request
            .field(field::SESSION_TOKEN)
            .ok_or(SecurityError::InvalidCredential)?;
        let outcome = security
            .authenticate(user, token, self.client, now_s())
            .and_then(|()| self.start_session(security, user));
        self.audit_login(user, "authenticate", &outcome);
        outcome.map(|()| Answered::Done)
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

    /// The user-admin commands that change the tables.
    fn administer(
        &mut self,
        security: &Security,
        request: &SecurityRequest<'_>,
    ) -> Result<Answered, SecurityError> {
        let change = AdminChange::parse(request)?;
        if !security.quotas_enabled() && change.sets_quotas() {
            return Err(SecurityError::QuotasNotEnabled);
        }
        let own_password_change = matches!(&change, AdminChange::ChangePassword { user, .. }
            if self.session.as_ref().is_some_and(|session| session.user == *user));
        if !own_password_change {
            self.require_user_admin()
                .inspect_err(|_| self.audit_denied(change.name()))?;
        }
        security.change(|tables| change.apply(tables))?;
        self.audit_change(change.name(), change.target());
        Ok(Answered::Done)
    }

    fn require_user_admin(&mut self) -> Result<(), SecurityError> {
        let grants = self
            .current_grants()
            .map_err(|_| SecurityError::NotAuthenticated)?;
        match grants {
            Some(grants) if grants.allows(Action::UserAdmin, b"", b"") => Ok(()),
            Some(_) => Err(SecurityError::RoleViolation),
            None => Ok(()),
        }
    }

    fn query_users(
        &mut self,
        security: &Security,
        request: &SecurityRequest<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Answered, SecurityError> {
        let wanted = optional_text_field(request, field::USER)?;
        let own = wanted.is_some()
            && self.session.as_ref().map(|session| session.user.as_str()) == wanted;
        if !own {
            self.require_user_admin()?;
        }
        let records = security.read(|tables| {
            let mut records = QueryRecords::default();
            for (name, user) in &tables.users {
                if wanted.is_none_or(|wanted| wanted == name) {
                    let quotas = user_quotas(tables, user);
                    let rates = security.rates(name, now_s());
                    records.push(|out| write_user_record(out, name, user, quotas, rates));
                }
            }
            records
        });
        if wanted.is_some() && records.count == 0 {
            return Err(SecurityError::InvalidUser);
        }
        records.finish(out);
        Ok(Answered::Written)
    }

    fn query_roles(
        &mut self,
        security: &Security,
        request: &SecurityRequest<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Answered, SecurityError> {
        let wanted = optional_text_field(request, field::ROLE)?;
        let own = wanted.is_some_and(|wanted| {
            let user = self.session.as_ref().map(|session| session.user.as_str());
            user.is_some_and(|user| {
                security.read(|tables| {
                    tables
                        .users
                        .get(user)
                        .is_some_and(|found| found.roles.contains(wanted))
                })
            })
        });
        if !own {
            self.require_user_admin()?;
        }
        let records = security.read(|tables| {
            let mut records = QueryRecords::default();
            for view in tables.all_roles() {
                if wanted.is_none_or(|wanted| wanted == view.name) {
                    records.push(|out| write_role_record(out, &view.name, &view.role));
                }
            }
            records
        });
        if wanted.is_some() && records.count == 0 {
            return Err(SecurityError::InvalidRole);
        }
        records.finish(out);
        Ok(Answered::Written)
    }
}

/// How a security command was answered.
enum Answered {
    /// Its reply is in `out` already.
    Written,
    /// Succeeded: the bare OK header is its reply.
    Done,
}

/// A change to the tables an admin command asks for.
#[derive(Debug)]
enum AdminChange {
    CreateUser {
        user: String,
        credential: Vec<u8>,
        roles: Vec<String>,
    },
    DropUser {
        user: String,
    },
    SetPassword {
        user: String,
        credential: Vec<u8>,
    },
    ChangePassword {
        user: String,
        old: Vec<u8>,
        new: Vec<u8>,
    },
    GrantRoles {
        user: String,
        roles: Vec<String>,
    },
    RevokeRoles {
        user: String,
        roles: Vec<String>,
    },
    CreateRole {
        role: String,
        definition: Role,
    },
    DropRole {
        role: String,
    },
    GrantPrivileges {
        role: String,
        privileges: Vec<Privilege>,
    },
    RevokePrivileges {
        role: String,
        privileges: Vec<Privilege>,
    },
    SetWhitelist {
        role: String,
        whitelist: Vec<String>,
    },
    SetQuotas {
        role: String,
        read_quota: u32,
        write_quota: u32,
    },
}

impl AdminChange {
    fn parse(request: &SecurityRequest<'_>) -> Result<AdminChange, SecurityError> {
        let user =
            || text_field(request, field::USER, SecurityError::InvalidUser).map(str::to_owned);
        let role =
            || text_field(request, field::ROLE, SecurityError::InvalidRole).map(str::to_owned);
        let credential = |id| {
            request
                .field(id)
                .map(<[u8]>::to_vec)
                .ok_or(SecurityError::InvalidPassword)
        };
        let roles = || roles_field(request);
        let privileges = || privileges_field(request);
        Ok(match request.command {
            command::CREATE_USER => AdminChange::CreateUser {
                user: user()?,
                credential: credential(field::PASSWORD)?,
                roles: roles()?,
            },
            command::DROP_USER => AdminChange::DropUser { user: user()? },
            command::SET_PASSWORD => AdminChange::SetPassword {
                user: user()?,
                credential: credential(field::PASSWORD)?,
            },
            command::CHANGE_PASSWORD => AdminChange::ChangePassword {
                user: user()?,
                old: credential(field::OLD_PASSWORD)?,
                new: credential(field::PASSWORD)?,
            },
            command::GRANT_ROLES => AdminChange::GrantRoles {
                user: user()?,
                roles: roles()?,
            },
            command::REVOKE_ROLES => AdminChange::RevokeRoles {
                user: user()?,
                roles: roles()?,
            },
            command::CREATE_ROLE => AdminChange::CreateRole {
                role: role()?,
                definition: Role {
                    privileges: privileges()?,
                    whitelist: whitelist_field(request)?,
                    read_quota: quota_field(request, field::READ_QUOTA)?,
                    write_quota: quota_field(request, field::WRITE_QUOTA)?,
                },
            },
            command::DROP_ROLE => AdminChange::DropRole { role: role()? },
            command::GRANT_PRIVILEGES => AdminChange::GrantPrivileges {
                role: role()?,
                privileges: privileges()?,
            },
            command::REVOKE_PRIVILEGES => AdminChange::RevokePrivileges {
                role: role()?,
                privileges: privileges()?,
            },
            command::SET_WHITELIST => AdminChange::SetWhitelist {
                role: role()?,
                whitelist: whitelist_field(request)?,
            },
            command::SET_QUOTAS => AdminChange::SetQuotas {
                role: role()?,
                read_quota: quota_field(request, field::READ_QUOTA)?,
                write_quota: quota_field(request, field::WRITE_QUOTA)?,
            },
            _ => return Err(SecurityError::InvalidCommand),
        })
    }

    fn apply(&self, tables: &mut security::Tables) -> Result<(), SecurityError> {
        match self {
            AdminChange::CreateUser {
                user,
                credential,
                roles,
            } => tables.create_user(user, credential, roles),
            AdminChange::DropUser { user } => tables.drop_user(user),
            AdminChange::SetPassword { user, credential } => tables.set_password(user, credential),
            AdminChange::ChangePassword { user, old, new } => {
                tables.change_password(user, old, new)
            }
            AdminChange::GrantRoles { user, roles } => tables.grant_roles(user, roles),
            AdminChange::RevokeRoles { user, roles } => tables.revoke_roles(user, roles),
            AdminChange::CreateRole { role, definition } => {
                tables.create_role(role, definition.clone())
            }
            AdminChange::DropRole { role } => tables.drop_role(role),
            AdminChange::GrantPrivileges { role, privileges } => {
                tables.grant_privileges(role, privileges)
            }
            AdminChange::RevokePrivileges { role, privileges } => {
                tables.revoke_privileges(role, privileges)
            }
            AdminChange::SetWhitelist { role, whitelist } => {
                tables.set_whitelist(role, whitelist.clone())
            }
            AdminChange::SetQuotas {
                role,
                read_quota,
                write_quota,
            } => tables.set_quotas(role, *read_quota, *write_quota),
        }
    }

    /// Whether it sets a quota (refused while quotas are off).
    fn sets_quotas(&self) -> bool {
        match self {
            AdminChange::SetQuotas { .. } => true,
            AdminChange::CreateRole { definition, .. } => {
                definition.read_quota != 0 || definition.write_quota != 0
            }
            _ => false,
        }
    }

    /// The user or role it changes.
    fn target(&self) -> &str {
        match self {
            AdminChange::CreateUser { user, .. }
            | AdminChange::DropUser { user }
            | AdminChange::SetPassword { user, .. }
            | AdminChange::ChangePassword { user, .. }
            | AdminChange::GrantRoles { user, .. }
            | AdminChange::RevokeRoles { user, .. } => user,
            AdminChange::CreateRole { role, .. }
            | AdminChange::DropRole { role }
            | AdminChange::GrantPrivileges { role, .. }
            | AdminChange::RevokePrivileges { role, .. }
            | AdminChange::SetWhitelist { role, .. }
            | AdminChange::SetQuotas { role, .. } => role,
        }
    }

    /// The command's name, for the log.
    fn name(&self) -> &'static str {
        match self {
            AdminChange::CreateUser { .. } => "create-user",
            AdminChange::DropUser { .. } => "drop-user",
            AdminChange::SetPassword { .. } => "set-password",
            AdminChange::ChangePassword { .. } => "change-password",
            AdminChange::GrantRoles { .. } => "grant-roles",
            AdminChange::RevokeRoles { .. } => "revoke-roles",
            AdminChange::CreateRole { .. } => "create-role",
            AdminChange::DropRole { .. } => "drop-role",
            AdminChange::GrantPrivileges { .. } => "grant-privileges",
            AdminChange::RevokePrivileges { .. } => "revoke-privileges",
            AdminChange::SetWhitelist { .. } => "set-whitelist",
            AdminChange::SetQuotas { .. } => "set-quotas",
        }
    }
}

fn text_field<'a>(
    request: &SecurityRequest<'a>,
    id: u8,
    missing: SecurityError,
) -> Result<&'a str, SecurityError> {
    let data = request.field(id).ok_or(missing)?;
    std::str::from_utf8(data).map_err(|_| missing)
}

fn optional_text_field<'a>(
    request: &SecurityRequest<'a>,
    id: u8,
) -> Result<Option<&'a str>, SecurityError> {
    request
        .field(id)
        .map(|data| std::str::from_utf8(data).map_err(|_| SecurityError::InvalidField))
        .transpose()
}

fn roles_field(request: &SecurityRequest<'_>) -> Result<Vec<String>, SecurityError> {
    let Some(data) = request.field(field::ROLES) else {
        return Ok(Vec::new());
    };
    let names = parse_names(data).map_err(|_| SecurityError::InvalidField)?;
    names
        .into_iter()
        .map(|name| {
            std::str::from_utf8(name)
                .map(str::to_owned)
                .map_err(|_| SecurityError::InvalidRole)
        })
        .collect()
}

fn privileges_field(request: &SecurityRequest<'_>) -> Result<Vec<Privilege>, SecurityError> {
    let Some(data) = request.field(field::PRIVILEGES) else {
        return Ok(Vec::new());
    };
    let privileges = parse_privileges(data).map_err(|_| SecurityError::InvalidField)?;
    privileges
        .into_iter()
        .map(|privilege| {
            let code =
                PrivilegeCode::from_wire(privilege.code).ok_or(SecurityError::InvalidPrivilege)?;
            let text = |bytes: &[u8]| {
                std::str::from_utf8(bytes)
                    .map(str::to_owned)
                    .map_err(|_| SecurityError::InvalidPrivilege)
            };
            Ok(Privilege {
                code,
                namespace: text(privilege.namespace)?,
                set: text(privilege.set)?,
            })
        })
        .collect()
}

fn whitelist_field(request: &SecurityRequest<'_>) -> Result<Vec<String>, SecurityError> {
    let Some(data) = request.field(field::WHITELIST) else {
        return Ok(Vec::new());
    };
    let text = std::str::from_utf8(data).map_err(|_| SecurityError::InvalidWhitelist)?;
    Ok(text
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect())
}

fn quota_field(request: &SecurityRequest<'_>, id: u8) -> Result<u32, SecurityError> {
    request.field(id).map_or(Ok(0), |data| {
        parse_u32(data).map_err(|_| SecurityError::InvalidField)
    })
}

/// A query's answer: records gathered into frames of about [`wire::QUERY_FRAME_BYTES`].
#[derive(Default)]
struct QueryRecords {
    frames: Vec<u8>,
    /// Where the frame being filled starts, if one is.
    open_frame: Option<usize>,
    count: usize,
}

impl QueryRecords {
    fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = match self.open_frame {
            Some(start) => start,
            None => {
                let start = wire_aerospike::begin_proto(&mut self.frames);
                self.open_frame = Some(start);
                start
            }
        };
        write(&mut self.frames);
        self.count += 1;
        if self.frames.len() - start >= wire::QUERY_FRAME_BYTES {
            self.close_frame();
        }
    }

    fn close_frame(&mut self) {
        if let Some(start) = self.open_frame.take() {
            wire_aerospike::finish_proto(
                &mut self.frames,
                start,
                wire_aerospike::ProtoType::Security,
            );
        }
    }

    /// Appends the frames and the frame that ends the query to `out`.
    fn finish(mut self, out: &mut Vec<u8>) {
        self.close_frame();
        out.extend_from_slice(&self.frames);
        wire::write_query_end(out);
    }
}

/// A user's read and write quotas, from all its roles (allow-lists aside).
fn user_quotas(tables: &security::Tables, user: &security::User) -> (u32, u32) {
    let roles: Vec<Role> = user
        .roles
        .iter()
        .filter_map(|name| tables.role(name))
        .collect();
    (
        quota::effective(roles.iter().map(|role| role.read_quota)),
        quota::effective(roles.iter().map(|role| role.write_quota)),
    )
}

/// A QUERY_USERS record. READ_INFO and WRITE_INFO are Aerospike's four figures: the quota, the
/// requests this second, then the scan and query figures (0 here: scans count as reads).
fn write_user_record(
    out: &mut Vec<u8>,
    name: &str,
    user: &security::User,
    (read_quota, write_quota): (u32, u32),
    (reads, writes): (u32, u32),
) {
    let record = wire::begin_record(out);
    wire::write_field(out, field::USER, name.as_bytes());
    wire::write_names_field(out, field::ROLES, user.roles.iter().map(String::as_bytes));
    wire::write_info_field(out, field::READ_INFO, &[read_quota, reads, 0, 0]);
    wire::write_info_field(out, field::WRITE_INFO, &[write_quota, writes, 0, 0]);
    wire::write_field(out, field::CONNECTIONS, &0u32.to_be_bytes());
    wire::finish_record(out, record, 0, 5);
}

fn write_role_record(out: &mut Vec<u8>, name: &str, role: &Role) {
    let record = wire::begin_record(out);
    let mut fields = 2;
    wire::write_field(out, field::ROLE, name.as_bytes());
    let privileges: Vec<WirePrivilege<'_>> = role
        .privileges
        .iter()
        .map(|privilege| WirePrivilege {
            code: privilege.code.wire(),
            namespace: privilege.namespace.as_bytes(),
            set: privilege.set.as_bytes(),
        })
        .collect();
    wire::write_privileges_field(out, &privileges);
    if !role.whitelist.is_empty() {
        wire::write_field(out, field::WHITELIST, role.whitelist.join(",").as_bytes());
        fields += 1;
    }
    if role.read_quota != 0 || role.write_quota != 0 {
        wire::write_field(out, field::READ_QUOTA, &role.read_quota.to_be_bytes());
        wire::write_field(out, field::WRITE_QUOTA, &role.write_quota.to_be_bytes());
        fields += 2;
    }
    wire::finish_record(out, record, 0, fields);
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
        b"cluster-leave" | b"recluster" => (Action::SysAdmin, "service-ctrl"),
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
