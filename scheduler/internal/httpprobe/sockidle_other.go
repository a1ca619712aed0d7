//go:build !unix

package httpprobe

import "net"

// socketIdle cannot peek here; a stale kept connection is still caught when its answer
// fails, and retried once.
func socketIdle(net.Conn) bool { return true }
