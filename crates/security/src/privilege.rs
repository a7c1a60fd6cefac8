//! Privileges as Aerospike models them: a code, scoped globally, to a namespace, or to a
//! namespace and set; and the actions each one allows.

use serde::{Deserialize, Serialize};

use crate::SecurityError;

/// A privilege's code, numbered as on the wire (the clients' `PrivilegeCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrivilegeCode {
    /// Manage users and roles.
    UserAdmin,
    /// Database administration: configuration, jobs, and everything `data-admin` may do.
    SysAdmin,
    /// Secondary indexes, UDF modules and truncation.
    DataAdmin,
    /// UDF modules.
    UdfAdmin,
    /// Secondary indexes.
    SindexAdmin,
    /// Read records.
    Read,
    /// Read and write records.
    ReadWrite,
    /// Read and write records, and apply UDFs to them.
    ReadWriteUdf,
    /// Write records.
    Write,
    /// Truncate sets and namespaces.
    Truncate,
}

/// What a request does, as far as privileges go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Reads records (gets, batch reads, scans and queries).
    Read,
    /// Writes or deletes records.
    Write,
    /// Applies a UDF to records.
    Udf,
    /// Truncates a set or namespace.
    Truncate,
    /// Creates or drops a secondary index.
    SindexAdmin,
    /// Registers or removes a UDF module.
    UdfAdmin,
    /// Aborts scans and queries.
    QueryAdmin,
    /// Changes the configuration, and other administration of the node.
    SysAdmin,
    /// Manages users and roles.
    UserAdmin,
}

impl Action {
    fn bit(self) -> u16 {
        1 << self as u16
    }

    /// Its name, for the audit trail and the logs.
    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Udf => "udf",
            Action::Truncate => "truncate",
            Action::SindexAdmin => "sindex-admin",
            Action::UdfAdmin => "udf-admin",
            Action::QueryAdmin => "query-admin",
            Action::SysAdmin => "sys-admin",
            Action::UserAdmin => "user-admin",
        }
    }
}

impl PrivilegeCode {
    /// Every code, in wire order.
    pub const ALL: [PrivilegeCode; 10] = [
        PrivilegeCode::UserAdmin,
        PrivilegeCode::SysAdmin,
        PrivilegeCode::DataAdmin,
        PrivilegeCode::UdfAdmin,
        PrivilegeCode::SindexAdmin,
        PrivilegeCode::Read,
        PrivilegeCode::ReadWrite,
        PrivilegeCode::ReadWriteUdf,
        PrivilegeCode::Write,
        PrivilegeCode::Truncate,
    ];

    /// The code on the wire.
    pub fn wire(self) -> u8 {
        match self {
            PrivilegeCode::UserAdmin => 0,
            PrivilegeCode::SysAdmin => 1,
            PrivilegeCode::DataAdmin => 2,
            PrivilegeCode::UdfAdmin => 3,
            PrivilegeCode::SindexAdmin => 4,
            PrivilegeCode::Read => 10,
            PrivilegeCode::ReadWrite => 11,
            PrivilegeCode::ReadWriteUdf => 12,
            PrivilegeCode::Write => 13,
            PrivilegeCode::Truncate => 14,
        }
    }

    /// The code with wire value `code`.
    pub fn from_wire(code: u8) -> Option<PrivilegeCode> {
        PrivilegeCode::ALL
            .into_iter()
            .find(|candidate| candidate.wire() == code)
    }

    /// Aerospike's name, which is also the name of the predefined role that grants it.
    pub fn name(self) -> &'static str {
        match self {
            PrivilegeCode::UserAdmin => "user-admin",
            PrivilegeCode::SysAdmin => "sys-admin",
            PrivilegeCode::DataAdmin => "data-admin",
            PrivilegeCode::UdfAdmin => "udf-admin",
            PrivilegeCode::SindexAdmin => "sindex-admin",
            PrivilegeCode::Read => "read",
            PrivilegeCode::ReadWrite => "read-write",
            PrivilegeCode::ReadWriteUdf => "read-write-udf",
            PrivilegeCode::Write => "write",
            PrivilegeCode::Truncate => "truncate",
        }
    }

    /// Whether the privilege may be scoped to a namespace (and set): the data privileges may;
    /// on the wire only their codes (10 and up) carry a namespace and set at all.
    pub fn may_be_scoped(self) -> bool {
        self.wire() >= PrivilegeCode::Read.wire()
    }

    /// The actions this privilege allows.
    fn actions(self) -> u16 {
        use Action as A;
        let bits = |actions: &[Action]| actions.iter().fold(0, |bits, action| bits | action.bit());
        match self {
            PrivilegeCode::UserAdmin => bits(&[A::UserAdmin]),
            PrivilegeCode::SysAdmin => bits(&[
                A::SysAdmin,
                A::QueryAdmin,
                A::Truncate,
                A::SindexAdmin,
                A::UdfAdmin,
            ]),
            PrivilegeCode::DataAdmin => {
                bits(&[A::QueryAdmin, A::Truncate, A::SindexAdmin, A::UdfAdmin])
            }
            PrivilegeCode::UdfAdmin => bits(&[A::UdfAdmin]),
            PrivilegeCode::SindexAdmin => bits(&[A::SindexAdmin]),
            PrivilegeCode::Read => bits(&[A::Read]),
            PrivilegeCode::ReadWrite => bits(&[A::Read, A::Write]),
            PrivilegeCode::ReadWriteUdf => bits(&[A::Read, A::Write, A::Udf]),
            PrivilegeCode::Write => bits(&[A::Write]),
            PrivilegeCode::Truncate => bits(&[A::Truncate]),
        }
    }
}

/// A privilege: a code and its scope.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Privilege {
    /// What it allows.
    pub code: PrivilegeCode,
    /// The namespace it is limited to; empty: every namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The set it is limited to (within `namespace`); empty: every set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub set: String,
}

impl Privilege {
    /// A privilege over everything.
    pub fn global(code: PrivilegeCode) -> Privilege {
        Privilege {
            code,
            namespace: String::new(),
            set: String::new(),
        }
    }

    /// Checks the scope: a set only within a namespace, and a scope only where the code takes
    /// one (`InvalidPrivilege` otherwise).
    pub fn validate(&self) -> Result<(), SecurityError> {
        let scoped = !self.namespace.is_empty() || !self.set.is_empty();
        let set_alone = self.namespace.is_empty() && !self.set.is_empty();
        if (scoped && !self.code.may_be_scoped()) || set_alone {
            return Err(SecurityError::InvalidPrivilege);
        }
        Ok(())
    }

    /// Whether this privilege allows `action` on `namespace` and `set`.
    pub fn allows(&self, action: Action, namespace: &[u8], set: &[u8]) -> bool {
        self.code.actions() & action.bit() != 0
            && (self.namespace.is_empty() || self.namespace.as_bytes() == namespace)
            && (self.set.is_empty() || self.set.as_bytes() == set)
    }
}

impl std::fmt::Display for Privilege {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code.name())?;
        match (self.namespace.is_empty(), self.set.is_empty()) {
            (true, _) => Ok(()),
            (false, true) => write!(f, ".{}", self.namespace),
            (false, false) => write!(f, ".{}.{}", self.namespace, self.set),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes_round_trip_and_unknown_codes_are_refused() {
        for code in PrivilegeCode::ALL {
            assert_eq!(PrivilegeCode::from_wire(code.wire()), Some(code));
        }
        for unknown in [5, 9, 15, 255] {
            assert_eq!(PrivilegeCode::from_wire(unknown), None);
        }
    }

    #[test]
    fn a_scoped_privilege_allows_only_within_its_scope() {
        let read_demo = Privilege {
            code: PrivilegeCode::Read,
            namespace: "test".to_owned(),
            set: "demo".to_owned(),
        };
        assert!(read_demo.allows(Action::Read, b"test", b"demo"));
        assert!(!read_demo.allows(Action::Read, b"test", b"other"));
        assert!(!read_demo.allows(Action::Read, b"bar", b"demo"));
        assert!(!read_demo.allows(Action::Write, b"test", b"demo"));
        let write_test = Privilege {
            code: PrivilegeCode::Write,
            namespace: "test".to_owned(),
            set: String::new(),
        };
        assert!(write_test.allows(Action::Write, b"test", b"anything"));
        assert!(!write_test.allows(Action::Read, b"test", b"anything"));
    }

    #[test]
    fn each_code_allows_what_aerospike_documents() {
        let allows = |code, action| Privilege::global(code).allows(action, b"ns", b"");
        assert!(allows(PrivilegeCode::ReadWriteUdf, Action::Udf));
        assert!(!allows(PrivilegeCode::ReadWrite, Action::Udf));
        assert!(allows(PrivilegeCode::DataAdmin, Action::SindexAdmin));
        assert!(allows(PrivilegeCode::DataAdmin, Action::Truncate));
        assert!(!allows(PrivilegeCode::DataAdmin, Action::SysAdmin));
        assert!(allows(PrivilegeCode::SysAdmin, Action::UdfAdmin));
        assert!(!allows(PrivilegeCode::SysAdmin, Action::UserAdmin));
        assert!(!allows(PrivilegeCode::SysAdmin, Action::Read));
        assert!(!allows(PrivilegeCode::UserAdmin, Action::Read));
    }

    #[test]
    fn scopes_are_checked() {
        let scoped = |code, namespace: &str, set: &str| Privilege {
            code,
            namespace: namespace.to_owned(),
            set: set.to_owned(),
        };
        assert!(
            scoped(PrivilegeCode::Read, "test", "demo")
                .validate()
                .is_ok()
        );
        assert!(
            scoped(PrivilegeCode::Truncate, "test", "demo")
                .validate()
                .is_ok()
        );
        let refused = [
            scoped(PrivilegeCode::UserAdmin, "test", ""),
            scoped(PrivilegeCode::SysAdmin, "test", ""),
            scoped(PrivilegeCode::SindexAdmin, "test", ""),
            scoped(PrivilegeCode::Read, "", "demo"),
        ];
        for privilege in refused {
            assert_eq!(
                privilege.validate(),
                Err(SecurityError::InvalidPrivilege),
                "{privilege}"
            );
        }
    }
}
