//! Access control on the Redis port, over the same users and roles as the Aerospike port
//! (`crate::access`, the `security` crate): AUTH, HELLO's AUTH, the ACL commands, and the
//! check of each command a client sends against its user's privileges.
//!
//! - With security off every connection is Redis's `default` user, with every permission:
//!   AUTH answers as a Redis server with no password configured.
//! - With security on, a connection logs in with AUTH (or HELLO ... AUTH) before anything but
//!   AUTH, HELLO, QUIT and RESET (`NOAUTH`); RESET logs it out.
//! - Each command needs what its Redis categories map to (`command_need`): `@read` commands
//!   the `read` privilege, `@write` ones `write`, both on the Redis namespace and the set of
//!   the connection's database; scripts and functions `read-write-udf`; FLUSHDB and
//!   FLUSHALL `truncate`; `@admin` commands `sys-admin`; user management `user-admin`.
//!   A command not allowed is answered `NOPERM`. A script's own commands are not checked
//!   again: running it needed `read-write-udf`, which reads and writes.
//! - ACL SETUSER maps Redis's category rules onto the predefined roles (`+@read` to `read`,
//!   `+@write` to `write`, `+@scripting` to `read-write-udf`, `+@admin` to `sys-admin`,
//!   `+@all` to those three and `user-admin`); key patterns other than `~*`, single commands
//!   and disabled users have no counterpart, and are refused with an error naming the rule.

use std::sync::LazyLock;

use rustc_hash::FxHashMap;
use security::{Action, SecurityError};
use wire_resp::Args;

use super::acl_log::{Event, Reason};
use super::commands::{Command, subcommand_error};
use super::reply::Reply;
use super::{After, Session};

/// AUTH and ACL.
pub const COMMANDS: &[Command] = &[("auth", -2, auth), ("acl", -2, acl)];

const NOAUTH: &str = "NOAUTH Authentication required.";
/// A command past its user's quota (Redis has no such error; Aerospike's name).
const QUOTA_EXCEEDED: &str =
    "QUOTA_EXCEEDED this user's requests per second quota is spent for this second";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const NO_PASSWORD_CONFIGURED: &str = "ERR AUTH <password> called without any password \
    configured for the default user. Are you sure your configuration is correct?";
const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, \
    otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
    and select the RESP protocol version at the same time";

/// Redis's user of a connection that has not authenticated.
const DEFAULT_USER: &str = "default";

/// What a command needs, as far as privileges go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// A login only.
    Login,
    /// `Action` on the connection's database.
    Data(Action),
    /// `Action` everywhere.
    Global(Action),
}

/// The refusal of the command `args` on `session` (`NOAUTH` or `NOPERM`), or `None` when it
/// may run. Called for every command a client sends, before it is routed or queued.
pub(super) fn refusal(session: &mut Session, args: &Args) -> Option<String> {
    if args.is_empty() {
        return None;
    }
    if !session.seldom.acl.access.is_authenticated() {
        let mut buffer = [0u8; NAME_BYTES_MAX];
        let allowed_before_login = matches!(
            lower(args.get(0), &mut buffer),
            b"auth" | b"hello" | b"quit" | b"reset"
        );
        return (!allowed_before_login).then(|| NOAUTH.to_owned());
    }
    let need = session.seldom.acl.last_need.of(args);
    let version = session
        .seldom
        .acl
        .access
        .security()
        .map(|security| security.version());
    let Session {
        state,
        seldom,
        database,
        ..
    } = session;
    let ConnectionAcl { access, last_need } = &mut seldom.acl;
    let allowed = last_need.allowed_again(*database, version)
        || match need {
            Need::Login => true,
            Need::Data(action) => {
                let namespace = state.config.resp_namespace();
                let set = state.resp_databases.set_name(*database);
                access
                    .check(action, namespace.as_bytes(), set.as_bytes())
                    .is_ok()
            }
            Need::Global(action) => access.check(action, b"", b"").is_ok(),
        };
    if allowed {
        last_need.allowed(*database, version);
        let Need::Data(action) = need else {
            return None;
        };
        let kind = security::quota::Kind::of(action)?;
        return access
            .take_quota(kind, 1)
            .is_err()
            .then(|| QUOTA_EXCEEDED.to_owned());
    }
    let shown = shown_command(args);
    session.seldom.acl.access.audit_denied(&shown);
    let context = if session.transaction.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    log_event(
        session,
        Reason::Command,
        context,
        &shown,
        session.seldom.acl.access.user().unwrap_or(DEFAULT_USER),
    );
    Some(match session.seldom.acl.access.user() {
        Some(user) => no_permission(user, args),
        // Logged out meanwhile: the user was dropped.
        None => NOAUTH.to_owned(),
    })
}

/// Redis 7's NOPERM text, naming the command (`config|set` for a subcommand).
fn no_permission(user: &str, args: &Args) -> String {
    format!(
        "NOPERM User {user} has no permissions to run the '{}' command",
        shown_command(args)
    )
}

fn shown_command(args: &Args) -> String {
    let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
    if has_subcommands(&name) && args.len() > 1 {
        let subcommand = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
        format!("{name}|{subcommand}")
    } else {
        name
    }
}

fn has_subcommands(name: &str) -> bool {
    matches!(
        name,
        "acl"
            | "client"
            | "config"
            | "function"
            | "script"
            | "memory"
            | "object"
            | "slowlog"
            | "latency"
            | "pubsub"
            | "command"
            | "xinfo"
            | "xgroup"
            | "cluster"
            | "debug"
    )
}

/// A Redis connection's access: its login, and what its last command needed.
#[derive(Debug)]
pub(super) struct ConnectionAcl {
    pub(super) access: crate::access::Access,
    last_need: LastNeed,
}

impl ConnectionAcl {
    pub(super) fn new(access: crate::access::Access) -> ConnectionAcl {
        ConnectionAcl {
            access,
            last_need: LastNeed::default(),
        }
    }
}

/// The need of the command a connection sent last, by its name as sent, and whether it was
/// allowed: a connection mostly repeats its commands, and comparing a few bytes costs less
/// than the table's hash and the grants' check.
///
/// Invariant: `allowed_at` is the database and tables' version the last command was allowed
/// at, with the connection's current login: a new login clears it ([`LastNeed::forget`]), a
/// change of the tables moves the version, and a new command clears it.
#[derive(Debug, Default)]
pub(super) struct LastNeed {
    name: [u8; LAST_NAME_BYTES_MAX],
    length: usize,
    need: Option<Need>,
    allowed_at: Option<(super::databases::Database, Option<u64>)>,
}

impl LastNeed {
    /// Whether the command just looked up was allowed already, at `database` and the tables'
    /// `version`.
    fn allowed_again(&self, database: super::databases::Database, version: Option<u64>) -> bool {
        self.need.is_some() && self.allowed_at == Some((database, version))
    }

    /// Notes that the command just looked up was allowed at `database` and `version`.
    fn allowed(&mut self, database: super::databases::Database, version: Option<u64>) {
        if self.need.is_some() {
            self.allowed_at = Some((database, version));
        }
    }

    /// Forgets every decision: the connection logged in or out.
    pub(super) fn forget(&mut self) {
        *self = LastNeed::default();
    }
}

/// Longest name [`LastNeed`] remembers.
const LAST_NAME_BYTES_MAX: usize = 16;

impl LastNeed {
    /// What `args` needs ([`command_need`]), remembered for its name when it does not depend
    /// on a subcommand.
    fn of(&mut self, args: &Args) -> Need {
        let sent = args.get(0);
        if let Some(need) = self.need
            && self.name.get(..self.length) == Some(sent)
        {
            return need;
        }
        let (need, by_name) = command_need_by_name(args);
        self.need = None;
        self.allowed_at = None;
        if by_name && sent.len() <= LAST_NAME_BYTES_MAX {
            self.name[..sent.len()].copy_from_slice(sent);
            self.length = sent.len();
            self.need = Some(need);
        }
        need
    }
}

/// What the command `args` needs (see the module docs).
fn command_need(args: &Args) -> Need {
    command_need_by_name(args).0
}

/// What the command `args` needs, and whether its name alone decides it: looked up in a table
/// made once from [`need_of`], but for the commands whose need depends on their subcommand.
fn command_need_by_name(args: &Args) -> (Need, bool) {
    static NEEDS: LazyLock<FxHashMap<&'static [u8], Option<Need>>> = LazyLock::new(|| {
        super::commands::names()
            .map(|name| {
                let by_subcommand =
                    matches!(name, "client" | "acl" | "script" | "function" | "memory");
                let need = (!by_subcommand).then(|| need_of(name.as_bytes(), b""));
                (name.as_bytes(), need)
            })
            .collect()
    });
    let mut name_buffer = [0u8; NAME_BYTES_MAX];
    let name = lower(args.get(0), &mut name_buffer);
    match NEEDS.get(name) {
        Some(Some(need)) => (*need, true),
        // Unknown: answered as such once the check lets it through.
        None => (Need::Data(Action::Read), true),
        Some(None) => {
            let mut subcommand_buffer = [0u8; NAME_BYTES_MAX];
            // Checked before the arity is: a command may come without its subcommand.
            let subcommand = match args.len() {
                0 | 1 => &[][..],
                _ => lower(args.get(1), &mut subcommand_buffer),
            };
            (need_of(name, subcommand), false)
        }
    }
}

/// What the command `name` (lower case) with `subcommand` (lower case, or empty) needs.
fn need_of(name: &[u8], subcommand: &[u8]) -> Need {
    match name {
        b"auth" | b"hello" | b"quit" | b"reset" | b"ping" | b"echo" | b"select" | b"time"
        | b"command" | b"multi" | b"exec" | b"discard" | b"watch" | b"unwatch" | b"info"
        | b"lastsave" | b"role" | b"readonly" | b"readwrite" | b"asking" | b"wait" => Need::Login,
        b"client" => match subcommand {
            b"kill" | b"list" | b"pause" | b"unpause" | b"no-evict" => {
                Need::Global(Action::SysAdmin)
            }
            _ => Need::Login,
        },
        b"acl" => match subcommand {
            b"whoami" | b"cat" | b"help" => Need::Login,
            _ => Need::Global(Action::UserAdmin),
        },
        b"eval" | b"evalsha" | b"eval_ro" | b"evalsha_ro" | b"fcall" | b"fcall_ro" => {
            Need::Data(Action::Udf)
        }
        b"script" => match subcommand {
            b"flush" => Need::Global(Action::UdfAdmin),
            _ => Need::Data(Action::Udf),
        },
        b"function" => match subcommand {
            b"load" | b"delete" | b"flush" | b"restore" => Need::Global(Action::UdfAdmin),
            _ => Need::Data(Action::Udf),
        },
        b"flushdb" => Need::Data(Action::Truncate),
        b"flushall" => Need::Global(Action::Truncate),
        b"config" | b"debug" | b"shutdown" | b"monitor" | b"slowlog" | b"latency" | b"save"
        | b"bgsave" | b"bgrewriteaof" | b"replicaof" | b"slaveof" | b"failover" | b"swapdb"
        | b"module" | b"cluster" => Need::Global(Action::SysAdmin),
        b"memory" => match subcommand {
            b"usage" => Need::Data(Action::Read),
            _ => Need::Global(Action::SysAdmin),
        },
        b"publish" | b"spublish" => Need::Data(Action::Write),
        _ if super::script_host::is_write(name) => Need::Data(Action::Write),
        _ => Need::Data(Action::Read),
    }
}

/// Longest command or subcommand name looked at; longer words match none.
const NAME_BYTES_MAX: usize = 32;

/// `word` in lower case, in `buffer`; empty (matching no name) when longer than it.
fn lower<'b>(word: &[u8], buffer: &'b mut [u8; NAME_BYTES_MAX]) -> &'b [u8] {
    match buffer.get_mut(..word.len()) {
        Some(lower) => {
            lower.copy_from_slice(word);
            lower.make_ascii_lowercase();
            lower
        }
        None => &[],
    }
}

/// AUTH [username] password
fn auth(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (user, password) = match args.len() {
        2 => (DEFAULT_USER.as_bytes(), args.get(1)),
        3 => (args.get(1), args.get(2)),
        _ => {
            reply.error("ERR syntax error");
            return After::Continue;
        }
    };
    if session.seldom.acl.access.security().is_none() && args.len() == 2 {
        reply.error(NO_PASSWORD_CONFIGURED);
        return After::Continue;
    }
    match log_in(session, user, password) {
        Login::Done => reply.ok(),
        Login::Offload => return After::Offload,
        Login::Refused(message) => reply.error(message),
    }
    After::Continue
}

/// The outcome of a login attempt.
pub(super) enum Login {
    Done,
    /// The password's credential must be computed (bcrypt): run the command again on the
    /// long-request pool.
    Offload,
    Refused(&'static str),
}

/// Logs `session` in as `user` with `password` (AUTH and HELLO's AUTH).
pub(super) fn log_in(session: &mut Session, user: &[u8], password: &[u8]) -> Login {
    let Some(security) = session.seldom.acl.access.security().cloned() else {
        // As Redis with no password configured: the default user takes any password.
        return match user == DEFAULT_USER.as_bytes() {
            true => Login::Done,
            false => Login::Refused(WRONGPASS),
        };
    };
    let Ok(user) = std::str::from_utf8(user) else {
        return Login::Refused(WRONGPASS);
    };
    if session.may_offload && !security.knows_password(user, password) {
        return Login::Offload;
    }
    session.seldom.acl.last_need.forget();
    match session
        .seldom
        .acl
        .access
        .log_in_with_password(user, password)
    {
        Ok(()) => Login::Done,
        Err(_) => {
            log_event(session, Reason::Auth, "toplevel", "AUTH", user);
            Login::Refused(WRONGPASS)
        }
    }
}

/// Adds an event of `session` to ACL LOG.
fn log_event(
    session: &Session,
    reason: Reason,
    context: &'static str,
    object: &str,
    username: &str,
) {
    let client_info = session
        .registration
        .as_ref()
        .map(|registration| registration.entry.line())
        .unwrap_or_default();
    session.state.resp_acl_log.record(Event {
        reason,
        context,
        object,
        username,
        client_info,
        now_ms: unix_now_ms(),
    });
}

fn unix_now_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

/// Why HELLO without AUTH may not run on `session`, if it may not.
pub(super) fn hello_refusal(session: &Session) -> Option<&'static str> {
    (!session.seldom.acl.access.is_authenticated()).then_some(HELLO_NOAUTH)
}

/// Ends `session`'s login (RESET).
pub(super) fn log_out(session: &mut Session) {
    session.seldom.acl.access.log_out();
    session.seldom.acl.last_need.forget();
}

/// ACL WHOAMI | CAT [category] | USERS | LIST | GETUSER user | SETUSER user rule... |
/// DELUSER user... | DRYRUN user command arg... | LOG | SAVE | LOAD | HELP
fn acl(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"WHOAMI", 2) => reply.bulk(
            session
                .seldom
                .acl
                .access
                .user()
                .unwrap_or(DEFAULT_USER)
                .as_bytes(),
        ),
        (b"CAT", 2) => {
            reply.array(CATEGORIES.len());
            for category in CATEGORIES {
                reply.bulk(category.as_bytes());
            }
        }
        (b"CAT", 3) => acl_cat(args.get(2), reply),
        (b"USERS", 2) => acl_users(session, reply),
        (b"LIST", 2) => acl_list(session, reply),
        (b"GETUSER", 3) => acl_getuser(session, args.get(2), reply),
        (b"SETUSER", 3..) => return acl_setuser(session, args, reply),
        (b"DELUSER", 3..) => acl_deluser(session, args, reply),
        (b"DRYRUN", 4..) => acl_dryrun(session, args, reply),
        (b"LOG", 2) => session.state.resp_acl_log.write(None, unix_now_ms(), reply),
        (b"LOG", 3) if args.get(2).eq_ignore_ascii_case(b"reset") => {
            session.state.resp_acl_log.reset();
            reply.ok();
        }
        (b"LOG", 3) => match super::keys::parse_i64(args.get(2)) {
            Ok(count) if count >= 0 => {
                let count = usize::try_from(count).unwrap_or(usize::MAX);
                session
                    .state
                    .resp_acl_log
                    .write(Some(count), unix_now_ms(), reply);
            }
            _ => reply.error("ERR value is out of range, must be positive"),
        },
        (b"SAVE" | b"LOAD", 2) => reply.error(
            "ERR Osprey keeps its users in security.json itself: ACL SAVE and LOAD have nothing \
             to do",
        ),
        (b"HELP", 2) => {
            reply.array(ACL_HELP.len());
            for line in ACL_HELP {
                reply.simple(line);
            }
        }
        _ => reply.error(&subcommand_error("acl", ACL_SUBCOMMANDS, args)),
    }
    After::Continue
}

const ACL_SUBCOMMANDS: &[&str] = &[
    "cat", "deluser", "dryrun", "getuser", "help", "list", "load", "log", "save", "setuser",
    "users", "whoami",
];

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "LIST",
    "    Show users details in config file format.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries, or reset the log.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

/// Redis 7.0's command categories.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The commands of `category`, for the categories privileges map: `read`, `write`,
/// `scripting`, `admin` (and `dangerous`, the same here).
fn acl_cat(category: &[u8], reply: &mut Reply<'_>) {
    let category = category.to_ascii_lowercase();
    let Some(category) = CATEGORIES
        .iter()
        .find(|known| known.as_bytes() == category.as_slice())
    else {
        reply.error(&format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(&category)
        ));
        return;
    };
    let wanted = |need: Need| match *category {
        "read" => need == Need::Data(Action::Read),
        "write" => need == Need::Data(Action::Write),
        "scripting" => need == Need::Data(Action::Udf),
        "admin" | "dangerous" => need == Need::Global(Action::SysAdmin),
        _ => false,
    };
    let names: Vec<&str> = super::commands::names()
        .filter(|name| wanted(command_need(&[*name].iter().collect::<Args>())))
        .collect();
    reply.array(names.len());
    for name in names {
        reply.bulk(name.as_bytes());
    }
}

fn acl_users(session: &Session, reply: &mut Reply<'_>) {
    let names: Vec<String> = match session.seldom.acl.access.security() {
        Some(security) => security.read(|tables| tables.users.keys().cloned().collect()),
        None => vec![DEFAULT_USER.to_owned()],
    };
    reply.array(names.len());
    for name in names {
        reply.bulk(name.as_bytes());
    }
}

fn acl_list(session: &Session, reply: &mut Reply<'_>) {
    let lines: Vec<String> = match session.seldom.acl.access.security() {
        Some(security) => security.read(|tables| {
            tables
                .users
                .iter()
                .map(|(name, user)| format!("user {name} on ~* &* {}", command_rules(&user.roles)))
                .collect()
        }),
        None => vec![format!("user {DEFAULT_USER} on nopass ~* &* +@all")],
    };
    reply.array(lines.len());
    for line in lines {
        reply.bulk(line.as_bytes());
    }
}

/// A user's roles as Redis command rules: `+@all` for every privilege, else the categories
/// the predefined roles map to, and the other roles by name in a comment-like `+@role:`.
fn command_rules(roles: &std::collections::BTreeSet<String>) -> String {
    if ALL_ROLES.iter().all(|role| roles.contains(*role)) {
        return "+@all".to_owned();
    }
    let mut rules = vec!["-@all".to_owned()];
    for role in roles {
        match CATEGORY_ROLES.iter().find(|(_, mapped)| mapped == role) {
            Some((category, _)) => rules.push(format!("+@{category}")),
            None => rules.push(format!("+@role:{role}")),
        }
    }
    rules.join(" ")
}

/// Redis categories and the predefined role each maps to.
const CATEGORY_ROLES: &[(&str, &str)] = &[
    ("read", "read"),
    ("write", "write"),
    ("scripting", "read-write-udf"),
    ("admin", "sys-admin"),
    ("dangerous", "sys-admin"),
];

/// The roles `+@all` grants.
const ALL_ROLES: &[&str] = &["read-write-udf", "sys-admin", "user-admin"];

fn acl_getuser(session: &Session, name: &[u8], reply: &mut Reply<'_>) {
    let Some(security) = session.seldom.acl.access.security() else {
        if name == DEFAULT_USER.as_bytes() {
            write_user(reply, "+@all");
        } else {
            reply.null();
        }
        return;
    };
    let name = String::from_utf8_lossy(name);
    match security.read(|tables| {
        tables
            .users
            .get(name.as_ref())
            .map(|user| command_rules(&user.roles))
    }) {
        Some(rules) => write_user(reply, &rules),
        None => reply.null(),
    }
}

/// ACL GETUSER's map (passwords are not shown: Osprey keeps no SHA-256 of them).
fn write_user(reply: &mut Reply<'_>, rules: &str) {
    reply.map(6);
    reply.bulk(b"flags");
    reply.array(1);
    reply.bulk(b"on");
    reply.bulk(b"passwords");
    reply.array(0);
    reply.bulk(b"commands");
    reply.bulk(rules.as_bytes());
    reply.bulk(b"keys");
    reply.bulk(b"~*");
    reply.bulk(b"channels");
    reply.bulk(b"&*");
    reply.bulk(b"selectors");
    reply.array(0);
}

/// What ACL SETUSER's rules ask for.
#[derive(Debug, Default)]
struct UserRules {
    password: Option<Vec<u8>>,
    grant: Vec<String>,
    revoke: Vec<String>,
    /// `-@all` or `reset`: every role taken first.
    clear: bool,
}

fn parse_rules(args: &Args) -> Result<UserRules, String> {
    let mut rules = UserRules::default();
    for position in 3..args.len() {
        let rule = args.get(position);
        let lower = rule.to_ascii_lowercase();
        match lower.as_slice() {
            b"on" | b"~*" | b"allkeys" | b"%rw~*" | b"&*" | b"allchannels" => {}
            b"+@all" | b"allcommands" => rules
                .grant
                .extend(ALL_ROLES.iter().map(|role| (*role).to_owned())),
            b"-@all" | b"nocommands" | b"reset" => {
                rules.clear = true;
                rules.grant.clear();
            }
            _ if rule.first() == Some(&b'>') => rules.password = Some(rule[1..].to_vec()),
            _ => match category_role(&lower) {
                Some((true, role)) => rules.grant.push(role.to_owned()),
                Some((false, role)) => rules.revoke.push(role.to_owned()),
                None => {
                    return Err(format!(
                        "ERR Error in ACL SETUSER modifier '{}': Osprey maps ACL rules onto \
                         roles: on, >password, ~*, &*, +@all, -@all, and +@ or -@ read, write, \
                         scripting, admin (see docs/compatibility.md)",
                        String::from_utf8_lossy(rule)
                    ));
                }
            },
        }
    }
    Ok(rules)
}

/// `+@read` to (true, "read"), `-@write` to (false, "write"), ...
fn category_role(rule: &[u8]) -> Option<(bool, &'static str)> {
    let (grant, category) = match rule {
        [b'+', b'@', category @ ..] => (true, category),
        [b'-', b'@', category @ ..] => (false, category),
        _ => return None,
    };
    CATEGORY_ROLES
        .iter()
        .find(|(name, _)| name.as_bytes() == category)
        .map(|(_, role)| (grant, *role))
}

fn acl_setuser(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Some(security) = session.seldom.acl.access.security().cloned() else {
        reply.error("ERR security is off: enable [security] in the configuration to manage users");
        return After::Continue;
    };
    let rules = match parse_rules(args) {
        Ok(rules) => rules,
        Err(message) => {
            reply.error(&message);
            return After::Continue;
        }
    };
    if rules.password.is_some() && session.may_offload {
        // The credential is a bcrypt: computed on the pool, not on the worker.
        return After::Offload;
    }
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    let credential = rules.password.as_deref().map(security::credential_of);
    let changed = security.change(|tables| {
        if !tables.users.contains_key(&name) {
            let credential = credential
                .as_deref()
                .ok_or(SecurityError::InvalidPassword)?;
            tables.create_user(&name, credential.as_bytes(), &[])?;
        } else if let Some(credential) = &credential {
            tables.set_password(&name, credential.as_bytes())?;
        }
        if rules.clear {
            let held: Vec<String> = tables.users[&name].roles.iter().cloned().collect();
            if !held.is_empty() {
                tables.revoke_roles(&name, &held)?;
            }
        }
        if !rules.revoke.is_empty() {
            tables.revoke_roles(&name, &rules.revoke)?;
        }
        if !rules.grant.is_empty() {
            tables.grant_roles(&name, &rules.grant)?;
        }
        Ok(())
    });
    match changed {
        Ok(()) => {
            session.seldom.acl.access.audit_change("setuser", &name);
            reply.ok();
        }
        Err(SecurityError::InvalidPassword) => {
            reply.error("ERR Osprey needs a password to create a user: add >password");
        }
        Err(error) => reply.error(&format!("ERR {error}")),
    }
    After::Continue
}

fn acl_deluser(session: &mut Session, args: &Args, reply: &mut Reply<'_>) {
    let Some(security) = session.seldom.acl.access.security().cloned() else {
        reply.error("ERR The 'default' user cannot be removed");
        return;
    };
    let mut deleted = 0;
    for position in 2..args.len() {
        let name = String::from_utf8_lossy(args.get(position)).into_owned();
        if security.change(|tables| tables.drop_user(&name)).is_ok() {
            session.seldom.acl.access.audit_change("deluser", &name);
            deleted += 1;
        }
    }
    reply.integer(deleted);
}

fn acl_dryrun(session: &Session, args: &Args, reply: &mut Reply<'_>) {
    let user = String::from_utf8_lossy(args.get(2)).into_owned();
    let command: Args = (3..args.len()).map(|position| args.get(position)).collect();
    let Some(security) = session.seldom.acl.access.security() else {
        reply.ok();
        return;
    };
    let Some(grants) = security.grants(&user, std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    else {
        reply.error(&format!("ERR User '{user}' not found"));
        return;
    };
    let namespace = session.state.config.resp_namespace();
    let set = session.state.resp_databases.set_name(session.database);
    let allowed = match command_need(&command) {
        Need::Login => true,
        Need::Data(action) => grants.allows(action, namespace.as_bytes(), set.as_bytes()),
        Need::Global(action) => grants.allows(action, b"", b""),
    };
    if allowed {
        reply.ok();
    } else {
        reply.bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                shown_command(&command)
            )
            .as_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(words: &[&str]) -> Need {
        command_need(&words.iter().collect::<Args>())
    }

    #[test]
    fn commands_need_what_their_redis_categories_map_to() {
        assert_eq!(need(&["GET", "k"]), Need::Data(Action::Read));
        assert_eq!(need(&["set", "k", "v"]), Need::Data(Action::Write));
        assert_eq!(need(&["INCR", "k"]), Need::Data(Action::Write));
        assert_eq!(need(&["EVALSHA", "x", "0"]), Need::Data(Action::Udf));
        assert_eq!(
            need(&["FUNCTION", "LOAD", "x"]),
            Need::Global(Action::UdfAdmin)
        );
        assert_eq!(need(&["FUNCTION", "LIST"]), Need::Data(Action::Udf));
        assert_eq!(need(&["FLUSHDB"]), Need::Data(Action::Truncate));
        assert_eq!(need(&["flushall"]), Need::Global(Action::Truncate));
        assert_eq!(
            need(&["CONFIG", "GET", "x"]),
            Need::Global(Action::SysAdmin)
        );
        assert_eq!(
            need(&["CLIENT", "KILL", "x"]),
            Need::Global(Action::SysAdmin)
        );
        assert_eq!(need(&["CLIENT", "SETNAME", "x"]), Need::Login);
        assert_eq!(
            need(&["ACL", "SETUSER", "x"]),
            Need::Global(Action::UserAdmin)
        );
        assert_eq!(need(&["ACL", "WHOAMI"]), Need::Login);
        assert_eq!(need(&["PUBLISH", "c", "m"]), Need::Data(Action::Write));
        assert_eq!(need(&["SUBSCRIBE", "c"]), Need::Data(Action::Read));
        assert_eq!(need(&["PING"]), Need::Login);
        // Before the arity check: a container command without its subcommand.
        assert_eq!(need(&["CLIENT"]), Need::Login);
        assert_eq!(need(&["acl"]), Need::Global(Action::UserAdmin));
    }

    #[test]
    fn the_last_need_is_remembered_by_name_but_not_where_the_subcommand_decides() {
        let args = |words: &[&str]| words.iter().collect::<Args>();
        let mut last = LastNeed::default();
        assert_eq!(last.of(&args(&["GET", "k"])), Need::Data(Action::Read));
        assert_eq!(last.of(&args(&["GET", "j"])), Need::Data(Action::Read));
        assert_eq!(
            last.of(&args(&["SET", "k", "v"])),
            Need::Data(Action::Write)
        );
        assert_eq!(last.of(&args(&["CLIENT", "SETNAME", "x"])), Need::Login);
        assert_eq!(
            last.of(&args(&["CLIENT", "KILL", "x"])),
            Need::Global(Action::SysAdmin)
        );
        assert_eq!(last.of(&args(&["CLIENT", "ID"])), Need::Login);
        assert_eq!(
            last.of(&args(&["averyveryverylongcommandname"])),
            Need::Data(Action::Read)
        );
        assert_eq!(last.of(&args(&["GET", "k"])), Need::Data(Action::Read));
        let db0 = super::super::databases::Database(0);
        assert!(!last.allowed_again(db0, Some(1)));
        last.allowed(db0, Some(1));
        assert!(
            last.of(&args(&["GET", "k"])) == Need::Data(Action::Read)
                && last.allowed_again(db0, Some(1))
        );
        assert!(!last.allowed_again(db0, Some(2)), "the tables changed");
        assert!(
            !last.allowed_again(super::super::databases::Database(1), Some(1)),
            "another database"
        );
        last.of(&args(&["SET", "k", "v"]));
        assert!(!last.allowed_again(db0, Some(1)), "another command");
        last.allowed(db0, Some(1));
        last.forget();
        assert!(!last.allowed_again(db0, Some(1)), "a new login");
    }

    #[test]
    fn setuser_rules_map_onto_roles_and_the_rest_is_refused() {
        let words = |rules: &[&str]| {
            let mut words: Vec<&[u8]> = vec![b"ACL", b"SETUSER", b"alice"];
            words.extend(rules.iter().map(|rule| rule.as_bytes()));
            parse_rules(&words.iter().collect::<Args>())
        };
        let rules = words(&["on", ">secret", "~*", "&*", "+@read", "-@write"]).expect("parses");
        assert_eq!(rules.password.as_deref(), Some(&b"secret"[..]));
        assert_eq!(rules.grant, ["read"]);
        assert_eq!(rules.revoke, ["write"]);
        let all = words(&["+@all"]).expect("parses");
        assert_eq!(all.grant, ALL_ROLES);
        for refused in ["+get", "~cache:*", "off", "nopass", "+@hash"] {
            assert!(words(&[refused]).is_err(), "{refused}");
        }
        assert_eq!(
            command_rules(&["read".to_owned(), "custom".to_owned()].into()),
            "-@all +@role:custom +@read"
        );
        let everything: std::collections::BTreeSet<String> =
            ALL_ROLES.iter().map(|role| (*role).to_owned()).collect();
        assert_eq!(command_rules(&everything), "+@all");
    }
}
