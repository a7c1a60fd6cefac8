"""Access control on the Aerospike protocol: logins, users and roles through the official
client's admin API, each privilege checked against every command family in both directions,
and hostile security messages in raw bytes."""

import json
import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import aerospike
import pytest
import redis
from aerospike import exception as ex
from aerospike import predicates as p
from aerospike_helpers.operations import operations

import aswire
import harness

SECURITY = {"security": {"enabled": True}}
ROLE_VIOLATION = 81
NOT_AUTHENTICATED = 80
BATCH_FAILED = -16

# Security frames (proto type 2): commands and field ids, from the protocol.
TYPE_SECURITY = 2
LOGIN, AUTHENTICATE, CREATE_USER = 20, 0, 1
USER, CREDENTIAL, SESSION_TOKEN, SESSION_TTL = 0, 3, 5, 6
# The credential of "admin": bcrypt with the protocol's fixed salt, as clients send it.
ADMIN_CREDENTIAL = b"$2a$10$7EqJtq98hPqEX7fNZaFWoO1mVO/4MLpGzsqojz6E9Gef6iXDjXdDa"

UDF_SOURCE = """
function touch(rec)
  rec['u'] = 1
  aerospike:update(rec)
  return 1
end
"""


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory):
    work = tmp_path_factory.mktemp("security-work")
    srv = harness.start_server(service={"work-directory": str(work)}, sections=SECURITY,
                               tag="osprey-security")
    yield srv
    srv.close_clients()
    srv.stop()


def connect(srv, user, password, **extra):
    client = aerospike.client(harness.client_config(srv.port, user=user, password=password, **extra))
    client.connect()
    srv.clients.append(client)
    return client


@pytest.fixture(scope="module")
def udf_module(tmp_path_factory):
    """The path of a UDF module's source."""
    module = tmp_path_factory.mktemp("lua") / "sec_udf.lua"
    module.write_text(UDF_SOURCE)
    (harness.LUA_USER_PATH / "sec_udf.lua").write_text(UDF_SOURCE)
    return str(module)


@pytest.fixture(scope="module")
def root(secure_server, udf_module):
    """The default admin, given every role, with the UDF module and an index registered."""
    admin = connect(secure_server, "admin", "admin")
    admin.admin_grant_roles("admin", ["sys-admin", "read-write-udf"])
    admin.udf_put(udf_module)
    admin.index_single_value_create("test", "matrix", "n", aerospike.INDEX_NUMERIC, "idx_matrix_n")
    for index in range(3):
        admin.put(("test", "matrix", index), {"n": 1})
    return admin


def code_of(call):
    """The result code `call` raised, or for a batch the batch's code or else its first
    failed row's; None when it succeeded."""
    try:
        outcome = call()
    except ex.AerospikeError as error:
        return error.code
    if hasattr(outcome, "batch_records"):
        # The client's own -16 says only that some row failed.
        if outcome.result not in (0, BATCH_FAILED):
            return outcome.result
        return next((row.result for row in outcome.batch_records if row.result != 0), None)
    return None


# -- without a login --------------------------------------------------------------------------


def test_before_a_login_data_gets_not_authenticated_and_info_one_line(secure_server):
    with secure_server.raw() as sock:
        sock.sendall(aswire.info_frame(["build", "namespaces"]))
        _, ptype, body = aswire.recv_frame(sock)
        assert ptype == aswire.TYPE_INFO
        assert body == b"ERROR:80:not authenticated\n"
        digest = bytes(20)
        reply = aswire.request_msg(sock, aswire.as_msg(aswire.record_fields("test", "s", digest),
                                                        [aswire.read_bin("a")], info1=1))
        assert reply.result_code == NOT_AUTHENTICATED
    with pytest.raises(ex.AerospikeError) as raised:
        aerospike.client(harness.client_config(secure_server.port)).connect()
    assert raised.value.code == NOT_AUTHENTICATED


def test_the_default_admin_may_manage_users_and_nothing_else(secure_server):
    admin = connect(secure_server, "admin", "admin")
    assert admin.admin_query_user_info("admin")["roles"][:1] == ["user-admin"]
    # The `root` fixture grants the admin more roles; a user of its own shows what the
    # default's user-admin alone allows.
    admin.admin_create_user("user-admin-only", "pw", ["user-admin"])
    user_admin = connect(secure_server, "user-admin-only", "pw")
    assert code_of(lambda: user_admin.get(("test", "s", 1))) == ROLE_VIOLATION
    assert code_of(lambda: user_admin.put(("test", "s", 1), {"a": 1})) == ROLE_VIOLATION
    assert code_of(lambda: user_admin.admin_create_user("made-by-user-admin", "pw", ["read"])) is None


# -- every privilege against every command family ---------------------------------------------


def operations_under_test(udf_module):
    """Each command family, as a call on a client; none of them harms the others."""
    key = ("test", "matrix", 0)
    return {
        "get": lambda c: c.get(key),
        "put": lambda c: c.put(("test", "matrix", 10), {"n": 2}),
        "delete": lambda c: c.remove(("test", "matrix", 11)),
        "operate read and write": lambda c: c.operate(key, [operations.increment("w", 1),
                                                             operations.read("n")]),
        "batch read": lambda c: c.batch_read([key, ("test", "matrix", 1)]),
        "batch write": lambda c: c.batch_operate([("test", "matrix", 12)], [operations.write("m", 1)]),
        "scan": lambda c: c.scan("test", "matrix").results(),
        "query": lambda c: query_where(c).results(),
        "udf apply": lambda c: c.apply(key, "sec_udf", "touch", []),
        "background udf": lambda c: background(c, lambda q: q.apply("sec_udf", "touch")),
        "background ops": lambda c: background(c, lambda q: q.add_ops([operations.write("o", 1)])),
        "truncate": lambda c: c.truncate("test", "scratch", 0),
        "sindex create": lambda c: c.index_single_value_create("test", "matrix", "x",
                                                                aerospike.INDEX_NUMERIC, "idx_matrix_x"),
        "udf register": lambda c: c.udf_put(udf_module),
        "set-config": lambda c: c.info_all("set-config:context=service;single-scan-threads=4"),
        "create user": lambda c: c.admin_create_user("made-in-matrix", "pw", ["read"]),
    }


def query_where(client):
    query = client.query("test", "matrix")
    query.where(p.equals("n", 1))
    return query


def background(client, prepare):
    query = query_where(client)
    prepare(query)
    return query.execute_background()


READ = {"get", "batch read", "scan", "query"}
WRITE = {"put", "delete", "batch write"}
READ_WRITE = READ | WRITE | {"operate read and write", "background ops"}
ADMIN = {"truncate", "sindex create", "udf register"}
ALLOWED = {
    "read": READ,
    "write": WRITE,
    "read-write": READ_WRITE,
    "read-write-udf": READ_WRITE | {"udf apply", "background udf"},
    "truncate": {"truncate"},
    "sindex-admin": {"sindex create"},
    "udf-admin": {"udf register"},
    "data-admin": ADMIN,
    "sys-admin": ADMIN | {"set-config"},
    "user-admin": {"create user"},
}


@pytest.mark.parametrize("role", sorted(ALLOWED))
def test_each_privilege_allows_exactly_its_commands(secure_server, root, udf_module, role):
    user = f"matrix-{role}"
    root.admin_create_user(user, "pw", [role])
    client = connect(secure_server, user, "pw")
    outcomes = {name: code_of(lambda: run(client)) for name, run in operations_under_test(udf_module).items()}
    allowed = {name for name, code in outcomes.items() if code != ROLE_VIOLATION}
    assert allowed == ALLOWED[role], f"codes: {outcomes}"


# -- scopes, revocation, sessions -------------------------------------------------------------


def test_a_scoped_privilege_holds_within_its_namespace_and_set_and_a_batch_is_refused_whole(
        secure_server, root):
    root.admin_create_role("demo-reader", [{"code": aerospike.PRIV_READ, "ns": "test", "set": "demo"}])
    root.admin_create_user("scoped", "pw", ["demo-reader"])
    root.put(("test", "demo", 1), {"a": 1})
    root.put(("test", "other", 1), {"a": 1})
    scoped = connect(secure_server, "scoped", "pw")
    assert scoped.get(("test", "demo", 1))[2] == {"a": 1}
    assert code_of(lambda: scoped.get(("test", "other", 1))) == ROLE_VIOLATION
    assert code_of(lambda: scoped.put(("test", "demo", 1), {"a": 2})) == ROLE_VIOLATION
    assert code_of(lambda: scoped.batch_read([("test", "demo", 1), ("test", "other", 1)])) == ROLE_VIOLATION
    assert code_of(lambda: scoped.batch_read([("test", "demo", 1)])) is None
    assert root.admin_get_role("demo-reader")["privileges"] == [{"ns": "test", "set": "demo", "code": 10}]


def test_a_revoked_role_takes_effect_on_open_connections(secure_server, root):
    root.admin_create_user("revoked", "pw", ["read-write"])
    client = connect(secure_server, "revoked", "pw")
    client.put(("test", "s", "revoked"), {"a": 1})
    root.admin_revoke_roles("revoked", ["read-write"])
    assert code_of(lambda: client.get(("test", "s", "revoked"))) == ROLE_VIOLATION
    root.admin_grant_roles("revoked", ["read"])
    assert client.get(("test", "s", "revoked"))[2] == {"a": 1}


def test_a_dropped_user_is_logged_out_and_a_new_password_ends_the_old_one(secure_server, root):
    root.admin_create_user("dropped", "pw", ["read"])
    dropped = connect(secure_server, "dropped", "pw")
    root.admin_drop_user("dropped")
    # The client takes NOT_AUTHENTICATED as a cue to authenticate again, which its token no
    # longer can: INVALID_USER.
    assert code_of(lambda: dropped.get(("test", "s", 1))) in (NOT_AUTHENTICATED, 60)
    root.admin_create_user("renewed", "old-pw", ["read"])
    connect(secure_server, "renewed", "old-pw")
    root.admin_set_password("renewed", "new-pw")
    with pytest.raises(ex.AerospikeError):
        connect(secure_server, "renewed", "old-pw")
    renewed = connect(secure_server, "renewed", "new-pw")
    renewed.admin_change_password("renewed", "newer-pw")
    connect(secure_server, "renewed", "newer-pw")


def test_admin_commands_answer_aerospikes_result_codes(secure_server, root):
    root.admin_create_user("codes", "pw", ["read"])
    cases = [
        (lambda: root.admin_create_user("codes", "pw", ["read"]), 61),
        (lambda: root.admin_drop_user("no-such-user"), 60),
        (lambda: root.admin_query_user_info("no-such-user"), 60),
        (lambda: root.admin_grant_roles("codes", ["no-such-role"]), 70),
        (lambda: root.admin_get_role("no-such-role"), 70),
        (lambda: root.admin_drop_role("read"), 70),
        (lambda: root.admin_create_role("read", [{"code": aerospike.PRIV_READ}]), 71),
        (lambda: root.admin_create_role("bad-code", [{"code": 64}]), 72),
        (lambda: root.admin_create_role("bad-list", [{"code": aerospike.PRIV_READ}],
                                        whitelist=["not-an-address"]), 73),
        (lambda: root.admin_grant_privileges("codes-missing-role", [{"code": aerospike.PRIV_READ}]), 70),
    ]
    for call, expected in cases:
        assert code_of(call) == expected
    reader = connect(secure_server, "codes", "pw")
    assert code_of(lambda: reader.admin_create_user("by-reader", "pw", ["read"])) == ROLE_VIOLATION
    info = root.admin_query_user_info("codes")
    assert info["roles"] == ["read"]
    roles = root.admin_get_roles()
    assert roles["read-write"]["privileges"] == [{"ns": "", "set": "", "code": aerospike.PRIV_READ_WRITE}]


def test_an_allow_list_limits_where_a_role_applies(secure_server, root):
    root.admin_create_role("far-away", [{"code": aerospike.PRIV_READ}], whitelist=["10.0.0.0/8"])
    root.admin_create_user("far", "pw", ["far-away"])
    with pytest.raises(ex.AerospikeError) as raised:
        connect(secure_server, "far", "pw")
    assert raised.value.code == 82
    root.admin_set_whitelist("far-away", ["10.0.0.0/8", "127.0.0.1"])
    assert root.admin_get_role("far-away")["whitelist"] == ["10.0.0.0/8", "127.0.0.1"]
    connect(secure_server, "far", "pw")


def test_users_and_roles_survive_a_restart(tmp_path):
    srv = harness.start_server(service={"work-directory": str(tmp_path)}, sections=SECURITY,
                               tag="osprey-security-restart")
    try:
        admin = connect(srv, "admin", "admin")
        admin.admin_create_role("kept-role", [{"code": aerospike.PRIV_READ_WRITE, "ns": "test"}])
        admin.admin_create_user("kept", "pw", ["kept-role"])
        admin.admin_set_password("admin", "changed")
        srv.restart()
        kept = connect(srv, "kept", "pw")
        kept.put(("test", "s", "kept"), {"a": 1})
        with pytest.raises(ex.AerospikeError):
            connect(srv, "admin", "admin")
        connect(srv, "admin", "changed")
        assert (tmp_path / "security.json").stat().st_mode & 0o777 == 0o600
        assert b"changed" not in (tmp_path / "security.json").read_bytes()
    finally:
        srv.close_clients()
        srv.stop()


def test_with_security_off_a_login_is_answered_not_enabled_and_clients_with_users_connect(server):
    with server.raw() as sock:
        sock.sendall(security_frame(LOGIN, [(USER, b"admin"), (CREDENTIAL, ADMIN_CREDENTIAL)]))
        assert security_result(sock) == (52, b"")
    client = aerospike.client(harness.client_config(server.port, user="someone", password="pw")).connect()
    client.put(("test", "s", "no-security"), {"a": 1})
    client.close()


def test_the_official_go_client_logs_in_and_administers_users_and_roles(tmp_path):
    """tests/go/cluster_client `security` (built by `cargo xtask blackbox`): the Go client v8
    logs in as the default admin, creates a role with one scoped privilege and an allow-list
    (a message whose field count that client undercounts) and a user, queries both back; the
    user reads within its scope, is refused a write and a read elsewhere (ROLE_VIOLATION),
    changes its own password, and only the new one logs in."""
    binary = os.environ.get("OSPREY_GO_CLUSTER_CLIENT", "target/go/cluster_client")
    assert Path(binary).exists(), f"{binary} is missing: run `cargo xtask blackbox`, which builds it"
    srv = harness.start_server(service={"work-directory": str(tmp_path)}, sections=SECURITY,
                               tag="osprey-security-go")
    try:
        run = subprocess.run([binary, "security", str(srv.port)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "security ok" in run.stdout
    finally:
        srv.stop()


# -- raw bytes: tokens and hostile messages ----------------------------------------------------


def security_frame(command, fields, n_fields=None):
    header = bytes([0, 0, command, len(fields) if n_fields is None else n_fields]) + bytes(12)
    body = header + b"".join(struct.pack(">IB", len(data) + 1, fid) + data for fid, data in fields)
    return aswire.frame(TYPE_SECURITY, body)


def security_result(sock):
    """(result code, the fields' bytes) of one security reply."""
    _, ptype, body = aswire.recv_frame(sock)
    assert ptype == TYPE_SECURITY
    return body[1], body[16:]


def login_token(srv, ttl_s: int = 86400):
    """The admin's session token from a raw LOGIN, whose reply must give `ttl_s`."""
    with srv.raw() as sock:
        sock.sendall(security_frame(LOGIN, [(USER, b"admin"), (CREDENTIAL, ADMIN_CREDENTIAL)]))
        code, fields = security_result(sock)
    assert code == 0
    parsed = {}
    while fields:
        size, fid = struct.unpack(">IB", fields[:5])
        parsed[fid] = fields[5:4 + size]
        fields = fields[4 + size:]
    assert struct.unpack(">I", parsed[SESSION_TTL])[0] == ttl_s
    return parsed[SESSION_TOKEN]


def test_a_token_authenticates_new_connections_and_an_altered_one_does_not(tmp_path):
    srv = harness.start_server(service={"work-directory": str(tmp_path)}, sections=SECURITY,
                               tag="osprey-security-token")
    try:
        token = login_token(srv)
        with srv.raw() as sock:
            sock.sendall(security_frame(AUTHENTICATE, [(USER, b"admin"), (SESSION_TOKEN, token)]))
            assert security_result(sock) == (0, b"")
            sock.sendall(aswire.info_frame(["build"]))
            _, _, body = aswire.recv_frame(sock)
            assert body.startswith(b"build\t")
        altered = bytes([token[0]]) + bytes([token[1] ^ 1]) + token[2:]
        for user, presented in [(b"admin", altered), (b"other", token), (b"admin", token[:10])]:
            with srv.raw() as sock:
                sock.sendall(security_frame(AUTHENTICATE, [(USER, user), (SESSION_TOKEN, presented)]))
                code, _ = security_result(sock)
                assert code in (60, 65), (user, code)
                sock.sendall(aswire.info_frame(["build"]))
                assert aswire.recv_frame(sock)[2] == b"ERROR:80:not authenticated\n"
    finally:
        srv.stop()


def test_a_session_token_expires_after_session_ttl_and_a_new_login_gives_another(tmp_path):
    ttl_s = 2
    srv = harness.start_server(service={"work-directory": str(tmp_path)},
                               sections={"security": {"enabled": True, "session-ttl-s": ttl_s}},
                               tag="osprey-security-expiry")
    try:
        token = login_token(srv, ttl_s)
        authenticate = security_frame(AUTHENTICATE, [(USER, b"admin"), (SESSION_TOKEN, token)])
        with srv.raw() as early:
            early.sendall(authenticate)
            assert security_result(early) == (0, b"")
            time.sleep(ttl_s + 1.2)
            # A connection authenticated before the expiry stays so, as on Aerospike.
            early.sendall(aswire.info_frame(["build"]))
            assert aswire.recv_frame(early)[2].startswith(b"build\t")
        with srv.raw() as late:
            late.sendall(authenticate)
            assert security_result(late)[0] == 66  # EXPIRED_SESSION
        # A login gives a fresh token, which authenticates new connections again.
        fresh = security_frame(AUTHENTICATE, [(USER, b"admin"), (SESSION_TOKEN, login_token(srv, ttl_s))])
        with srv.raw() as again:
            again.sendall(fresh)
            assert security_result(again) == (0, b"")
    finally:
        srv.stop()


def test_malformed_security_messages_get_an_error_and_the_connection_stays_usable(tmp_path):
    # A server of its own: the failed logins of other tests on the module's server, counted
    # per address, would throttle this one's (INVALID_CREDENTIAL where INVALID_USER is due)
    # whenever the suite runs them within a minute of each other.
    srv = harness.start_server(service={"work-directory": str(tmp_path)}, sections=SECURITY,
                               tag="osprey-security-malformed")
    try:
        malformed_security_messages_get_an_error(srv)
    finally:
        srv.stop()


def malformed_security_messages_get_an_error(secure_server):
    header_only = aswire.frame(TYPE_SECURITY, bytes(10))
    past_the_end = aswire.frame(TYPE_SECURITY, bytes([0, 0, LOGIN, 1]) + bytes(12)
                                + struct.pack(">IB", 1000, USER) + b"admin")
    zero_size = aswire.frame(TYPE_SECURITY, bytes([0, 0, LOGIN, 1]) + bytes(12) + struct.pack(">IB", 0, USER))
    huge_size = aswire.frame(TYPE_SECURITY, bytes([0, 0, LOGIN, 1]) + bytes(12)
                             + struct.pack(">IB", 0xFFFFFFFF, USER))
    unknown_command = security_frame(99, [(USER, b"admin")])
    long_name = security_frame(LOGIN, [(USER, b"u" * 100_000), (CREDENTIAL, ADMIN_CREDENTIAL)])
    binary_name = security_frame(LOGIN, [(USER, b"\xff\xfe"), (CREDENTIAL, ADMIN_CREDENTIAL)])
    no_credential = security_frame(LOGIN, [(USER, b"admin")])
    cases = [(header_only, 55), (past_the_end, 55), (zero_size, 55), (huge_size, 55),
             (unknown_command, 54), (long_name, 60), (binary_name, 60), (no_credential, 65)]
    with secure_server.raw() as sock:
        for request, expected in cases:
            sock.sendall(request)
            assert security_result(sock)[0] == expected, request[:40]
        sock.sendall(security_frame(LOGIN, [(USER, b"admin"), (CREDENTIAL, ADMIN_CREDENTIAL)]))
        assert security_result(sock)[0] in (0, 65)


def test_a_password_guessing_loop_is_throttled_and_others_are_served(tmp_path):
    srv = harness.start_server(service={"work-directory": str(tmp_path)}, sections=SECURITY,
                               tag="osprey-security-guess")
    try:
        admin = connect(srv, "admin", "admin")
        admin.admin_grant_roles("admin", ["read-write"])
        admin.put(("test", "s", "served"), {"a": 1})
        wrong = b"$2a$10$7EqJtq98hPqEX7fNZaFWoO" + b"x" * 31
        guesser = socket.create_connection((srv.host, srv.port), timeout=5, source_address=("127.0.0.2", 0))
        with guesser:
            codes = []
            for _ in range(50):
                guesser.sendall(security_frame(LOGIN, [(USER, b"admin"), (CREDENTIAL, wrong)]))
                codes.append(security_result(guesser)[0])
                assert admin.get(("test", "s", "served"))[2] == {"a": 1}
            assert set(codes) == {65}
            guesser.sendall(security_frame(LOGIN, [(USER, b"admin"), (CREDENTIAL, ADMIN_CREDENTIAL)]))
            assert security_result(guesser)[0] == 65, "the right credential is refused too, for a while"
        connect(srv, "admin", "admin")
        stats = harness.parse_kv(harness.info(admin, "statistics"))
        assert int(stats["security_logins_throttled"]) >= 41
        assert int(stats["security_logins_refused"]) == 10
        assert "too many failed logins" in srv.log_text()
    finally:
        srv.close_clients()
        srv.stop()


def test_the_audit_log_has_a_json_line_per_login_denial_and_change(tmp_path):
    audit_path = tmp_path / "audit.log"
    srv = harness.start_server(service={"work-directory": str(tmp_path)},
                               sections={"security": {"enabled": True, "audit-log": str(audit_path)}},
                               tag="osprey-security-audit")
    try:
        admin = connect(srv, "admin", "admin")
        admin.admin_create_user("audited", "pw", ["read"])
        with pytest.raises(ex.AerospikeError):
            connect(srv, "audited", "wrong")
        reader = connect(srv, "audited", "pw")
        assert code_of(lambda: reader.put(("test", "demo", 1), {"a": 1})) == ROLE_VIOLATION
        redis_client = srv.redis(username="audited", password="pw")
        with pytest.raises(Exception, match="no permissions to run the 'set' command"):
            redis_client.set("k", "v")
        events = [json.loads(line) for line in audit_path.read_text().splitlines()]
        def having(**wanted):
            return [e for e in events if all(e.get(k) == v for k, v in wanted.items())]
        assert having(event="login", user="admin", method="login", result="ok")
        assert having(event="change", user="admin", change="create-user", target="audited")
        assert having(event="login", user="audited", result="refused", reason="invalid credential")
        assert having(event="denied", user="audited", protocol="aerospike", request="write test/demo")
        assert having(event="login", user="audited", protocol="redis", method="auth", result="ok")
        assert having(event="denied", user="audited", protocol="redis", request="set")
        assert all(e["client"] == "127.0.0.1" and e["time_ms"] > 0 for e in events)
        assert audit_path.stat().st_mode & 0o777 == 0o600
    finally:
        srv.close_clients()
        srv.stop()


def test_quotas_are_refused_while_off_and_enforced_per_second_when_on(secure_server, root, tmp_path):
    with pytest.raises(ex.AerospikeError) as raised:
        root.admin_set_quotas("read", 10, 10)
    assert raised.value.code == 74, "QUOTAS_NOT_ENABLED"
    srv = harness.start_server(service={"work-directory": str(tmp_path)},
                               sections={"security": {"enabled": True, "enable-quotas": True}},
                               tag="osprey-security-quotas")
    try:
        admin = connect(srv, "admin", "admin")
        admin.admin_create_role("five-reads", [{"code": aerospike.PRIV_READ_WRITE}], read_quota=5)
        admin.admin_create_user("metered", "pw", ["five-reads"])
        admin.admin_grant_roles("admin", ["read-write"])
        admin.put(("test", "q", 1), {"a": 1})
        metered = connect(srv, "metered", "pw")
        codes = [code_of(lambda: metered.get(("test", "q", 1))) for _ in range(20)]
        assert codes.count(83) >= 10, codes  # QUOTA_EXCEEDED past 5 in a second
        assert None in codes
        metered.put(("test", "q", 2), {"a": 1})  # writes have no quota here
        info = admin.admin_query_user_info("metered")
        assert info["read_info"][0] == 5
        redis_client = srv.redis(username="metered", password="pw")
        errors = []
        for _ in range(20):
            try:
                redis_client.get("k")
            except redis.ResponseError as error:
                errors.append(str(error))
        assert len(errors) >= 10 and all("QUOTA_EXCEEDED" in error for error in errors), errors
        admin.admin_set_quotas("five-reads", 0, 0)
        assert all(code_of(lambda: metered.get(("test", "q", 1))) is None for _ in range(20))
    finally:
        srv.close_clients()
        srv.stop()


def raw_login(port, user=b"admin", credential=ADMIN_CREDENTIAL):
    """An open socket to `port` logged in (or the login's result code), and its token."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(security_frame(LOGIN, [(USER, user), (CREDENTIAL, credential)]))
    code, fields = security_result(sock)
    token = None
    while fields:
        size, fid = struct.unpack(">IB", fields[:5])
        if fid == SESSION_TOKEN:
            token = fields[5:4 + size]
        fields = fields[4 + size:]
    return sock, code, token


def test_users_made_on_one_node_of_a_cluster_log_in_on_every_node(tmp_path):
    """The security tables go through the metadata group: a user created on node 1 logs in on
    node 3, and a session token node 1 gave authenticates there too (one key)."""
    fabric_ports = [harness.free_port() for _ in range(3)]
    seeds = [f"127.0.0.1:{port}" for port in fabric_ports]
    servers = []
    try:
        for index, fabric_port in enumerate(fabric_ports):
            server = harness.OspreyServer(
                {"port": 0, "work-directory": str(tmp_path / f"work{index}")},
                [harness.namespace("test", replication_factor=2)],
                tag=f"secure-cluster{index}",
                cluster={"node-id": f"D{index + 1}", "fabric-port": fabric_port, "seeds": seeds,
                         "metadata-dir": str(tmp_path / f"meta{index}")},
                sections=SECURITY,
            )
            servers.append(server.start())
        first, last = servers[0], servers[2]
        sock, code, _ = raw_login(first.port)
        assert code == 0
        with sock:
            roles = bytes([1, len(b"read-write")]) + b"read-write"
            sock.sendall(security_frame(CREATE_USER, [(USER, b"everywhere"), (1, ADMIN_CREDENTIAL),
                                                      (10, roles)]))
            assert security_result(sock)[0] == 0
        # Waited for on node 3's kept tables, not by logging in: every refused login counts
        # toward the password-guessing throttle, which a slow replication once let refuse the
        # user for good (`too many failed logins from this address`).
        kept = tmp_path / "work2" / "security.json"

        def user_kept() -> bool:
            try:
                return "everywhere" in json.loads(kept.read_text())["tables"]["users"]
            except (OSError, ValueError, KeyError):
                return False

        replicated = harness.wait_until(user_kept, timeout=30)
        assert replicated, f"never replicated:\n{last.log_tail()}"
        for _ in range(3):
            sock, code, _ = raw_login(last.port, b"everywhere")
            sock.close()
            if code == 0:
                break
            time.sleep(0.2)
        assert code == 0, f"the replicated user cannot log in on node 3 (code {code})"
        _, code, token = raw_login(first.port, b"everywhere")
        assert code == 0 and token
        with socket.create_connection(("127.0.0.1", last.port), timeout=5) as sock:
            sock.sendall(security_frame(AUTHENTICATE, [(USER, b"everywhere"), (SESSION_TOKEN, token)]))
            assert security_result(sock)[0] == 0, "a token of node 1 authenticates on node 3"
        assert json.loads((tmp_path / "work2" / "security.json").read_text())["tables"]["users"]["everywhere"]
        # The official client logs in on every node it finds, and each key goes to its master.
        client = aerospike.client(harness.client_config(first.port, user="everywhere", password="admin")).connect()
        try:
            assert len(client.get_nodes()) == 3
            for index in range(200):
                client.put(("test", "secured", index), {"v": index})
            assert all(client.get(("test", "secured", index))[2] == {"v": index} for index in range(200))
        finally:
            client.close()
    finally:
        for server in servers:
            server.stop()
