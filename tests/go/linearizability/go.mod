module osprey/tests/go/linearizability

go 1.23.0

require github.com/anishathalye/porcupine v1.3.1
