package labsim

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/proxmox"
)

// Options configure a Sim. The zero value of each field has a documented default.
type Options struct {
	// StateDir holds host keys, the ingress certificate (CAFileName, CAKeyFileName) and
	// every machine's sandbox directory. Required.
	StateDir string
	// AuthorizedKeys are the client keys accepted; empty accepts any key.
	AuthorizedKeys []ssh.PublicKey
	// Listen maps a declared address to the address actually bound; nil binds the declared
	// address. Tests return "127.0.0.1:0" to get a free port.
	Listen func(declared string) string
	// ControlAddr is the loopback address of the control API ("" disables it).
	ControlAddr string
	// Logger receives connection and fault events.
	Logger zerolog.Logger
	// Clock is the machines' clock (date, uptime, touch, find -mmin); nil means time.Now.
	Clock func() time.Time
	// FreshBackups keeps a freshly written file in every backup directory the fleet's
	// machines hold (Host.BackupDirs), so the backup-freshness checks of a healthy demo read
	// up. Off, a backup directory holds only what a test puts there.
	FreshBackups bool
	// HARecoveryDelay is how long after a node goes down (fault Down) its HA-managed
	// guests are recovered on a surviving node of its cluster; zero means
	// lab.DefaultHARecoveryDelay (about ha-manager's two minutes), negative means never by
	// itself (RecoverHA or POST /ha/recover/{host} still do it).
	HARecoveryDelay time.Duration
	// OnHARecovery, when set, is called (without the lab's lock) after the lab recovered a
	// down node's HA guests, with where they are now.
	OnHARecovery func(host string, moved []Placement)
}

// Sentinel errors.
var (
	// ErrUnknownHost means no host of the fleet has that name.
	ErrUnknownHost = errors.New("labsim: unknown host")
	// ErrUnknownGuest means the host has no guest with that vmid.
	ErrUnknownGuest = errors.New("labsim: unknown guest")
	// ErrUnknownAddress means DialContext was given an address no host declares.
	ErrUnknownAddress = errors.New("labsim: no simulated host at that address")
	// ErrNotStarted means the simulator is not running.
	ErrNotStarted = errors.New("labsim: not started")
)

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Sim is a running (or ready to run) simulated homelab.
type Sim struct {
	fleet Fleet
	opts  Options
	log   zerolog.Logger
	lab   *lab.Lab
	pve   *proxmox.Tools

	// mu is the lab's lock: it guards the lab's hosts and guests and the fields below.
	mu       *sync.Mutex
	hosts    map[string]*hostRT
	order    []string
	declared map[string]string // declared address → host name
	started  bool
	stopped  bool

	httpLn     net.Listener
	httpSrv    *http.Server
	httpsLn    net.Listener
	httpsSrv   *http.Server
	cert       *ingressCert
	controlLn  net.Listener
	controlSrv *http.Server
	tcpLns     []net.Listener    // the fleet's TCPListeners (demo.go)
	tcpActual  map[string]string // a TCPListeners address → where it is bound

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New validates the fleet, loads or creates host keys and prepares every machine's sandbox.
// Nothing listens until Start.
func New(fleet Fleet, opts Options) (*Sim, error) {
	if opts.StateDir == "" {
		return nil, errors.New("labsim: Options.StateDir is required")
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.HARecoveryDelay == 0 {
		opts.HARecoveryDelay = lab.DefaultHARecoveryDelay
	}
	if fleet.HTTPAddr == "" {
		fleet.HTTPAddr = DefaultHTTPAddr
	}
	if fleet.HTTPSAddr == "" {
		fleet.HTTPSAddr = DefaultHTTPSAddr
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("labsim: state dir: %w", err)
	}
	opts.StateDir = stateDir
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("labsim: create state dir: %w", err)
	}
	s := &Sim{
		fleet:    fleet,
		opts:     opts,
		log:      opts.Logger.With().Str("component", "labsim").Logger(),
		hosts:    map[string]*hostRT{},
		declared: map[string]string{},
	}
	s.lab = lab.New(fleet, stateDir, opts.Clock, s.log)
	s.mu = &s.lab.Mu
	s.pve = proxmox.New(s.lab, fleet.Templates, s.log, s.spawn)
	cert, created, err := loadOrCreateIngressCert(stateDir, opts.Clock())
	if err != nil {
		return nil, err
	}
	if created {
		s.log.Info().Str("ca_file", cert.path).Msg("ingress certificate created")
	}
	s.cert = cert
	for _, h := range fleet.Hosts {
		if !validName.MatchString(h.Name) {
			return nil, fmt.Errorf("labsim: invalid host name %q", h.Name)
		}
		if _, dup := s.hosts[h.Name]; dup {
			return nil, fmt.Errorf("labsim: duplicate host %q", h.Name)
		}
		if _, _, err := net.SplitHostPort(h.Addr); err != nil {
			return nil, fmt.Errorf("labsim: host %s: address %q: %w", h.Name, h.Addr, err)
		}
		if other, dup := s.declared[h.Addr]; dup {
			return nil, fmt.Errorf("labsim: hosts %s and %s declare the same address %s", other, h.Name, h.Addr)
		}
		switch h.Kind {
		case KindProxmox, KindLinux, KindDarwin:
		default:
			return nil, fmt.Errorf("labsim: host %s: unknown kind %q", h.Name, h.Kind)
		}
		rt, err := s.newHost(h)
		if err != nil {
			return nil, err
		}
		s.hosts[h.Name] = rt
		s.order = append(s.order, h.Name)
		s.declared[h.Addr] = h.Name
	}
	if err := s.writeClusterFiles(); err != nil {
		return nil, err
	}
	return s, nil
}

// listenAddr is where a declared address is bound.
func (s *Sim) listenAddr(declared string) string {
	if s.opts.Listen != nil {
		return s.opts.Listen(declared)
	}
	return declared
}

// Start binds every listener and serves until ctx ends or Stop is called. On error nothing
// stays bound.
func (s *Sim) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.stopped {
		s.mu.Unlock()
		return errors.New("labsim: Start called twice")
	}
	s.started = true
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Unlock()

	fail := func(err error) error {
		s.Stop()
		return err
	}
	for _, name := range s.order {
		h := s.hosts[name]
		s.mu.Lock()
		down := h.Fault.Down
		s.mu.Unlock()
		if down {
			s.mu.Lock()
			h.actual = s.listenAddr(h.Cfg.Addr)
			s.mu.Unlock()
			continue
		}
		if err := s.bindHost(h, s.listenAddr(h.Cfg.Addr)); err != nil {
			return fail(err)
		}
	}
	if s.opts.FreshBackups {
		if err := s.freshenBackups(); err != nil {
			return fail(err)
		}
		s.keepBackupsFresh()
	}
	if err := s.listenTCP(); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", s.listenAddr(s.fleet.HTTPAddr))
	if err != nil {
		return fail(fmt.Errorf("labsim: http listener %s: %w", s.fleet.HTTPAddr, err))
	}
	s.httpLn = ln
	s.httpSrv = &http.Server{Handler: http.HandlerFunc(s.serveIngress), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.ctx }}
	s.serveHTTP("ingress", s.httpSrv, ln)
	tln, err := net.Listen("tcp", s.listenAddr(s.fleet.HTTPSAddr))
	if err != nil {
		return fail(fmt.Errorf("labsim: https listener %s: %w", s.fleet.HTTPSAddr, err))
	}
	s.httpsLn = tln
	// The same handler as plain HTTP: a route answers alike on both, so a check's scheme
	// follows the inventory (the seeded routes are https) without a proxy in front.
	s.httpsSrv = &http.Server{Handler: http.HandlerFunc(s.serveIngress), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.ctx },
		TLSConfig:   &tls.Config{Certificates: []tls.Certificate{s.cert.tls}, MinVersion: tls.VersionTLS12},
		// A client that does not trust the certificate is its problem, not the simulator's.
		ErrorLog: log.New(io.Discard, "", 0)}
	s.serveHTTP("ingress-tls", s.httpsSrv, tln)
	if s.opts.ControlAddr != "" {
		cln, err := net.Listen("tcp", s.opts.ControlAddr)
		if err != nil {
			return fail(fmt.Errorf("labsim: control listener %s: %w", s.opts.ControlAddr, err))
		}
		s.controlLn = cln
		s.controlSrv = &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
		s.serveHTTP("control", s.controlSrv, cln)
	}
	s.wg.Add(1)
	safego.Go(s.log, "labsim-stop-on-ctx", func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
			safego.Go(s.log, "labsim-stop", s.Stop)
		case <-s.ctx.Done():
		}
	})
	s.log.Info().Int("hosts", len(s.order)).Str("http", s.httpLn.Addr().String()).
		Str("https", s.httpsLn.Addr().String()).Str("ca_file", s.cert.path).Msg("lab simulator started")
	return nil
}

// spawn runs fn on a goroutine of its own with the simulator's context; Stop waits for it.
func (s *Sim) spawn(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
}

func (s *Sim) serveHTTP(name string, srv *http.Server, ln net.Listener) {
	s.wg.Add(1)
	safego.Go(s.log, "labsim-"+name, func() {
		defer s.wg.Done()
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Str("server", name).Msg("http server stopped")
		}
	})
}

// Stop closes every listener and connection and waits for the simulator's goroutines. It is
// safe to call more than once.
func (s *Sim) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		cancel := s.cancel
		var lns []net.Listener
		var conns []net.Conn
		lns = append(lns, s.tcpLns...)
		s.tcpLns = nil
		for _, h := range s.hosts {
			if h.ln != nil {
				lns = append(lns, h.ln)
				h.ln = nil
			}
			for c := range h.conns {
				conns = append(conns, c)
			}
		}
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		for _, ln := range lns {
			ln.Close()
		}
		for _, c := range conns {
			c.Close()
		}
		shutdown := func(srv *http.Server) {
			if srv == nil {
				return
			}
			ctx, done := context.WithTimeout(context.Background(), 2*time.Second)
			defer done()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
		}
		shutdown(s.httpSrv)
		shutdown(s.httpsSrv)
		shutdown(s.controlSrv)
		s.wg.Wait()
		s.mu.Lock()
		for _, h := range s.hosts {
			h.CloseMachines()
		}
		s.mu.Unlock()
		s.log.Info().Msg("lab simulator stopped")
	})
}

func (s *Sim) host(name string) (*hostRT, error) {
	h, ok := s.hosts[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownHost, name)
	}
	return h, nil
}

// Hosts lists the host names in fleet order.
func (s *Sim) Hosts() []string { return append([]string(nil), s.order...) }

// Addr is the address a host actually listens on ("" for an unknown host).
func (s *Sim) Addr(host string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hosts[host]; ok {
		return h.actual
	}
	return ""
}

// HTTPAddr is the address the ingress HTTP listener is bound to ("" before Start).
func (s *Sim) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// HTTPSAddr is the address the ingress HTTPS listener is bound to ("" before Start).
func (s *Sim) HTTPSAddr() string {
	if s.httpsLn == nil {
		return ""
	}
	return s.httpsLn.Addr().String()
}

// CAFile is the path of the ingress certificate (PEM) in the state directory: a client
// trusting it as a root verifies the HTTPS ingress. It survives restarts.
func (s *Sim) CAFile() string { return s.cert.path }

// CACertPEM is the content of CAFile.
func (s *Sim) CACertPEM() []byte { return bytes.Clone(s.cert.certPEM) }

// ControlAddr is the address of the control API ("" when disabled or before Start).
func (s *Sim) ControlAddr() string {
	if s.controlLn == nil {
		return ""
	}
	return s.controlLn.Addr().String()
}

// DialContext dials the listener behind a declared host address (or one of the fleet's
// TCPListeners), so that a client
// configured with the fleet's addresses reaches the simulator wherever it is bound. An
// address no host declares is refused (never dialled) with ErrUnknownAddress.
func (s *Sim) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	s.mu.Lock()
	name, ok := s.declared[address]
	var actual string
	if ok {
		actual = s.hosts[name].actual
	} else if a, tcp := s.tcpActual[address]; tcp {
		ok, actual = true, a
	}
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownAddress, address)
	}
	if actual == "" {
		return nil, fmt.Errorf("%w: %s", ErrNotStarted, address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, actual)
}

// HostKey is the host's normal SSH host key (nil for an unknown host).
func (s *Sim) HostKey(host string) ssh.PublicKey {
	h, ok := s.hosts[host]
	if !ok {
		return nil
	}
	return h.key.PublicKey()
}

// Connections is the number of SSH connections currently open to the host.
func (s *Sim) Connections(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hosts[host]; ok {
		return len(h.conns)
	}
	return 0
}

// TotalConnections is the number of SSH connections the host has accepted since Start.
func (s *Sim) TotalConnections(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hosts[host]; ok {
		return h.total
	}
	return 0
}

// SetHostFault replaces a host's fault.
func (s *Sim) SetHostFault(host string, f Fault) error {
	h, err := s.host(host)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := h.Fault
	h.Fault = f
	started := s.started && !s.stopped
	var drop []net.Conn
	if (f.Down && !old.Down) || (f.Refusing && !old.Refusing) || (f.ChangedHostKey && !old.ChangedHostKey) {
		for c := range h.conns {
			drop = append(drop, c)
		}
	}
	var ln net.Listener
	if f.Down && h.ln != nil {
		ln, h.ln = h.ln, nil
	}
	actual := h.actual
	s.mu.Unlock()
	s.log.Info().Str("host", host).Interface("fault", f).Msg("host fault set")
	if ln != nil {
		ln.Close()
	}
	for _, c := range drop {
		c.Close()
	}
	s.haOnFault(h, old, f, started)
	if !f.Down && old.Down && started {
		// Rebind the same address so clients and DialContext keep working.
		if err := s.bindHost(h, actual); err != nil {
			return fmt.Errorf("labsim: bring %s back up: %w", host, err)
		}
	}
	return nil
}

// SetGuestFault replaces a guest's fault.
func (s *Sim) SetGuestFault(host string, vmid int, f Fault) error {
	return s.withGuest(host, vmid, func(g *lab.Guest) {
		g.Fault = f
		s.log.Info().Str("host", host).Int("vmid", vmid).Interface("fault", f).Msg("guest fault set")
	})
}

// withGuest runs fn on a guest under the lab's lock; ErrUnknownHost or ErrUnknownGuest when
// there is no such guest.
func (s *Sim) withGuest(host string, vmid int, fn func(g *lab.Guest)) error {
	h, err := s.host(host)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := h.Guests[vmid]
	if !ok {
		return fmt.Errorf("%w: %s/%d", ErrUnknownGuest, host, vmid)
	}
	fn(g)
	return nil
}

// ClearFaults makes every host and guest healthy again.
func (s *Sim) ClearFaults() error {
	var errs []error
	for _, name := range s.order {
		if err := s.SetHostFault(name, Fault{}); err != nil {
			errs = append(errs, err)
		}
		s.mu.Lock()
		for _, g := range s.hosts[name].Guests {
			g.Fault = Fault{}
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// HostFault returns a host's current fault.
func (s *Sim) HostFault(host string) (Fault, error) {
	h, err := s.host(host)
	if err != nil {
		return Fault{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return h.Fault, nil
}

// SetGuestStatus starts or stops a guest from outside (as a test or the control API would).
func (s *Sim) SetGuestStatus(host string, vmid int, running bool) error {
	return s.withGuest(host, vmid, func(g *lab.Guest) { g.SetRunning(running, s.opts.Clock()) })
}

// GuestState is a snapshot of one guest, as GET /state reports it.
type GuestState struct {
	VMID   int    `json:"vmid"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Fault  Fault  `json:"fault"`
}

// HostState is a snapshot of one host, as GET /state reports it.
type HostState struct {
	Name             string       `json:"name"`
	Kind             string       `json:"kind"`
	Addr             string       `json:"addr"`
	ActualAddr       string       `json:"actual_addr"`
	Connections      int          `json:"connections"`
	TotalConnections int          `json:"total_connections"`
	Fault            Fault        `json:"fault"`
	Guests           []GuestState `json:"guests"`
}

// State is a snapshot of the whole simulator.
type State struct {
	HTTPAddr  string      `json:"http_addr"`
	HTTPSAddr string      `json:"https_addr"`
	CAFile    string      `json:"ca_file"`
	Hosts     []HostState `json:"hosts"`
}

// Snapshot returns the current state of every host and guest.
func (s *Sim) Snapshot() State {
	st := State{HTTPAddr: s.HTTPAddr(), HTTPSAddr: s.HTTPSAddr(), CAFile: s.CAFile()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.order {
		h := s.hosts[name]
		hs := HostState{Name: name, Kind: h.Cfg.Kind, Addr: h.Cfg.Addr, ActualAddr: h.actual,
			Connections: len(h.conns), TotalConnections: h.total, Fault: h.Fault, Guests: []GuestState{}}
		for _, g := range h.SortedGuests() {
			hs.Guests = append(hs.Guests, GuestState{VMID: g.Cfg.VMID, Kind: g.Cfg.Kind, Name: g.DisplayName(), Status: g.Cfg.Status, Fault: g.Fault})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	return st
}

// GuestStatus reports a guest's status ("running" or "stopped").
func (s *Sim) GuestStatus(host string, vmid int) (string, error) {
	var status string
	err := s.withGuest(host, vmid, func(g *lab.Guest) { status = g.Cfg.Status })
	return status, err
}
