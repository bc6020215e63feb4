//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the other end of c has closed it (or reset
// it), without waiting and without consuming a byte: a peek at the socket.
// Bytes the client sent meanwhile leave it open.
func peerClosed(c net.Conn) bool {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
		return true // done, whatever the peek saw: never wait for the socket
	})
	return closed
}

// socketOf finds the operating system's connection under the wrappers
// chatd and TLS put around it.
func socketOf(c net.Conn) net.Conn {
	for range 8 {
		switch v := c.(type) {
		case *refusalConn:
			c = v.Conn
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return c
		}
	}
	return c
}
