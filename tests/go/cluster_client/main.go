// Command cluster_client connects to an Osprey cluster with the official Aerospike Go client
// (v8), given one seed node, as a new user's program would: it checks that the client finds
// every node, then writes and reads back 1,000 keys, which the client sends to each key's
// master. The black-box suite runs it (tests/blackbox/test_cluster.py).
//
// Usage: cluster_client PORT NODES
package main

import (
	"fmt"
	"os"
	"strconv"

	as "github.com/aerospike/aerospike-client-go/v8"
)

const keys = 1000

func main() {
	if len(os.Args) != 3 {
		fail("usage: cluster_client PORT NODES")
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

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
