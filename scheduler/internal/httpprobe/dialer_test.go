package httpprobe

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/netmap"
)

// The dialer maps exact names first, then the longest wildcard suffix; a port in the map
// replaces the dialled one; the loopback rule is judged on the mapped IP.
func TestNetDialerAddress(t *testing.T) {
	t.Parallel()
	names := map[string]string{
		"*.lab.example":        "127.0.20.1:8443",
		"*.media.lab.example":  "127.0.30.1",
		"*.example":            "127.0.40.1:9000",
		"jellyfin.lab.example": "127.0.20.5",
		"Plain.Lab.Example.":   "127.0.20.6:8080",
		"outside.lab.example":  "192.0.2.10",
		"*.far.example":        "192.0.2.20:443",
		"v6.lab.example":       "[::1]:8443",
		"broken.lab.example":   "ingress.lab.example",
		"192.0.2.99":           "127.0.0.9",
	}
	d := NewDialer(names, false)
	open := NewDialer(names, true)
	tests := []struct {
		name, in, want, err string
		allowNonLoopback    bool
	}{
		{name: "wildcard with port override", in: "x.lab.example:443", want: "127.0.20.1:8443"},
		{name: "wildcard overrides any dialled port", in: "x.lab.example:80", want: "127.0.20.1:8443"},
		{name: "wildcard matches deeper names", in: "a.b.lab.example:443", want: "127.0.20.1:8443"},
		{name: "wildcard is case-insensitive", in: "X.LAB.example.:443", want: "127.0.20.1:8443"},
		{name: "exact beats wildcard, keeps port", in: "jellyfin.lab.example:443", want: "127.0.20.5:443"},
		{name: "exact key normalised", in: "plain.lab.example:443", want: "127.0.20.6:8080"},
		{name: "longest suffix wins", in: "sonarr.media.lab.example:443", want: "127.0.30.1:443"},
		{name: "shorter wildcard for the rest", in: "s3.example:443", want: "127.0.40.1:9000"},
		{name: "wildcard does not match its bare suffix", in: "lab.example:443", want: "127.0.40.1:9000"},
		{name: "nothing matches example itself", in: "example:443", err: "not in the scheduler's name map"},
		{name: "unmapped name", in: "svc.other:443", err: "not in the scheduler's name map"},
		{name: "ipv6 target", in: "v6.lab.example:443", want: "[::1]:8443"},
		{name: "loopback literal", in: "127.0.0.1:8080", want: "127.0.0.1:8080"},
		{name: "ip literal key", in: "192.0.2.99:80", want: "127.0.0.9:80"},
		{name: "ip literal not matched by wildcards", in: "127.0.0.2:80", want: "127.0.0.2:80"},
		{name: "mapped non-loopback refused", in: "outside.lab.example:443", err: "192.0.2.10) is not a loopback address"},
		{name: "wildcard non-loopback refused", in: "api.far.example:443", err: "192.0.2.20) is not a loopback address"},
		{name: "non-loopback literal refused", in: "192.0.2.1:80", err: "not a loopback address"},
		{name: "mapped non-loopback allowed when configured", in: "outside.lab.example:443", want: "192.0.2.10:443", allowNonLoopback: true},
		{name: "wildcard non-loopback allowed when configured", in: "api.far.example:80", want: "192.0.2.20:443", allowNonLoopback: true},
		{name: "a name as value is never resolved", in: "broken.lab.example:443", err: `entry "broken.lab.example"`},
		{name: "not host:port", in: "x.lab.example", err: "not host:port"},
	}
	for _, tc := range tests {
		dd := d
		if tc.allowNonLoopback {
			dd = open
		}
		got, err := dd.address(tc.in)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrDialRefused) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: address(%q) = %q, %v; want ErrDialRefused containing %q", tc.name, tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: address(%q) = %q, %v; want %q", tc.name, tc.in, got, err, tc.want)
		}
	}
}

// A real dial follows the wildcard and its port to a listener, whatever port was asked.
func TestNetDialerDialsMappedPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(io.LimitReader(c, 5))
		accepted <- string(b)
	}()
	names, err := netmap.Parse("*.lab.example=" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewDialer(names, false).DialContext(ctx, "tcp", "anything.lab.example:443")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	select {
	case got := <-accepted:
		if got != "hello" {
			t.Fatalf("listener read %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the mapped listener never saw the connection")
	}
}

func TestNetDialerPolicy(t *testing.T) {
	t.Parallel()
	d := NewDialer(map[string]string{"Jellyfin.LAB.example": "127.0.20.1", "far.example": "192.0.2.10"}, false)
	tests := []struct {
		in, want string
		refused  bool
	}{
		{"jellyfin.lab.example:443", "127.0.20.1:443", false},
		{"jellyfin.lab.example.:80", "127.0.20.1:80", false},
		{"127.0.11.2:2049", "127.0.11.2:2049", false},
		{"[::1]:8080", "[::1]:8080", false},
		{"unknown.example:443", "", true}, // never resolved
		{"far.example:443", "", true},     // mapped, but not loopback
		{"192.0.2.7:22", "", true},        // literal outside loopback
		{"no-port", "", true},
	}
	for _, tc := range tests {
		got, err := d.address(tc.in)
		if tc.refused {
			if !errors.Is(err, ErrDialRefused) {
				t.Errorf("%s: %q, %v; want refused", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	open := NewDialer(map[string]string{"far.example": "192.0.2.10"}, true)
	if got, err := open.address("far.example:443"); err != nil || got != "192.0.2.10:443" {
		t.Errorf("AllowNonLoopback: %q, %v", got, err)
	}
}
