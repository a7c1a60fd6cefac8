//! The security messages (proto type 2) of an Aerospike connection: LOGIN, AUTHENTICATE, the
//! user and role admin commands, and QUERY_USERS / QUERY_ROLES with their streamed answers.

use security::{Action, Privilege, PrivilegeCode, Role, Security, SecurityError, quota};
use tracing::warn;
use wire_aerospike::security::{
    self as wire, SecurityRequest, WirePrivilege, command, field, parse_names, parse_privileges,
    parse_u32,
};

use super::{Access, now_s};

impl Access {
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
        if request.field(field::USER).is_none() && request.field(field::CREDENTIAL).is_none() {
            // Aerospike's PKI login: no fields; the client certificate names the user.
            let logged_in = self.log_in_with_certificate()?;
            wire::write_login_response(out, &logged_in.token, logged_in.ttl_s);
            return Ok(Answered::Written);
        }
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
        // A PKI client names no user: its certificate does.
        let user = match (request.field(field::USER), self.certificate_user.clone()) {
            (None, Some(certified)) => certified,
            _ => text_field(request, field::USER, SecurityError::InvalidUser)?.to_owned(),
        };
        let user = user.as_str();
        let token = request
            .field(field::SESSION_TOKEN)
            .ok_or(SecurityError::InvalidCredential)?;
        let outcome = security
            .authenticate(user, token, self.client, now_s())
            .and_then(|()| self.start_session(security, user));
        self.audit_login(user, "authenticate", &outcome);
        outcome.map(|()| Answered::Done)
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
