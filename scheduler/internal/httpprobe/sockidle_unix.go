//go:build unix

package httpprobe

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// socketIdle reports whether nothing waits to be read on c's socket: no bytes and no EOF.
// It peeks without blocking (MSG_PEEK|MSG_DONTWAIT), so it costs one system call and
// consumes nothing. A read with a deadline in the past cannot answer this: Go fails such a
// read before it reaches the socket. A connection that is not a socket counts as idle.
func socketIdle(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn() // TLS records waiting (an alert, a close_notify) count as data
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	idle := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Data (n > 0) and EOF (n == 0, no error) are both "not idle"; so is any error
		// other than "would block".
		idle = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
		return true // never wait for readability
	})
	return err == nil && idle
}
