"""CLIENT LIST and CLIENT INFO: a line per live connection, with redis-server 7.0's fields in
its order, showing what each connection does (name, database, subscriptions, MULTI, blocked,
the last command and how long ago), and the TYPE and ID filters, compared with a reference
redis-server where the answer does not depend on the server.
"""

from __future__ import annotations

import time

import pytest
import redis

import harness


@pytest.fixture(scope="module")
def redis_server_port():
    with harness.reference_redis_server() as port:
        yield port


def parse(text: bytes | str) -> list[dict[str, str]]:
    if isinstance(text, bytes):
        text = text.decode()
    return [dict(field.split("=", 1) for field in line.split(" ")) for line in text.splitlines()]


def raw_list(client: redis.Redis, *args: str) -> bytes:
    """CLIENT LIST's bulk string as sent (redis-py parses it otherwise)."""
    connection = client.connection_pool.get_connection("CLIENT")
    try:
        connection.send_command("CLIENT", "LIST", *args)
        return connection.read_response()
    finally:
        client.connection_pool.release(connection)


def test_the_fields_are_redis_servers_in_its_order(resp_server, redis_server_port):
    ours = parse(raw_list(resp_server.redis()))
    theirs = parse(raw_list(redis.Redis(port=redis_server_port)))
    assert list(ours[0]) == list(theirs[0])
    assert list(parse(resp_server.redis().execute_command("CLIENT", "INFO"))[0]) == list(theirs[0])


def test_every_connection_is_listed_with_what_it_does(resp_server):
    named = resp_server.redis(single_connection_client=True)
    named.client_setname("worker-1")
    named.select(3)
    subscriber = resp_server.redis(single_connection_client=True).pubsub()
    subscriber.subscribe("news", "alerts")
    subscriber.psubscribe("n*")
    subscriber.get_message(timeout=1)
    queuing = resp_server.redis(single_connection_client=True)
    queuing.execute_command("MULTI")
    queuing.execute_command("SET", "a", "1")
    queuing.execute_command("GET", "a")
    blocked = resp_server.redis(single_connection_client=True)
    blocked_id = blocked.client_id()
    observer = resp_server.redis()
    holder = {}

    def blpop():
        holder["reply"] = blocked.blpop(["nothing-here"], timeout=3)

    import threading

    thread = threading.Thread(target=blpop)
    thread.start()
    try:
        time.sleep(0.5)
        lines = parse(raw_list(observer))
        by_name = {line["name"]: line for line in lines if line["name"]}
        worker = by_name["worker-1"]
        assert (worker["db"], worker["flags"], worker["cmd"]) == ("3", "N", "select")
        subscribed = [line for line in lines if line["flags"] == "P"]
        assert len(subscribed) == 1
        assert (subscribed[0]["sub"], subscribed[0]["psub"]) == ("2", "1")
        in_multi = [line for line in lines if "x" in line["flags"]]
        assert len(in_multi) == 1 and in_multi[0]["multi"] == "2"
        waiting = [line for line in lines if line["id"] == str(blocked_id)]
        assert waiting[0]["flags"] == "b" and waiting[0]["cmd"] == "blpop"
        me = [line for line in lines if line["cmd"] == "client|list"]
        assert len(me) == 1 and me[0]["idle"] == "0"
        for line in lines:
            assert int(line["qbuf"]) >= 0 and int(line["qbuf-free"]) >= 0
            assert line["addr"].startswith("127.0.0.1:")
        pubsub_only = parse(raw_list(observer, "TYPE", "pubsub"))
        assert [line["id"] for line in pubsub_only] == [subscribed[0]["id"]]
        just = parse(raw_list(observer, "ID", str(blocked_id)))
        assert [line["id"] for line in just] == [str(blocked_id)]
        assert raw_list(observer, "TYPE", "replica") == b""
    finally:
        thread.join()
    assert holder["reply"] is None
    time.sleep(1.1)
    worker = [line for line in parse(raw_list(observer)) if line["name"] == "worker-1"][0]
    assert int(worker["idle"]) >= 1
    named.close()
    subscriber.close()
    queuing.close()
    blocked.close()


def test_filters_refuse_what_redis_refuses(resp_server, redis_server_port):
    for client in (resp_server.redis(), redis.Redis(port=redis_server_port)):
        for args, error in ((("TYPE", "nosuch"), "Unknown client type"),
                            (("ID", "abc"), "Invalid client ID"),
                            (("BOGUS",), "syntax error")):
            with pytest.raises(redis.ResponseError, match=error):
                raw_list(client, *args)
