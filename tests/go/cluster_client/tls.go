package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"

	as "github.com/aerospike/aerospike-client-go/v8"
)

// overTLS connects to a TLS port as the client's documentation shows: the authority's
// certificate as the root, the node's TLS name on the seed host, and optionally a client
// certificate, with which `pki` logs in as the user the certificate names (AuthModePKI).
// Then it checks the nodes found and the keys written and read, as over the clear port.
//
// Arguments: PORT NODES CA_FILE TLS_NAME [CERT KEY [pki]].
func overTLS(args []string) {
	port, errPort := strconv.Atoi(args[0])
	want, errWant := strconv.Atoi(args[1])
	if errPort != nil || errWant != nil {
		fail("PORT and NODES are numbers")
	}
	authority, err := os.ReadFile(args[2])
	if err != nil {
		fail("read the CA file: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(authority) {
		fail("no certificate in %s", args[2])
	}
	config := &tls.Config{RootCAs: roots}
	if len(args) >= 6 {
		certificate, err := tls.LoadX509KeyPair(args[4], args[5])
		if err != nil {
			fail("load the client certificate: %v", err)
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	policy := as.NewClientPolicy()
	policy.TlsConfig = config
	if len(args) == 7 && args[6] == "pki" {
		policy.AuthMode = as.AuthModePKI
	}
	host := as.NewHost("127.0.0.1", port)
	host.TLSName = args[3]
	client, errClient := as.NewClientWithPolicyAndHost(policy, host)
	if errClient != nil {
		fail("connect: %v", errClient)
	}
	defer client.Close()
	putAndGet(client, want)
}
