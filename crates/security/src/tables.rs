//! The user and role tables, and the changes the admin commands make to them.
//!
//! Invariants:
//! - Every role a user holds exists (predefined or in `roles`): dropping a role takes it from
//!   every user.
//! - `roles` holds only user-defined roles; a predefined role (named after its privilege code)
//!   can be neither created, dropped nor changed.
//! - A user's `epoch` grows at every password change: tokens sealed with an older epoch are
//!   refused.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::SecurityError;
use crate::password::{CREDENTIAL_LENGTH, Verifier};
use crate::privilege::{Privilege, PrivilegeCode};

/// Longest user or role name, in bytes (Aerospike's limit).
pub const NAME_LENGTH_MAX: usize = 63;
/// Most roles one user may hold, privileges one role may hold, or addresses in one allow-list.
pub const LIST_LENGTH_MAX: usize = 255;

/// A user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// What is kept of the user's credential.
    pub verifier: Verifier,
    /// The roles the user holds.
    pub roles: BTreeSet<String>,
    /// Grows at every password change.
    pub epoch: u32,
}

/// A user-defined role.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// What it allows, in the order they were granted (as Aerospike lists them).
    pub privileges: Vec<Privilege>,
    /// The client addresses (or networks, `10.0.0.0/8`) its privileges apply from; empty:
    /// every address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub whitelist: Vec<String>,
    /// Reads per second its users may make on one node; 0: no limit.
    #[serde(default)]
    pub read_quota: u32,
    /// Writes per second its users may make on one node; 0: no limit.
    #[serde(default)]
    pub write_quota: u32,
}

/// Every user and user-defined role.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tables {
    /// Users by name.
    pub users: BTreeMap<String, User>,
    /// User-defined roles by name.
    pub roles: BTreeMap<String, Role>,
}

/// A role as a query shows it: predefined or user-defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleView {
    /// Its name.
    pub name: String,
    /// Its definition.
    pub role: Role,
}

/// The predefined role named `name`, if one is.
pub fn predefined_role(name: &str) -> Option<Role> {
    let code = PrivilegeCode::ALL
        .into_iter()
        .find(|code| code.name() == name)?;
    Some(Role {
        privileges: vec![Privilege::global(code)],
        ..Role::default()
    })
}

impl Tables {
    /// The role named `name`, predefined or user-defined.
    pub fn role(&self, name: &str) -> Option<Role> {
        predefined_role(name).or_else(|| self.roles.get(name).cloned())
    }

    /// Every role, the predefined first, in Aerospike's order.
    pub fn all_roles(&self) -> Vec<RoleView> {
        let predefined = PrivilegeCode::ALL.into_iter().filter_map(|code| {
            Some(RoleView {
                name: code.name().to_owned(),
                role: predefined_role(code.name())?,
            })
        });
        let defined = self.roles.iter().map(|(name, role)| RoleView {
            name: name.clone(),
            role: role.clone(),
        });
        predefined.chain(defined).collect()
    }

    /// Adds user `name` with `credential` and `roles`.
    pub fn create_user(
        &mut self,
        name: &str,
        credential: &[u8],
        roles: &[String],
    ) -> Result<(), SecurityError> {
        check_name(name, SecurityError::InvalidUser)?;
        check_credential(credential)?;
        if self.users.contains_key(name) {
            return Err(SecurityError::UserAlreadyExists);
        }
        let roles = self.known_roles(roles)?;
        let user = User {
            verifier: Verifier::new(credential),
            roles,
            epoch: 0,
        };
        self.users.insert(name.to_owned(), user);
        Ok(())
    }

    /// Removes user `name`.
    pub fn drop_user(&mut self, name: &str) -> Result<(), SecurityError> {
        self.users
            .remove(name)
            .map(drop)
            .ok_or(SecurityError::InvalidUser)
    }

    /// Gives user `name` the credential `credential`, ending its sessions.
    pub fn set_password(&mut self, name: &str, credential: &[u8]) -> Result<(), SecurityError> {
        check_credential(credential)?;
        let user = self.user_mut(name)?;
        user.verifier = Verifier::new(credential);
        user.epoch = user.epoch.wrapping_add(1);
        Ok(())
    }

    /// Changes user `name`'s credential from `old` (which must match) to `new`.
    pub fn change_password(
        &mut self,
        name: &str,
        old: &[u8],
        new: &[u8],
    ) -> Result<(), SecurityError> {
        if !self.user_mut(name)?.verifier.matches(old) {
            return Err(SecurityError::InvalidCredential);
        }
        self.set_password(name, new)
    }

    /// Adds `roles` (at least one) to user `name`.
    pub fn grant_roles(&mut self, name: &str, roles: &[String]) -> Result<(), SecurityError> {
        let roles = self.known_roles(roles)?;
        if roles.is_empty() {
            return Err(SecurityError::InvalidRole);
        }
        let user = self.user_mut(name)?;
        if user.roles.len() + roles.len() > LIST_LENGTH_MAX {
            return Err(SecurityError::InvalidRole);
        }
        user.roles.extend(roles);
        Ok(())
    }

    /// Takes `roles` (at least one) from user `name`.
    pub fn revoke_roles(&mut self, name: &str, roles: &[String]) -> Result<(), SecurityError> {
        let roles = self.known_roles(roles)?;
        if roles.is_empty() {
            return Err(SecurityError::InvalidRole);
        }
        let user = self.user_mut(name)?;
        user.roles.retain(|role| !roles.contains(role));
        Ok(())
    }

    /// Adds role `name`.
    pub fn create_role(&mut self, name: &str, role: Role) -> Result<(), SecurityError> {
        check_name(name, SecurityError::InvalidRole)?;
        if self.role(name).is_some() {
            return Err(SecurityError::RoleAlreadyExists);
        }
        check_privileges(&role.privileges)?;
        if role.privileges.len() > LIST_LENGTH_MAX {
            return Err(SecurityError::InvalidPrivilege);
        }
        check_whitelist(&role.whitelist)?;
        let mut role = role;
        let mut seen = BTreeSet::new();
        role.privileges
            .retain(|privilege| seen.insert(privilege.clone()));
        self.roles.insert(name.to_owned(), role);
        Ok(())
    }

    /// Removes role `name` and takes it from every user.
    pub fn drop_role(&mut self, name: &str) -> Result<(), SecurityError> {
        self.role_mut(name)?;
        self.roles.remove(name);
        for user in self.users.values_mut() {
            user.roles.remove(name);
        }
        Ok(())
    }

    /// Adds `privileges` to role `name`.
    pub fn grant_privileges(
        &mut self,
        name: &str,
        privileges: &[Privilege],
    ) -> Result<(), SecurityError> {
        check_some_privileges(privileges)?;
        let role = self.role_mut(name)?;
        for privilege in privileges {
            if !role.privileges.contains(privilege) {
                role.privileges.push(privilege.clone());
            }
        }
        if role.privileges.len() > LIST_LENGTH_MAX {
            return Err(SecurityError::InvalidPrivilege);
        }
        Ok(())
    }

    /// Takes `privileges` from role `name`.
    pub fn revoke_privileges(
        &mut self,
        name: &str,
        privileges: &[Privilege],
    ) -> Result<(), SecurityError> {
        check_some_privileges(privileges)?;
        let role = self.role_mut(name)?;
        role.privileges
            .retain(|privilege| !privileges.contains(privilege));
        Ok(())
    }

    /// Replaces role `name`'s allow-list (empty: every address).
    pub fn set_whitelist(
        &mut self,
        name: &str,
        whitelist: Vec<String>,
    ) -> Result<(), SecurityError> {
        check_whitelist(&whitelist)?;
        self.role_mut(name)?.whitelist = whitelist;
        Ok(())
    }

    /// Replaces role `name`'s quotas (0: no limit).
    pub fn set_quotas(
        &mut self,
        name: &str,
        read_quota: u32,
        write_quota: u32,
    ) -> Result<(), SecurityError> {
        let role = self.role_mut(name)?;
        role.read_quota = read_quota;
        role.write_quota = write_quota;
        Ok(())
    }

    fn user_mut(&mut self, name: &str) -> Result<&mut User, SecurityError> {
        self.users.get_mut(name).ok_or(SecurityError::InvalidUser)
    }

    /// A user-defined role, to change: a predefined one may not be.
    fn role_mut(&mut self, name: &str) -> Result<&mut Role, SecurityError> {
        self.roles.get_mut(name).ok_or(SecurityError::InvalidRole)
    }

    fn known_roles(&self, roles: &[String]) -> Result<BTreeSet<String>, SecurityError> {
        if roles.len() > LIST_LENGTH_MAX {
            return Err(SecurityError::InvalidRole);
        }
        roles
            .iter()
            .map(|role| match self.role(role) {
                Some(_) => Ok(role.clone()),
                None => Err(SecurityError::InvalidRole),
            })
            .collect()
    }
}

fn check_name(name: &str, error: SecurityError) -> Result<(), SecurityError> {
    let valid = !name.is_empty()
        && name.len() <= NAME_LENGTH_MAX
        && !name
            .chars()
            .any(|character| character.is_control() || character == ';' || character == ':');
    if valid { Ok(()) } else { Err(error) }
}

/// A credential is a bcrypt hash as the clients send it.
fn check_credential(credential: &[u8]) -> Result<(), SecurityError> {
    if credential.len() == CREDENTIAL_LENGTH && credential.starts_with(b"$2") {
        Ok(())
    } else {
        Err(SecurityError::InvalidPassword)
    }
}

fn check_privileges<'a>(
    privileges: impl IntoIterator<Item = &'a Privilege>,
) -> Result<(), SecurityError> {
    privileges.into_iter().try_for_each(Privilege::validate)
}

/// A grant or revoke names at least one privilege, each valid.
fn check_some_privileges(privileges: &[Privilege]) -> Result<(), SecurityError> {
    if privileges.is_empty() {
        return Err(SecurityError::InvalidPrivilege);
    }
    check_privileges(privileges)
}

fn check_whitelist(whitelist: &[String]) -> Result<(), SecurityError> {
    if whitelist.len() > LIST_LENGTH_MAX {
        return Err(SecurityError::InvalidWhitelist);
    }
    for entry in whitelist {
        if parse_network(entry).is_none() {
            return Err(SecurityError::InvalidWhitelist);
        }
    }
    Ok(())
}

/// An address (`10.1.2.3`) or network (`10.0.0.0/8`) of an allow-list: its address and prefix
/// length.
pub fn parse_network(entry: &str) -> Option<(IpAddr, u8)> {
    let (address, prefix) = match entry.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (entry, None),
    };
    let address: IpAddr = address.parse().ok()?;
    let bits_max = if address.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        Some(prefix) => prefix.parse::<u8>().ok().filter(|&bits| bits <= bits_max)?,
        None => bits_max,
    };
    Some((address, prefix))
}

/// Whether `client` is within the network `(address, prefix)`.
pub fn network_contains((address, prefix): (IpAddr, u8), client: IpAddr) -> bool {
    let client = match (address, client) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(client, IpAddr::V4),
        _ => client,
    };
    match (address, client) {
        (IpAddr::V4(network), IpAddr::V4(client)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(network) & mask == u32::from(client) & mask
        }
        (IpAddr::V6(network), IpAddr::V6(client)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(network) & mask == u128::from(client) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(tag: u8) -> Vec<u8> {
        let mut credential = b"$2a$10$7EqJtq98hPqEX7fNZaFWoO".to_vec();
        credential.resize(CREDENTIAL_LENGTH, b'a' + tag);
        credential
    }

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn users_are_created_once_with_known_roles_only() {
        let mut tables = Tables::default();
        tables
            .create_user("alice", &credential(0), &roles(&["read"]))
            .expect("created");
        assert_eq!(
            tables.create_user("alice", &credential(0), &[]),
            Err(SecurityError::UserAlreadyExists)
        );
        assert_eq!(
            tables.create_user("bob", &credential(0), &roles(&["no-such-role"])),
            Err(SecurityError::InvalidRole)
        );
        assert_eq!(
            tables.create_user("bob", b"short", &[]),
            Err(SecurityError::InvalidPassword)
        );
        let long_name = "x".repeat(NAME_LENGTH_MAX + 1);
        assert_eq!(
            tables.create_user(&long_name, &credential(0), &[]),
            Err(SecurityError::InvalidUser)
        );
        assert!(!tables.users.contains_key("bob"));
    }

    #[test]
    fn a_password_change_needs_the_old_one_and_moves_the_epoch() {
        let mut tables = Tables::default();
        tables
            .create_user("alice", &credential(0), &[])
            .expect("created");
        assert_eq!(
            tables.change_password("alice", &credential(9), &credential(1)),
            Err(SecurityError::InvalidCredential)
        );
        tables
            .change_password("alice", &credential(0), &credential(1))
            .expect("changed");
        let alice = &tables.users["alice"];
        assert!(alice.verifier.matches(&credential(1)));
        assert_eq!(alice.epoch, 1);
    }

    #[test]
    fn dropping_a_role_takes_it_from_its_users_and_predefined_roles_stay() {
        let mut tables = Tables::default();
        let role = Role {
            privileges: vec![Privilege::global(PrivilegeCode::Read)],
            ..Role::default()
        };
        tables.create_role("reader", role).expect("created");
        tables
            .create_user("alice", &credential(0), &roles(&["reader", "write"]))
            .expect("created");
        tables.drop_role("reader").expect("dropped");
        assert_eq!(
            tables.users["alice"].roles,
            BTreeSet::from(["write".to_owned()])
        );
        assert_eq!(tables.drop_role("read"), Err(SecurityError::InvalidRole));
        assert_eq!(
            tables.create_role("read", Role::default()),
            Err(SecurityError::RoleAlreadyExists)
        );
        assert_eq!(
            tables.grant_privileges("write", &[Privilege::global(PrivilegeCode::Read)]),
            Err(SecurityError::InvalidRole)
        );
    }

    #[test]
    fn allow_lists_take_addresses_and_networks() {
        let mut tables = Tables::default();
        tables
            .create_role("local", Role::default())
            .expect("created");
        let list = roles(&["127.0.0.1", "10.0.0.0/8", "::1"]);
        tables.set_whitelist("local", list).expect("set");
        assert_eq!(
            tables.set_whitelist("local", roles(&["10.0.0.0/33"])),
            Err(SecurityError::InvalidWhitelist)
        );
        assert_eq!(
            tables.set_whitelist("local", roles(&["example.com"])),
            Err(SecurityError::InvalidWhitelist)
        );
        let network = parse_network("10.0.0.0/8").expect("parses");
        assert!(network_contains(
            network,
            "10.20.30.40".parse().expect("ip")
        ));
        assert!(network_contains(
            network,
            "::ffff:10.1.1.1".parse().expect("ip")
        ));
        assert!(!network_contains(network, "11.0.0.1".parse().expect("ip")));
        let everything = parse_network("0.0.0.0/0").expect("parses");
        assert!(network_contains(
            everything,
            "192.168.1.1".parse().expect("ip")
        ));
    }
}
