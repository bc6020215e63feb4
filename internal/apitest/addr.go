package apitest

import (
	"net"
	"testing"
)

// FreeAddr is a local address nothing listens on yet, for a server that
// must come back on the same address after a restart or an outage.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
