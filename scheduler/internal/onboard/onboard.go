// Package onboard is the scheduler's half of adding a machine to the fleet
// (shared/hostconnect): it claims host_connects rows the api writes, dials the machine
// through the scheduler's one SSH pool, and writes the outcome — the host key to confirm,
// the facts it read, or why it could not connect. It writes only host_connects (with an
// event and an audit row); the api applies the outcome to the graph.
//
// One connection: the dial that pins the vouched key is the pool's own, so the facts, the
// discovery that follows and every later check of the host reuse it.
package onboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/hostconnect"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Executor runs a command on a target; *remote.Pool implements it.
type Executor interface {
	Exec(ctx context.Context, t remote.Target, command string, out io.Writer) (remote.Result, error)
}

// Options configure a Service. Pool, SSH and Gate are required.
type Options struct {
	Pool *storage.Pool
	SSH  Executor
	// Gate must be the host key store SSH pins through.
	Gate     *KeyGate
	Notifier *eventbus.Notifier
	Logger   zerolog.Logger
	// SchedulerID is recorded as claimed_by (default "<hostname>:<pid>").
	SchedulerID string
	// Timeout bounds one connection attempt, facts included (default 30 s).
	Timeout time.Duration
	// Poll is how often unclaimed requests are looked for, in case a NOTIFY was missed
	// (default 10 s).
	Poll time.Duration
	// Owned, when set, lists the lease units this scheduler holds (leases.Manager.Owned): a
	// machine is dialled only by the holder of its unit, so its one connection is the
	// holder's. OnRequest is called on every NOTIFY oikos_connect, before the claim: the
	// lease manager ticks, so a machine just added is taken as a unit at once.
	Owned     func() []string
	OnRequest func()
}

// Service answers connection requests. Start once; Stop is safe twice.
type Service struct {
	opts Options
	st   *storage.Store
	log  zerolog.Logger
	wake chan struct{}
	life startstop.Lifecycle
	wg   sync.WaitGroup
}

// New builds the service and registers its NOTIFY handler (build it before the notifier starts).
func New(opts Options) (*Service, error) {
	if opts.Pool == nil || opts.SSH == nil || opts.Gate == nil {
		return nil, errors.New("onboard: Pool, SSH and Gate are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 10 * time.Second
	}
	if opts.SchedulerID == "" {
		h, _ := os.Hostname()
		opts.SchedulerID = h + ":" + strconv.Itoa(os.Getpid())
	}
	s := &Service{opts: opts, st: storage.New(opts.Pool), log: opts.Logger.With().Str("component", "onboard").Logger(), wake: make(chan struct{}, 1)}
	if opts.Notifier != nil {
		opts.Notifier.Listen(hostconnect.Channel, func(string) {
			if opts.OnRequest != nil {
				opts.OnRequest()
			}
			s.Wake()
		})
	}
	return s, nil
}

// Wake makes the loop look for requests now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the loop. Requests a dead scheduler left `connecting` are failed (at start and
// on every poll): their outcome is unknown and the operator retries.
func (s *Service) Start(ctx context.Context) error {
	if err := s.sweepStale(ctx); err != nil {
		return fmt.Errorf("onboard: %w", err)
	}
	return s.life.Start(ctx, s.log, "onboard", s.loop)
}

// sweepStale fails the requests left connecting for longer than two attempts take, each with
// its event (the api applies it: the machine stays planned, saying why) and audit row.
func (s *Service) sweepStale(ctx context.Context) error {
	return s.st.InTx(ctx, func(tx *storage.Store) error {
		found, err := tx.FailStaleConnects(ctx, (2 * s.opts.Timeout).String())
		if err != nil {
			return fmt.Errorf("fail interrupted requests: %w", err)
		}
		for _, st := range found {
			payload := map[string]any{"request_id": st.ID, "entity": st.Slug, "address": st.Addr,
				"status": hostconnect.StatusFailed, "error": st.Err}
			if _, err := tx.AppendEvent(ctx, eventbus.Event{Type: hostconnect.EventFailed, EntityID: st.Entity,
				Actor: "scheduler", CorrelationID: st.ID}, payload); err != nil {
				return err
			}
			if err := tx.WriteAudit(ctx, audit.Row{Actor: "scheduler", Action: hostconnect.EventFailed, CorrelationID: st.ID,
				EntityID: st.Entity, After: payload}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Stop ends the loop and waits for attempts in progress.
func (s *Service) Stop() {
	s.life.Stop()
	s.wg.Wait()
}

func (s *Service) loop(ctx context.Context) {
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	s.Wake()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick.C:
			if err := s.sweepStale(ctx); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("fail interrupted connection requests")
			}
		}
		for {
			req, ok, err := s.claim(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error().Err(err).Msg("claim a connection request")
				}
				break
			}
			if !ok {
				break
			}
			s.wg.Add(1)
			safego.Go(s.log, "onboard-connect", func() {
				defer s.wg.Done()
				s.handle(ctx, req)
			})
		}
	}
}

// request is a claimed host_connects row.
type request struct {
	id, entityID, slug, typ, addr, user, expect string
	proxmox                                     bool
}

// claim takes the oldest pending request, if any, with one conditional statement (several
// schedulers never claim the same row); with leases, only one for a machine whose unit this
// scheduler holds.
func (s *Service) claim(ctx context.Context) (request, bool, error) {
	var r request
	var owned []string
	if s.opts.Owned != nil {
		if owned = s.opts.Owned(); len(owned) == 0 {
			return r, false, nil
		}
	}
	c, ok, err := s.st.ClaimConnect(ctx, s.opts.SchedulerID, owned)
	if !ok {
		return r, false, err
	}
	r = request{id: c.ID, entityID: c.EntityID, slug: c.Slug, typ: c.Type, addr: c.Addr, user: c.User, expect: c.Expect,
		proxmox: c.Proxmox}
	return r, true, nil
}

// outcome is what an attempt writes back.
type outcome struct {
	status, fingerprint, keyType, err string
	facts                             hostconnect.Facts
	// cluster is the Proxmox cluster a connected host is a member of (nil: none, or it could
	// not be read: clusterErr says why; the connection stands either way).
	cluster    *clusterFound
	clusterErr string
}

func (s *Service) handle(ctx context.Context, r request) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	o := s.attempt(ctx, r)
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	if err := s.record(wctx, r, o); err != nil {
		s.log.Error().Err(err).Str("request", r.id).Msg("record connection outcome")
		return
	}
	ev := s.log.Info()
	if o.status == hostconnect.StatusFailed {
		ev = s.log.Warn().Str("error", o.err)
	}
	ev.Str("entity", r.slug).Str("addr", r.addr).Str("status", o.status).Str("fingerprint", o.fingerprint).
		Msg("connection request answered")
}

// attempt dials r's machine through the gate and reads its facts.
func (s *Service) attempt(ctx context.Context, r request) outcome {
	// A key already pinned for the address (the machine was known, or re-added) is what the
	// connection will be checked against, and a pooled connection was: the fingerprint the
	// operator gave must be that one.
	pinned, ok, err := s.opts.Gate.Get(ctx, r.addr)
	if err != nil {
		return outcome{status: hostconnect.StatusFailed, err: "read the pinned host key: " + err.Error()}
	}
	if ok {
		fp := remote.Fingerprint(pinned)
		if r.expect != "" && r.expect != fp {
			return outcome{status: hostconnect.StatusFailed, fingerprint: fp, err: fmt.Sprintf(
				"%v: %s already has the key %s pinned, not %s; if the machine was reinstalled, remove its pinned key (ssh_host_keys) first",
				ErrFingerprintMismatch, r.addr, fp, r.expect)}
		}
		t := remote.MachineTarget(r.slug, r.addr, r.user, "linux")
		facts, err := s.readFacts(ctx, t, r.proxmox)
		if err != nil {
			return outcome{status: hostconnect.StatusFailed, fingerprint: fp, err: explain(err, r)}
		}
		return s.withCluster(ctx, t, r, outcome{status: hostconnect.StatusConnected, facts: facts, fingerprint: fp, keyType: keyTypeOf(pinned)})
	}
	g, closeGate := s.opts.Gate.open(r.addr, r.expect)
	defer closeGate()
	t := remote.MachineTarget(r.slug, r.addr, r.user, "linux")
	facts, err := s.readFacts(ctx, t, r.proxmox)
	fp, kt := s.opts.Gate.offeredKey(g)
	switch {
	case err == nil:
		return s.withCluster(ctx, t, r, outcome{status: hostconnect.StatusConnected, facts: facts, fingerprint: fp, keyType: kt})
	case errors.Is(err, ErrAwaitingConfirmation):
		return outcome{status: hostconnect.StatusAwaiting, fingerprint: fp, keyType: kt}
	default:
		return outcome{status: hostconnect.StatusFailed, fingerprint: fp, keyType: kt, err: explain(err, r)}
	}
}

// withCluster adds to a connected Proxmox host's outcome the cluster it belongs to, read over
// the connection just made.
func (s *Service) withCluster(ctx context.Context, t remote.Target, r request, o outcome) outcome {
	if !r.proxmox {
		return o
	}
	c, err := s.discoverCluster(ctx, t, r.addr)
	if err != nil {
		o.clusterErr = "reading the cluster failed: " + err.Error()
		return o
	}
	o.cluster = c
	if c != nil {
		o.facts.Cluster = c.Name
	}
	return o
}

// explain turns a connection failure into what the operator does next.
func explain(err error, r request) string {
	switch {
	case errors.Is(err, remote.ErrHostKeyChanged):
		return err.Error() + "; a host_key_changed signal was raised"
	case errors.Is(err, ErrFingerprintMismatch):
		return err.Error()
	case errors.Is(err, remote.ErrAuthFailed):
		return fmt.Sprintf("%s refused the scheduler's key as %s: add the key `oikos ssh-key` prints to ~%s/.ssh/authorized_keys on the machine, or give the right --user",
			r.addr, r.user, r.user)
	case errors.Is(err, remote.ErrUnreachable):
		return fmt.Sprintf("cannot reach %s: %v (check the address and --port, and that sshd runs there)", r.addr, err)
	}
	return err.Error()
}

// notProxmoxError is a machine added as a proxmox-host that has no pveversion.
type notProxmoxError struct{ addr, detail string }

func (e *notProxmoxError) Error() string {
	return fmt.Sprintf("%s is not a Proxmox VE host: `pveversion` %s; add it as a plain host instead (oikos add host NAME --address ...)", e.addr, e.detail)
}

// readFacts runs a few read-only commands over one connection.
func (s *Service) readFacts(ctx context.Context, t remote.Target, proxmox bool) (hostconnect.Facts, error) {
	var f hostconnect.Facts
	run := func(cmd string) (string, int, error) {
		res, err := s.opts.SSH.Exec(ctx, t, cmd, nil)
		if err != nil {
			return "", 0, err
		}
		return strings.TrimSpace(string(res.Stdout)), res.ExitCode, nil
	}
	out, code, err := run("uname -snrm")
	if err != nil {
		return f, err
	}
	if code == 0 {
		if p := strings.Fields(out); len(p) >= 4 {
			f.OS, f.Hostname, f.Kernel, f.Arch = strings.ToLower(p[0]), p[1], p[2], normaliseArch(p[len(p)-1])
		}
	}
	if f.OS == "darwin" {
		if out, code, err = run("sysctl -n hw.ncpu hw.memsize"); err == nil && code == 0 {
			p := strings.Fields(out)
			if len(p) == 2 {
				f.Cores, _ = strconv.Atoi(p[0])
				if b, err := strconv.ParseInt(p[1], 10, 64); err == nil {
					f.MemoryMB = int(b / (1 << 20))
				}
			}
		}
	} else {
		if out, code, err = run("nproc"); err == nil && code == 0 {
			f.Cores, _ = strconv.Atoi(out)
		}
		if out, code, err = run("grep MemTotal /proc/meminfo"); err == nil && code == 0 {
			if p := strings.Fields(out); len(p) >= 2 {
				if kb, err := strconv.Atoi(p[1]); err == nil {
					f.MemoryMB = kb / 1024
				}
			}
		}
	}
	if err != nil {
		return f, err
	}
	if !proxmox {
		return f, nil
	}
	out, code, err = run("pveversion")
	switch {
	case err != nil:
		return f, err
	case code == 127:
		return f, &notProxmoxError{addr: t.Addr, detail: "is not installed (" + f.Hostname + " answered as " + f.OS + " " + f.Kernel + ")"}
	case code != 0:
		return f, &notProxmoxError{addr: t.Addr, detail: fmt.Sprintf("exited %d", code)}
	}
	f.PVEVersion = pveVersion(out)
	if f.PVEVersion == "" {
		return f, &notProxmoxError{addr: t.Addr, detail: fmt.Sprintf("printed %q, not pve-manager/<version>", out)}
	}
	return f, nil
}

// pveVersion reads "pve-manager/8.3.0/c1689ccb1065a83b (running kernel: …)" as "8.3.0".
func pveVersion(out string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(out), "pve-manager/")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "/")
	return strings.TrimSpace(v)
}

func normaliseArch(m string) string {
	switch m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	}
	return ""
}

// record writes o to r's row, with its event and audit row, in one transaction.
func (s *Service) record(ctx context.Context, r request, o outcome) error {
	return s.st.InTx(ctx, func(tx *storage.Store) error {
		n, err := tx.RecordConnect(ctx, r.id, o.status, o.fingerprint, o.keyType, o.err, o.facts)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("request %s is no longer connecting", r.id)
		}
		typ := map[string]string{hostconnect.StatusAwaiting: hostconnect.EventKeyOffered,
			hostconnect.StatusConnected: hostconnect.EventConnected, hostconnect.StatusFailed: hostconnect.EventFailed}[o.status]
		payload := map[string]any{"request_id": r.id, "entity": r.slug, "address": r.addr, "status": o.status,
			"fingerprint": o.fingerprint, "key_type": o.keyType, "error": o.err, "facts": o.facts}
		if o.clusterErr != "" {
			payload["cluster_error"] = o.clusterErr
		}
		if _, err := tx.AppendEvent(ctx, eventbus.Event{Type: typ, EntityID: r.entityID, Actor: "scheduler",
			CorrelationID: r.id}, payload); err != nil {
			return err
		}
		if err := tx.WriteAudit(ctx, audit.Row{Actor: "scheduler", Action: typ, CorrelationID: r.id, EntityID: r.entityID,
			After: payload}); err != nil {
			return err
		}
		if o.status != hostconnect.StatusConnected || o.cluster == nil {
			return nil
		}
		return s.recordCluster(ctx, tx, r, o)
	})
}
