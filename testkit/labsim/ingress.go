package labsim

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/lab"
)

// serveIngress answers HTTP and HTTPS by Host header: a known route answers 200 "ok <name>"
// while what serves it is up (its guest running, its unit active, its host not down), 502
// when it is not, and 404 for names the fleet does not route.
func (s *Sim) serveIngress(w http.ResponseWriter, r *http.Request) {
	name := routeName(r)
	t, ok := s.fleet.Routes[name]
	if !ok {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	h, hok := s.hosts[t.Host]
	var up bool
	var f Fault
	var unitOwner *lab.Machine
	if hok {
		up = !h.Fault.Down
		f = h.Fault
		unitOwner = h.M
		if t.VMID > 0 {
			// The route follows its guest to whichever node of the cluster holds it now.
			on, g := s.lab.FindGuest(h.Host, t.VMID)
			gok := g != nil
			if gok {
				up, f = !on.Fault.Down, on.Fault
			}
			up = up && gok && g.Running()
			if gok {
				f.Delay += g.Fault.Delay
				f.Hang = f.Hang || g.Fault.Hang
				unitOwner = g.M
			}
		}
	}
	s.mu.Unlock()
	if !f.Wait(r.Context()) {
		return
	}
	if up && t.Unit != "" && unitOwner != nil {
		if active, exists := unitOwner.Sys.UnitActive(t.Unit); exists && !active {
			up = false
		}
	}
	if !up {
		http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "ok %s\n", name)
}

// routeName is the route a request asks for: its Host header without port or trailing dot,
// or, over TLS when the Host header names no host (empty or an IP literal), the SNI server
// name the client sent.
func routeName(r *http.Request) string {
	name := hostOnly(r.Host)
	if r.TLS != nil && r.TLS.ServerName != "" && (name == "" || net.ParseIP(name) != nil) {
		name = hostOnly(r.TLS.ServerName)
	}
	return name
}

// hostOnly lower-cases a host[:port] and drops the port and a trailing dot.
func hostOnly(hostport string) string {
	name := strings.ToLower(hostport)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	return strings.TrimSuffix(strings.Trim(name, "[]"), ".")
}
