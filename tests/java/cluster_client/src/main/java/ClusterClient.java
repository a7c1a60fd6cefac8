// ClusterClient connects to an Osprey cluster with the official Aerospike Java client (9.0.5),
// given one seed node, as a new user's program would: it checks that the client finds every
// node, then writes and reads back 1,000 keys, which the client sends to each key's master. The
// black-box suite runs it (tests/blackbox/test_cluster.py); `cargo xtask blackbox` builds it.
//
// Usage: java -cp CLASSPATH ClusterClient PORT NODES

import com.aerospike.client.AerospikeClient;
import com.aerospike.client.Bin;
import com.aerospike.client.Key;
import com.aerospike.client.Record;
import com.aerospike.client.cluster.Node;

public final class ClusterClient {
    private static final int KEYS = 1000;

    public static void main(String[] args) {
        if (args.length != 2) {
            fail("usage: ClusterClient PORT NODES");
        }
        int port = 0;
        int want = 0;
        try {
            port = Integer.parseInt(args[0]);
            want = Integer.parseInt(args[1]);
        } catch (NumberFormatException e) {
            fail("PORT and NODES are numbers");
        }
        try (AerospikeClient client = new AerospikeClient("127.0.0.1", port)) {
            Node[] nodes = client.getNodes();
            System.out.printf("nodes: %d%n", nodes.length);
            if (nodes.length != want) {
                fail(String.format("the client found %d nodes, not %d", nodes.length, want));
            }
            for (int i = 0; i < KEYS; i++) {
                client.put(null, new Key("test", "java", i), new Bin("v", i));
            }
            for (int i = 0; i < KEYS; i++) {
                Record record = client.get(null, new Key("test", "java", i));
                if (record == null || !Long.valueOf(i).equals(record.getValue("v"))) {
                    fail(String.format("get %d: %s", i, record));
                }
            }
            System.out.printf("%d puts and gets ok%n", KEYS);
        } catch (Exception e) {
            // Connection, put and get failures are AerospikeExceptions: say which and stop.
            fail(e.toString());
        }
    }

    private static void fail(String message) {
        System.err.println(message);
        System.exit(1);
    }
}
