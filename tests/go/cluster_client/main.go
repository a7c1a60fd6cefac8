// Command cluster_client connects to an Osprey cluster with the official Aerospike Go client
// (v8), given one seed node, as a new user's program would: it checks that the client finds
// every node, then writes and reads back 1,000 keys, which the client sends to each key's
// master. The black-box suite runs it (tests/blackbox/test_cluster.py).
//
// With `wait-migrations`, it instead waits with the client's own
// Cluster.WaitUntilMigrationIsFinished (which polls every node's migrate_partitions_remaining)
// and prints how long it waited.
//
// With `security`, it logs in to a node with security on as the default admin, and goes
// through the admin API and a user's privileges (see security.go).
//
// With `tls`, it does the same over TLS (see tls.go).
//
// Usage: cluster_client PORT NODES | cluster_client wait-migrations PORT TIMEOUT_S |
// cluster_client security PORT | cluster_client tls PORT NODES CA_FILE TLS_NAME [CERT KEY [pki]]
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	as "github.com/aerospike/aerospike-client-go/v8"
)

const keys = 1000

func main() {
	if len(os.Args) == 4 && os.Args[1] == "wait-migrations" {
		waitMigrations(os.Args[2], os.Args[3])
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "security" {
		security(os.Args[2])
		return
	}
	if len(os.Args) >= 6 && os.Args[1] == "tls" {
		overTLS(os.Args[2:])
		return
	}
	if len(os.Args) != 3 {
		fail("usage: cluster_client PORT NODES | cluster_client wait-migrations PORT TIMEOUT_S")
	}
	port, errPort := strconv.Atoi(os.Args[1])
	want, errWant := strconv.Atoi(os.Args[2])
	if errPort != nil || errWant != nil {
		fail("PORT and NODES are numbers")
	}
	client, err := as.NewClient("127.0.0.1", port)
	if err != nil {
		fail("connect: %v", err)
	}
	defer client.Close()
	putAndGet(client, want)
}

// putAndGet checks that the client found `want` nodes, then writes and reads back the keys.
func putAndGet(client *as.Client, want int) {
	nodes := client.GetNodes()
	fmt.Printf("nodes: %d\n", len(nodes))
	if len(nodes) != want {
		fail("the client found %d nodes, not %d", len(nodes), want)
	}
	for i := 0; i < keys; i++ {
		key, _ := as.NewKey("test", "go", i)
		if err := client.Put(nil, key, as.BinMap{"v": i}); err != nil {
			fail("put %d: %v", i, err)
		}
	}
	for i := 0; i < keys; i++ {
		key, _ := as.NewKey("test", "go", i)
		record, err := client.Get(nil, key)
		if err != nil {
			fail("get %d: %v", i, err)
		}
		if record.Bins["v"] != i {
			fail("get %d: bins %v", i, record.Bins)
		}
	}
	fmt.Printf("%d puts and gets ok\n", keys)
}

// waitMigrations blocks in the client's WaitUntilMigrationIsFinished until no node reports
// partitions to migrate, or TIMEOUT_S passes (exit 1).
func waitMigrations(portText, timeoutText string) {
	port, errPort := strconv.Atoi(portText)
	timeoutS, errTimeout := strconv.Atoi(timeoutText)
	if errPort != nil || errTimeout != nil {
		fail("PORT and TIMEOUT_S are numbers")
	}
	client, err := as.NewClient("127.0.0.1", port)
	if err != nil {
		fail("connect: %v", err)
	}
	defer client.Close()
	started := time.Now()
	if err := client.Cluster().WaitUntilMigrationIsFinished(time.Duration(timeoutS) * time.Second); err != nil {
		fail("waiting for migrations: %v", err)
	}
	fmt.Printf("migrations finished after %.2f s with %d nodes\n", time.Since(started).Seconds(), len(client.GetNodes()))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
