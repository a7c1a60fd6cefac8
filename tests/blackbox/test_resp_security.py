"""Access control on the Redis port, over the same users and roles as the Aerospike port: AUTH
and HELLO's AUTH, NOAUTH before a login, each command checked against its user's roles (in
both directions), the ACL commands, and a user made on one protocol logging in on the other."""

import socket
import subprocess

import aerospike
import pytest
import redis

import harness

SECURITY = {"security": {"enabled": True}}


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    srv = harness.start_server(service={"work-directory": str(tmp_path_factory.mktemp("work"))},
                               sections=SECURITY, tag="osprey-resp-security")
    yield srv
    srv.close_clients()
    srv.stop()


def login(srv, user, password, protocol=2):
    return srv.redis(protocol=protocol, username=user, password=password)


@pytest.fixture(scope="module")
def admin(secure):
    """The default admin, given every data role too."""
    client = login(secure, "admin", "admin")
    assert client.execute_command("ACL", "SETUSER", "admin", "+@all") == b"OK"
    return client


def error_of(call):
    """The error text `call` got (redis-py raises NOAUTH and AUTH's errors as
    AuthenticationError), or None."""
    try:
        call()
    except (redis.ResponseError, redis.AuthenticationError) as error:
        return str(error)
    return None


def command(sock, *words):
    """Sends one command; returns the first line of its reply (raw bytes: redis-py would send
    CLIENT SETINFO first, which a server that wants a login refuses too)."""
    sock.sendall(b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in
                                                       (word.encode() for word in words)))
    reply = b""
    while not reply.endswith(b"\r\n"):
        reply += sock.recv(4096)
    return reply.split(b"\r\n")[0] if not reply.startswith(b"$") else reply.split(b"\r\n")[1]


def test_before_a_login_every_command_but_auth_and_hello_is_refused(secure):
    with socket.create_connection((secure.host, secure.resp_port), timeout=5) as sock:
        assert command(sock, "GET", "k") == b"-NOAUTH Authentication required."
        assert command(sock, "NOSUCHCOMMAND") == b"-NOAUTH Authentication required."
        assert command(sock, "CLIENT") == b"-NOAUTH Authentication required."
        wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled."
        assert command(sock, "AUTH", "admin", "wrong") == wrongpass
        assert command(sock, "AUTH", "admin") == wrongpass, "the password alone logs in as `default`"
        assert command(sock, "HELLO", "3").startswith(
            b"-NOAUTH HELLO must be called with the client already authenticated")
        assert command(sock, "AUTH", "admin", "admin") == b"+OK"
        assert command(sock, "ACL", "WHOAMI") == b"admin"
        assert command(sock, "CLIENT") == b"-ERR wrong number of arguments for 'client' command"
        assert command(sock, "RESET") == b"+RESET"
        assert command(sock, "ACL", "WHOAMI") == b"-NOAUTH Authentication required."


def test_hello_logs_in_and_redis_cli_too(secure):
    resp3 = login(secure, "admin", "admin", protocol=3)
    assert resp3.execute_command("ACL", "WHOAMI") in (b"admin", "admin")
    done = subprocess.run(["redis-cli", "-p", str(secure.resp_port), "--user", "admin", "--pass", "admin",
                           "--no-auth-warning", "ACL", "WHOAMI"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "admin"


REDIS_COMMANDS = {
    "GET": ("GET", "k"),
    "SET": ("SET", "k", "v"),
    "DEL": ("DEL", "gone"),
    "KEYS": ("KEYS", "nothing-*"),
    "PUBLISH": ("PUBLISH", "channel", "m"),
    "EVAL": ("EVAL", "return 1", "0"),
    "FUNCTION LOAD": ("FUNCTION", "LOAD", "REPLACE", "#!lua name=acltest\nredis.register_function('f', function() return 1 end)"),
    "FLUSHDB": ("FLUSHDB",),
    "CONFIG GET": ("CONFIG", "GET", "maxmemory"),
    "ACL SETUSER": ("ACL", "SETUSER", "made-by-matrix", ">pw", "+@read"),
    "PING": ("PING",),
}
REDIS_ALLOWED = {
    "read": {"GET", "KEYS", "PING"},
    "write": {"SET", "DEL", "PUBLISH", "PING"},
    "read-write": {"GET", "SET", "DEL", "KEYS", "PUBLISH", "PING"},
    "read-write-udf": {"GET", "SET", "DEL", "KEYS", "PUBLISH", "EVAL", "PING"},
    "truncate": {"FLUSHDB", "PING"},
    "udf-admin": {"FUNCTION LOAD", "PING"},
    "sys-admin": {"CONFIG GET", "FLUSHDB", "FUNCTION LOAD", "PING"},
    "user-admin": {"ACL SETUSER", "PING"},
}


@pytest.mark.parametrize("role", sorted(REDIS_ALLOWED))
def test_each_role_allows_exactly_its_redis_commands(secure, admin, role):
    aerospike_admin = aerospike.client(harness.client_config(secure.port, user="admin", password="admin")).connect()
    secure.clients.append(aerospike_admin)
    user = f"redis-{role}"
    if user not in aerospike_admin.admin_query_users_info():
        aerospike_admin.admin_create_user(user, "pw", [role])
    client = login(secure, user, "pw")
    errors = {name: error_of(lambda: client.execute_command(*command)) for name, command in REDIS_COMMANDS.items()}
    allowed = {name for name, error in errors.items() if not (error or "").startswith("User ")}
    assert allowed == REDIS_ALLOWED[role], errors
    refused = errors["SET"] if "SET" not in allowed else errors["CONFIG GET"]
    assert refused.startswith(f"User {user} has no permissions to run the '"), refused


def test_a_privilege_scoped_to_a_database_holds_there_only(secure, admin):
    admin.set("scoped-key", "v")
    aerospike_admin = aerospike.client(harness.client_config(secure.port, user="admin", password="admin")).connect()
    secure.clients.append(aerospike_admin)
    aerospike_admin.admin_create_role("db0-reader", [{"code": aerospike.PRIV_READ, "ns": "test", "set": "redis"}])
    aerospike_admin.admin_create_user("db0", "pw", ["db0-reader"])
    client = login(secure, "db0", "pw")
    assert client.get("scoped-key") == b"v"
    client.execute_command("SELECT", "1")
    assert error_of(lambda: client.execute_command("GET", "scoped-key")).startswith("User db0 has no permissions")


def test_acl_setuser_makes_a_user_the_aerospike_client_logs_in_as_and_the_other_way(secure, admin):
    assert admin.execute_command("ACL", "SETUSER", "both-ways", "on", ">pw1", "~*", "&*", "+@read", "+@write") == b"OK"
    assert admin.execute_command("ACL", "GETUSER", "both-ways")[5] == b"-@all +@read +@write"
    writer = login(secure, "both-ways", "pw1")
    writer.set("both", "1")
    client = aerospike.client(harness.client_config(secure.port, user="both-ways", password="pw1")).connect()
    secure.clients.append(client)
    assert client.get(("test", "redis", "both"))[2] is not None
    client.admin_change_password("both-ways", "pw2")
    with pytest.raises(redis.AuthenticationError):
        login(secure, "both-ways", "pw1").ping()
    assert login(secure, "both-ways", "pw2").get("both") == b"1"
    assert admin.execute_command("ACL", "SETUSER", "both-ways", "-@write") == b"OK"
    assert error_of(lambda: writer.set("both", "2")).startswith("User both-ways has no permissions")
    assert admin.execute_command("ACL", "DRYRUN", "both-ways", "GET", "x") == b"OK"
    assert b"no permissions to run the 'set' command" in admin.execute_command("ACL", "DRYRUN", "both-ways", "SET", "x", "y")
    assert b"both-ways" in admin.execute_command("ACL", "USERS")
    assert b"user both-ways on ~* &* -@all +@read" in admin.execute_command("ACL", "LIST")
    assert admin.execute_command("ACL", "DELUSER", "both-ways", "never-was") == 1
    assert error_of(lambda: writer.get("both")) == "Authentication required."


def test_acl_refuses_what_has_no_counterpart_and_lists_categories(secure, admin):
    for rule in ("+get", "~cache:*", "off", "nopass", "+@hash"):
        error = error_of(lambda: admin.execute_command("ACL", "SETUSER", "no-counterpart", ">pw", rule))
        assert error.startswith(f"Error in ACL SETUSER modifier '{rule}'"), error
    assert "needs a password" in error_of(lambda: admin.execute_command("ACL", "SETUSER", "no-password", "+@read"))
    categories = admin.execute_command("ACL", "CAT")
    assert b"read" in categories and b"scripting" in categories
    reads = admin.execute_command("ACL", "CAT", "read")
    assert b"get" in reads and b"set" not in reads
    assert error_of(lambda: admin.execute_command("ACL", "CAT", "nope")) == "Unknown category 'nope'"


def test_with_security_off_auth_answers_as_redis_without_a_password(r):
    assert "without any password configured" in error_of(lambda: r.execute_command("AUTH", "pw"))
    assert r.execute_command("AUTH", "default", "anything") in (True, b"OK", "OK")
    with pytest.raises(redis.AuthenticationError):
        r.execute_command("AUTH", "someone", "pw")
    whoami = r.execute_command("ACL", "WHOAMI")
    assert whoami in (b"default", "default")


def test_acl_log_keeps_refused_commands_and_logins(secure, admin):
    assert admin.execute_command("ACL", "LOG", "RESET") in (True, b"OK", "OK")
    admin.execute_command("ACL", "SETUSER", "logged", "on", ">pw", "+@read")
    logged = login(secure, "logged", "pw")
    for _ in range(3):
        error_of(lambda: logged.set("k", "v"))
    with socket.create_connection((secure.host, secure.resp_port), timeout=5) as sock:
        assert command(sock, "AUTH", "logged", "wrong").startswith(b"-WRONGPASS")
    entries = admin.execute_command("ACL", "LOG")
    def as_dict(entry):
        if isinstance(entry, dict):
            return {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}
        return {entry[i].decode(): entry[i + 1] for i in range(0, len(entry), 2)}
    entries = [as_dict(entry) for entry in entries]
    assert entries[0]["reason"] == b"auth" and entries[0]["object"] == b"AUTH"
    assert entries[0]["username"] == b"logged"
    refused = entries[1]
    assert (refused["reason"], refused["object"], refused["username"], refused["count"]) == (
        b"command", b"set", b"logged", 3)
    assert refused["context"] == b"toplevel"
    assert b"id=" in refused["client-info"]
    assert len(admin.execute_command("ACL", "LOG", "1")) == 1
    assert "must be positive" in error_of(lambda: admin.execute_command("ACL", "LOG", "-1"))
    admin.execute_command("ACL", "LOG", "RESET")
    assert admin.execute_command("ACL", "LOG") == []
