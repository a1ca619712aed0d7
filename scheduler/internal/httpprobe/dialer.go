package httpprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/oikos-hq/oikos/shared/netmap"
)

// ErrDialRefused is a dial the scheduler's own policy refused (a name not in the name map,
// an address outside loopback without AllowNonLoopback): a configuration problem, not an
// outage of the target.
var ErrDialRefused = errors.New("dial refused by the scheduler's address policy")

// Dialer dials http and tcp checks. Names are looked up only in the name map, never in
// DNS: a check must not make reachability depend on a resolver, and in the lab nothing may
// resolve a public name at all.
type Dialer struct {
	names            netmap.Names[dialTarget]
	allowNonLoopback bool
	dialer           net.Dialer
}

// dialTarget is a name map entry as the dialer uses it. err is set for an entry whose value
// cannot be used; a dial of that name is then refused with it instead of falling through
// to "not in the map".
type dialTarget struct {
	netmap.Target
	err error
}

// NewDialer takes a name map as netmap.Parse returns it: keys are names, IP literals or
// "*.suffix" wildcards; values are IP literals or ip:port. allowNonLoopback permits
// addresses outside 127.0.0.0/8 (a real fleet); without it a lab or test never reaches a
// real network.
func NewDialer(names map[string]string, allowNonLoopback bool) *Dialer {
	d := &Dialer{allowNonLoopback: allowNonLoopback, dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	for k, v := range names {
		t, err := netmap.ParseTarget(v)
		if err != nil {
			err = fmt.Errorf("name map entry %q: %w", k, err)
		}
		// A key that cannot match a valid name is harmless (nothing dials it), and of two
		// keys that normalise alike one is kept: netmap.Parse never returns either.
		_, _ = d.names.Add(k, dialTarget{Target: t, err: err})
	}
	return d
}

// address maps host:port to the ip:port to dial, or refuses it. A mapped entry with a port
// replaces the dialled port. The loopback rule applies to the IP actually dialled.
func (d *Dialer) address(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not host:port: %w", ErrDialRefused, hostport, err)
	}
	var ip netip.Addr
	if t, ok := d.names.Lookup(host); ok {
		if t.err != nil {
			return "", fmt.Errorf("%w: %w", ErrDialRefused, t.err)
		}
		ip = t.Addr
		if t.Port != "" {
			port = t.Port
		}
	} else if ip, err = netip.ParseAddr(host); err != nil {
		return "", fmt.Errorf("%w: %q is not in the scheduler's name map and names are never resolved", ErrDialRefused, host)
	}
	if !ip.IsLoopback() && !d.allowNonLoopback {
		return "", fmt.Errorf("%w: %s (%s) is not a loopback address and non-loopback dials are not allowed", ErrDialRefused, host, ip)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// DialContext dials for http checks (Client) and tcp checks.
func (d *Dialer) DialContext(ctx context.Context, network, hostport string) (net.Conn, error) {
	addr, err := d.address(hostport)
	if err != nil {
		return nil, err
	}
	return d.dialer.DialContext(ctx, network, addr)
}
