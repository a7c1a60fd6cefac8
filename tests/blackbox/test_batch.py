"""Batch-index protocol (reference 8.1): batch get, exists, and batch-any rows that read, write,
delete and operate, each with its own policy.

Every row is answered by a message whose transaction_ttl is the row's index; a missing key is a
row result (2), never a failed batch; the stream ends with a message carrying info3 LAST and the
batch status. Requests refused before any row runs (no rows, too many rows, a malformed row, an
unknown namespace in a row) get that LAST message alone, with the error code, and the
connection keeps serving.
"""

from __future__ import annotations

import struct

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers.batch import records as br
from aerospike_helpers.operations import operations as op

import aswire
import harness

OK = 0
NOT_FOUND = 2
GENERATION = 3
PARAMETER = 4
BATCH_MAX_REQUESTS = 151

FIELD_BATCH = 41
INFO1_BATCH = 0x08
PARENT_REPORT_ALL_ERRORS = 0x04
ROW_REPEAT = 0x01
ROW_HAS_EXTRA_INFO = 0x02
ROW_HAS_GENERATION = 0x04


def results(batch) -> list[int]:
    """Per-row result codes, in the client's key order."""
    return [row.result for row in batch.batch_records]


def bins_of(batch) -> list:
    """Per-row bins (None for a row without a record, or without bins)."""
    out = []
    for row in batch.batch_records:
        record = row.record
        out.append(record[2] if record is not None and len(record) > 2 else None)
    return out


# -- batch get and exists -----------------------------------------------------------------------


def test_batch_read_returns_all_bins_and_missing_keys_as_row_results(client, uset, healthy):
    for k in (1, 3):
        client.put(("test", uset, k), {"a": k, "s": f"v{k}"})
    keys = [("test", uset, k) for k in (1, 2, 3, 4)]
    res = client.batch_read(keys)
    assert res.result == OK
    assert results(res) == [OK, NOT_FOUND, OK, NOT_FOUND]
    assert bins_of(res) == [{"a": 1, "s": "v1"}, None, {"a": 3, "s": "v3"}, None]
    assert [row.key[2] for row in res.batch_records] == [1, 2, 3, 4]
    assert res.batch_records[0].record[1]["gen"] == 1


def test_batch_read_of_named_bins_returns_only_those(client, uset, healthy):
    client.put(("test", uset, "n"), {"a": 1, "b": 2, "c": 3})
    res = client.batch_read([("test", uset, "n"), ("test", uset, "gone")], ["a", "c", "zz"])
    assert results(res) == [OK, NOT_FOUND]
    assert bins_of(res)[0] == {"a": 1, "c": 3}


def test_batch_read_with_no_bins_returns_metadata_only(client, uset, healthy):
    # bins=[] asks for the header (GET_NO_BINS): generation and TTL, no bins at all.
    key = ("test", uset, "h")
    client.put(key, {"a": 1})
    client.put(key, {"a": 2})
    res = client.batch_read([key, ("test", uset, "missing")], [])
    assert results(res) == [OK, NOT_FOUND]
    record = res.batch_records[0].record
    assert record[1]["gen"] == 2
    assert len(record) == 2 or not record[2], f"header-only read returned bins: {record}"


def test_batch_exists_reports_each_key_in_the_clients_order(client, uset, healthy):
    present = {k for k in range(0, 40, 3)}
    for k in present:
        client.put(("test", uset, k), {"i": k})
    keys = [("test", uset, k) for k in range(40)]
    res = client.batch_read(keys, [])
    expected = [OK if k in present else NOT_FOUND for k in range(40)]
    assert results(res) == expected
    assert [row.key[2] for row in res.batch_records] == list(range(40))


# -- batch-any: writes, deletes, reads, operate -------------------------------------------------


def test_batch_write_mixes_writes_deletes_reads_and_fails_only_the_row_whose_generation_is_wrong(
    client, uset, healthy
):
    # Row 3 expects generation 99 of a record at generation 1: that row alone gets GENERATION;
    # the others apply.
    client.put(("test", uset, "r"), {"x": 10})
    client.put(("test", uset, "d"), {"x": 20})
    client.put(("test", uset, "g"), {"x": 30})
    gen_eq = {"gen": aerospike.POLICY_GEN_EQ}
    batch = br.BatchRecords(
        [
            br.Write(("test", uset, "w"), [op.write("x", 1), op.write("y", "new")]),
            br.Read(("test", uset, "r"), [op.read("x")]),
            br.Remove(("test", uset, "d")),
            br.Write(("test", uset, "g"), [op.write("x", 31)], meta={"gen": 99}, policy=gen_eq),
            br.Read(("test", uset, "nobody"), [op.read("x")]),
        ]
    )
    res = client.batch_write(batch)
    assert results(res) == [OK, OK, OK, GENERATION, NOT_FOUND]
    assert bins_of(res)[1] == {"x": 10}
    assert client.get(("test", uset, "w"))[2] == {"x": 1, "y": "new"}
    with pytest.raises(ex.RecordNotFound):
        client.get(("test", uset, "d"))
    _, meta, bins = client.get(("test", uset, "g"))
    assert (meta["gen"], bins) == (1, {"x": 30}), "the failed row changed nothing"


def test_batch_write_with_the_right_generation_applies(client, uset, healthy):
    key = ("test", uset, "gen")
    client.put(key, {"x": 1})
    gen_eq = {"gen": aerospike.POLICY_GEN_EQ}
    res = client.batch_write(
        br.BatchRecords([br.Write(key, [op.increment("x", 5)], meta={"gen": 1}, policy=gen_eq)])
    )
    assert results(res) == [OK]
    _, meta, bins = client.get(key)
    assert (meta["gen"], bins) == (2, {"x": 6})


def test_batch_write_create_only_fails_on_an_existing_record(client, uset, healthy):
    client.put(("test", uset, "exists"), {"x": 1})
    create = {"exists": aerospike.POLICY_EXISTS_CREATE}
    res = client.batch_write(
        br.BatchRecords(
            [
                br.Write(("test", uset, "exists"), [op.write("x", 2)], policy=create),
                br.Write(("test", uset, "fresh"), [op.write("x", 3)], policy=create),
            ]
        )
    )
    assert results(res) == [5, OK]  # RECORD_EXISTS, then created
    assert client.get(("test", uset, "exists"))[2] == {"x": 1}
    assert client.get(("test", uset, "fresh"))[2] == {"x": 3}


def test_batch_operate_applies_writes_and_returns_reads_per_row(client, uset, healthy):
    client.put(("test", uset, 1), {"n": 10, "s": "a"})
    client.put(("test", uset, 2), {"n": 20, "s": "b"})
    keys = [("test", uset, 1), ("test", uset, 2), ("test", uset, 3)]
    res = client.batch_operate(keys, [op.increment("n", 1), op.append("s", "z"), op.read("n")])
    assert results(res) == [OK, OK, OK]
    assert [bins["n"] for bins in bins_of(res)] == [11, 21, 1]
    assert client.get(("test", uset, 1))[2] == {"n": 11, "s": "az"}
    assert client.get(("test", uset, 3))[2] == {"n": 1, "s": "z"}
    reads = client.batch_operate(keys[:2] + [("test", uset, 4)], [op.read("s")])
    assert results(reads) == [OK, OK, NOT_FOUND]
    assert bins_of(reads)[:2] == [{"s": "az"}, {"s": "bz"}]


def test_batch_remove_deletes_present_keys_and_reports_missing_ones(client, uset, healthy):
    client.put(("test", uset, "a"), {"x": 1})
    res = client.batch_remove([("test", uset, "a"), ("test", uset, "b")])
    assert results(res) == [OK, NOT_FOUND]
    with pytest.raises(ex.RecordNotFound):
        client.get(("test", uset, "a"))


def test_a_large_batch_crosses_many_protos_and_returns_every_row(client, uset, healthy):
    # 3000 records of 1 KiB: about 3 MiB of reply, i.e. more than 20 protos of ~128 KiB.
    keys = [("test", uset, k) for k in range(3000)]
    value = bytes(range(256)) * 4
    written = client.batch_operate(keys, [op.write("v", value), op.write("k", 0)])
    assert set(results(written)) == {OK}
    res = client.batch_read(keys)
    assert res.result == OK
    assert results(res) == [OK] * 3000
    assert all(bins == {"v": value, "k": 0} for bins in bins_of(res))
    assert [row.key[2] for row in res.batch_records] == list(range(3000))
    removed = client.batch_remove(keys)
    assert set(results(removed)) == {OK}


def test_a_batch_over_batch_max_requests_is_refused(start_server):
    srv = start_server(service={"batch-max-requests": 10})
    c = srv.client()
    keys = [("test", "s", k) for k in range(11)]
    try:
        res = c.batch_read(keys)
    except ex.AerospikeError as e:
        assert e.code == BATCH_MAX_REQUESTS, (e.code, e.msg)
    else:
        assert res.result == BATCH_MAX_REQUESTS, results(res)
    assert set(results(c.batch_read(keys[:10]))) == {NOT_FOUND}
    c.put(keys[0], {"a": 1})
    assert c.get(keys[0])[2] == {"a": 1}


def test_batch_rows_count_as_batch_sub_transactions_in_namespace_statistics(client, uset, healthy):
    client.put(("test", uset, "s1"), {"a": 1})
    client.put(("test", uset, "s2"), {"a": 2})
    before = harness.ns_stats(client, "test")
    counters = [
        "batch_sub_read_success",
        "batch_sub_read_not_found",
        "batch_sub_write_success",
        "batch_sub_delete_success",
        "batch_sub_delete_not_found",
        "client_read_success",
    ]
    # If the counters are missing, `namespace/<ns>` does not report them yet (server wiring).
    missing = [name for name in counters if name not in before]
    assert not missing, f"namespace/test lacks {missing}"
    client.batch_read([("test", uset, "s1"), ("test", uset, "s2"), ("test", uset, "none")])
    client.batch_write(
        br.BatchRecords(
            [
                br.Write(("test", uset, "s3"), [op.write("a", 3)]),
                br.Remove(("test", uset, "s1")),
                br.Remove(("test", uset, "none")),
            ]
        )
    )
    after = harness.ns_stats(client, "test")
    delta = {name: int(after[name]) - int(before[name]) for name in counters}
    assert delta == {
        "batch_sub_read_success": 2,
        "batch_sub_read_not_found": 1,
        "batch_sub_write_success": 1,
        "batch_sub_delete_success": 1,
        "batch_sub_delete_not_found": 1,
        "client_read_success": 0,
    }


def test_node_statistics_count_batches(client, uset, healthy):
    stats = harness.parse_kv(harness.info(client, "statistics"))
    # Two keys: the client turns a one-key batch into a single-record read.
    client.batch_read([("test", uset, 1), ("test", uset, 2)])
    after = harness.parse_kv(harness.info(client, "statistics"))
    assert int(after["batch_index_initiate"]) >= int(stats["batch_index_initiate"]) + 1
    assert int(after["batch_index_complete"]) >= int(stats["batch_index_complete"]) + 1


# -- raw bytes ----------------------------------------------------------------------------------


def row_full(index: int, digest: bytes, ns: str, set_name: str, info1: int, info2: int = 0,
             ops: list[bytes] = (), generation: int | None = None) -> bytes:
    """A full row: index, digest, flags, info1..3, [generation], counts, ns and set, ops."""
    flags = ROW_HAS_EXTRA_INFO | (ROW_HAS_GENERATION if generation is not None else 0)
    head = struct.pack(">I", index) + bytes(digest) + bytes([flags, info1, info2, 0])
    if generation is not None:
        head += struct.pack(">H", generation)
    fields = aswire.ns_field(ns) + aswire.set_field(set_name)
    return head + struct.pack(">HH", 2, len(ops)) + fields + b"".join(ops)


def row_read(index: int, digest: bytes, ns: str = "test", set_name: str = "") -> bytes:
    return row_full(index, digest, ns, set_name, aswire.INFO1_READ | aswire.INFO1_GET_ALL)


def row_repeat(index: int, digest: bytes) -> bytes:
    return struct.pack(">I", index) + bytes(digest) + bytes([ROW_REPEAT])


def batch_frame(rows: list[bytes], n_rows: int | None = None,
                parent_flags: int = PARENT_REPORT_ALL_ERRORS) -> bytes:
    body = struct.pack(">IB", len(rows) if n_rows is None else n_rows, parent_flags)
    body += b"".join(rows)
    return aswire.as_msg([aswire.field(FIELD_BATCH, body)], [], info1=INFO1_BATCH)


def message_size(body: bytes, pos: int) -> int:
    """Bytes of the AS_MSG starting at `pos`: header, then its fields and ops by their sizes."""
    n_fields, n_ops = struct.unpack_from(">HH", body, pos + 18)
    end = pos + aswire.AS_MSG_HEADER_SZ
    for _ in range(n_fields + n_ops):
        end += 4 + struct.unpack_from(">I", body, end)[0]
    return end - pos


def batch_reply(sock) -> tuple[list[aswire.Msg], aswire.Msg, int]:
    """(row messages, the LAST message, how many protos) of one batch reply."""
    rows: list[aswire.Msg] = []
    protos = 0
    sock.settimeout(5.0)
    while True:
        _, ptype, body = aswire.recv_frame(sock)
        assert ptype == aswire.TYPE_MSG
        protos += 1
        pos = 0
        while pos < len(body):
            size = message_size(body, pos)
            msg = aswire.parse_msg(body[pos : pos + size])
            pos += size
            if msg.info3 & aswire.INFO3_LAST:
                assert pos == len(body), "the LAST message is not the last of its proto"
                return rows, msg, protos
            rows.append(msg)


def refused_with(server, frame: bytes) -> int:
    """Sends a batch that must be refused before any row: returns the code of its lone LAST
    message, after checking that the same connection still answers a get."""
    with server.raw() as s:
        s.sendall(frame)
        rows, last, _ = batch_reply(s)
        assert rows == [], "a refused batch answered rows"
        assert last.transaction_ttl == 0
        digest = aerospike.calc_digest("test", "raw", "after")
        get = aswire.as_msg(aswire.record_fields("test", "raw", digest), [],
                            info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL)
        assert aswire.request_msg(s, get).result_code == NOT_FOUND
        return last.result_code


def test_raw_batch_rows_echo_their_index_and_the_last_message_ends_the_stream(server, uset,
                                                                              healthy):
    d = [aerospike.calc_digest("test", uset, k) for k in range(3)]
    put = aswire.as_msg(aswire.record_fields("test", uset, d[1]), [aswire.write_int("a", 7)],
                        info2=aswire.INFO2_WRITE)
    with server.raw() as s:
        assert aswire.request_msg(s, put).result_code == OK
        s.sendall(batch_frame([row_read(10, d[0], set_name=uset), row_repeat(11, d[1]),
                               row_repeat(12, d[2])]))
        rows, last, _ = batch_reply(s)
        assert last.result_code == OK and last.info3 == aswire.INFO3_LAST
        assert [(m.transaction_ttl, m.result_code) for m in rows] == [
            (10, NOT_FOUND), (11, OK), (12, NOT_FOUND)]
        assert rows[1].bins() == {"a": 7} and rows[1].generation == 1


def test_raw_truncated_row_is_refused_with_parameter(server, healthy):
    digest = aerospike.calc_digest("test", "raw", 1)
    row = row_read(0, digest)
    assert refused_with(server, batch_frame([row[:-3]])) == PARAMETER


def test_raw_huge_row_count_with_few_bytes_is_refused(server, healthy):
    # n_rows = 0xFFFFFFFF with 10 bytes behind it: refused at once, nothing reserved for it.
    body = struct.pack(">IB", 0xFFFFFFFF, PARENT_REPORT_ALL_ERRORS) + b"\x00" * 10
    frame = aswire.as_msg([aswire.field(FIELD_BATCH, body)], [], info1=INFO1_BATCH)
    assert refused_with(server, frame) in (PARAMETER, BATCH_MAX_REQUESTS)


def test_raw_huge_row_count_within_the_limit_but_few_rows_is_refused_with_parameter(
    server, healthy
):
    digest = aerospike.calc_digest("test", "raw", 1)
    assert refused_with(server, batch_frame([row_read(0, digest)], n_rows=3)) == PARAMETER


def test_raw_unknown_namespace_in_a_row_refuses_the_whole_batch(server, uset, healthy):
    # Row 0 is a write; row 1 names a namespace the server does not have. Nothing runs.
    d0 = aerospike.calc_digest("test", uset, "w")
    write = row_full(0, d0, "test", uset, 0, aswire.INFO2_WRITE, [aswire.write_int("a", 1)])
    unknown = row_read(1, aerospike.calc_digest("nope", uset, 1), ns="nope")
    assert refused_with(server, batch_frame([write, unknown])) == PARAMETER
    with server.raw() as s:
        get = aswire.as_msg(aswire.record_fields("test", uset, d0), [],
                            info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL)
        assert aswire.request_msg(s, get).result_code == NOT_FOUND, "row 0 ran"


def test_raw_repeat_as_the_first_row_is_refused(server, healthy):
    digest = aerospike.calc_digest("test", "raw", 1)
    assert refused_with(server, batch_frame([row_repeat(0, digest)])) == PARAMETER


def test_raw_batch_without_rows_or_batch_field_is_refused(server, healthy):
    assert refused_with(server, batch_frame([])) == PARAMETER
    no_field = aswire.as_msg([aswire.ns_field("test")], [], info1=INFO1_BATCH)
    assert refused_with(server, no_field) == PARAMETER


def test_raw_row_error_ends_the_batch_without_report_all_errors(server, uset, healthy):
    # Parent flags 0: row 1's generation error ends the batch, the LAST message carries it,
    # and row 2 (a write) never runs.
    d = [aerospike.calc_digest("test", uset, k) for k in range(3)]
    put = aswire.as_msg(aswire.record_fields("test", uset, d[1]), [aswire.write_int("a", 1)],
                        info2=aswire.INFO2_WRITE)
    gen_row = row_full(1, d[1], "test", uset, 0, aswire.INFO2_WRITE | aswire.INFO2_GENERATION,
                       [aswire.write_int("a", 2)], generation=9)
    write2 = row_full(2, d[2], "test", uset, 0, aswire.INFO2_WRITE, [aswire.write_int("a", 3)])
    with server.raw() as s:
        assert aswire.request_msg(s, put).result_code == OK
        s.sendall(batch_frame([row_read(0, d[0], set_name=uset), gen_row, write2], parent_flags=0))
        rows, last, _ = batch_reply(s)
        assert last.result_code == GENERATION
        assert all(m.transaction_ttl != 2 for m in rows)
        get = aswire.as_msg(aswire.record_fields("test", uset, d[2]), [],
                            info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL)
        assert aswire.request_msg(s, get).result_code == NOT_FOUND, "row 2 ran"


def test_raw_large_batch_reply_comes_in_protos_of_about_128_kib(server, client, uset, healthy):
    keys = [("test", uset, k) for k in range(400)]
    client.batch_operate(keys, [op.write("v", b"x" * 1024)])
    digests = [aerospike.calc_digest("test", uset, k) for k in range(400)]
    rows = [row_read(0, digests[0], set_name=uset)]
    rows += [row_repeat(i, d) for i, d in enumerate(digests) if i > 0]
    with server.raw() as s:
        s.sendall(batch_frame(rows))
        replies, last, protos = batch_reply(s)
    assert last.result_code == OK
    assert sorted(m.transaction_ttl for m in replies) == list(range(400))
    assert all(m.result_code == OK and m.bins() == {"v": b"x" * 1024} for m in replies)
    assert protos >= 3, f"{protos} protos for ~420 KiB of rows"


def test_a_batch_whose_batch_field_size_counts_the_filter_field_before_it_is_read(server, client):
    """The Go client (v8) writes a batch parent's BATCH field size as if it were the first
    field; with a batch filter expression written before it, the size overstates the field by
    the filter field's length. Aerospike reads the rows by their count; Osprey answered
    PARAMETER to every such batch. Now it reads the field to the end of the message, and the
    filter applies to each row."""
    keys = [("test", "batchfilter", i) for i in range(4)]
    for i, k in enumerate(keys):
        client.put(k, {"i": i})
    rows = [row_read(i, aerospike.calc_digest(*k), set_name="batchfilter") for i, k in enumerate(keys)]
    body = struct.pack(">IB", len(rows), PARENT_REPORT_ALL_ERRORS) + b"".join(rows)
    # i < 2: [LT, [BIN, INT, "i"], 2]
    filter_field = aswire.field(43, b"\x93\x05\x93\x51\x02\xa1i\x02")
    batch_field = bytearray(aswire.field(FIELD_BATCH, body))
    size = struct.unpack_from(">I", batch_field, 0)[0] + len(filter_field)
    struct.pack_into(">I", batch_field, 0, size)
    frame = aswire.as_msg([filter_field, bytes(batch_field)], [], info1=INFO1_BATCH)
    with server.raw() as s:
        s.sendall(frame)
        replies, last, _ = batch_reply(s)
    assert last.result_code == 0
    codes = sorted((reply.transaction_ttl, reply.result_code) for reply in replies)
    assert codes == [(0, 0), (1, 0), (2, 27), (3, 27)]
