package checks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	shchecks "github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/remote"
)

// maxBodyBytes bounds what an http check reads of a body (to match it, or to drain it so the
// connection can be reused).
const maxBodyBytes = 256 << 10

// confirmUnreachable is how many consecutive runs must find a machine unreachable before it
// is down.
const confirmUnreachable = 2

// errShuttingDown marks a run cut short by Stop: it produces no result at all, since "the
// scheduler stopped" says nothing about the target.
var errShuttingDown = errors.New("scheduler stopping")

// runProbe runs one check and returns its result.
func (r *Runner) runProbe(ctx context.Context, d *checkDef, st *probeState) (Result, error) {
	if d.specErr != nil {
		return unknown(ClassConfig, "check config unusable: %v", d.specErr), nil
	}
	switch s := d.spec.(type) {
	case scriptSpec:
		return r.probeScript(ctx, d, s, st)
	case httpSpec:
		return r.probeHTTP(ctx, d, s)
	case tcpSpec:
		return r.probeTCP(ctx, d, s)
	case backupSpec:
		return r.probeBackup(ctx, d, s)
	case guestSpec:
		return r.probeGuest(ctx, d, s)
	default:
		return unknown(ClassConfig, "no probe for kind %q", d.Kind), nil
	}
}

// resolveFailure reports a target that could not be resolved (S8): a missing fact in the
// graph is a configuration problem and says so; a failed lookup says that instead.
func resolveFailure(what string, err error) Result {
	if errors.Is(err, remote.ErrResolution) {
		return unknown(ClassResolution, "configuration: cannot resolve %s: %v", what, err)
	}
	return unknown(ClassResolution, "cannot resolve %s (graph lookup failed): %v", what, err)
}

// execFailure classifies an error of remote.Exec. selfObserved says whether reaching t is
// itself what the check observes (a machine's own probes): then an unreachable machine is
// down. For a guest, a backup or a Proxmox guest status, an unreachable hop only means the
// scheduler cannot see: unknown, with the host named (S3).
func execFailure(ctx context.Context, t remote.Target, err error, selfObserved bool, timeout time.Duration) (Result, error) {
	host := t.Slug
	if t.Host != "" {
		host = t.Host
	}
	switch {
	case errors.Is(err, remote.ErrPoolClosed) || errors.Is(ctx.Err(), context.Canceled):
		return Result{}, errShuttingDown
	case errors.Is(err, remote.ErrHostKeyChanged):
		return unknown(ClassHostKey, "host key of %s (%s) changed; connections are refused until it is re-pinned", host, t.Addr), nil
	case errors.Is(err, remote.ErrAuthFailed):
		return unknown(ClassAuth, "%s (%s) refused the scheduler's key as %s", host, t.Addr, t.User), nil
	case errors.Is(err, remote.ErrUnreachable):
		if t.Kind == remote.KindLXC || t.Kind == remote.KindVM {
			return unknown(ClassUnreachable, "Proxmox host %s unreachable (%s), so %s cannot be observed", t.Host, t.Addr, t.Slug), nil
		}
		if selfObserved {
			r := observed(HealthDown, "unreachable over SSH at %s: %v", t.Addr, err)
			r.Class = ClassUnreachable
			return r, nil
		}
		return unknown(ClassUnreachable, "%s unreachable (%s)", host, t.Addr), nil
	case errors.Is(err, remote.ErrNoGuestAgent):
		return unknown(ClassGuestAgent, "%s: QEMU guest agent not available: %v", t.Slug, err), nil
	case errors.Is(err, remote.ErrGuestExec) && strings.Contains(err.Error(), "is not running"):
		return observed(HealthDown, "vm %d is not running on %s", t.VMID, t.Host), nil
	case errors.Is(err, context.DeadlineExceeded):
		return unknown(ClassTimeout, "no answer from %s within %s", t.Slug, timeout), nil
	default:
		if t.Host != "" {
			return unknown(ClassExec, "running the probe on %s through %s failed: %v", t.Slug, t.Host, err), nil
		}
		return unknown(ClassExec, "running the probe on %s failed: %v", t.Slug, err), nil
	}
}

// guestFailure recognises pct's own refusals (the command never ran in the guest).
func guestFailure(t remote.Target, res remote.Result) (Result, bool) {
	if t.Kind != remote.KindLXC || res.ExitCode == 0 {
		return Result{}, false
	}
	msg := strings.TrimSpace(string(res.Stderr))
	switch {
	case strings.Contains(msg, "not running"):
		return observed(HealthDown, "container %d is not running on %s", t.VMID, t.Host), true
	case strings.Contains(msg, "does not exist"):
		return observed(HealthDown, "container %d does not exist on %s (%s)", t.VMID, t.Host, msg), true
	}
	return Result{}, false
}

func (r *Runner) probeScript(ctx context.Context, d *checkDef, s scriptSpec, st *probeState) (Result, error) {
	t, err := r.resolveExec(ctx, d)
	if err != nil {
		return resolveFailure(d.TargetSlug, err), nil
	}
	if t.OS == shchecks.OSDarwin {
		// The machine the probe lands on decides: a service declares no os of its own.
		s.OS = shchecks.OSDarwin
	}
	sc := scripts[s.Script]
	cmd, err := sc.command(s)
	if err != nil {
		return unknown(ClassConfig, "cannot build the %s probe: %v", describeScript(s), err), nil
	}
	if t.Kind == remote.KindVM {
		// qm waits for the guest no longer than the check does.
		vmid, timeout := t.VMID, d.Timeout
		t.Wrap = func(c string) (string, error) { return remote.GuestExecCommand(vmid, timeout, c) }
	}
	// A line of the host's probe shell, not a session of its own: a session makes sshd fork
	// and exec the login shell for every check (remote.Pool.Probe).
	res, err := r.ssh.Probe(ctx, t, cmd)
	if err != nil {
		r.forgetOnFailure(execKey(d.TargetID), err)
		out, ferr := execFailure(ctx, t, err, t.Slug == d.TargetSlug, d.Timeout)
		if ferr == nil && out.Health == HealthDown && out.Class == ClassUnreachable {
			st.mu.Lock()
			st.unreachable++
			first := st.unreachable < confirmUnreachable
			st.mu.Unlock()
			if first {
				// Down only when confirmed by the next run: a single failed dial is as
				// likely a busy host or a lost packet as a dead machine.
				out = unknown(ClassUnreachable, "%s (once so far: down if the next attempt fails too)", out.Reason)
			}
		}
		return out, ferr
	}
	st.mu.Lock()
	st.unreachable = 0
	st.mu.Unlock()
	var out Result
	if gr, ok := guestFailure(t, res); ok {
		out = gr
	} else if res.ExitCode != 0 && !sc.answersWithExit {
		out = unknown(ClassProbe, "%s probe exited %d: %s", describeScript(s), res.ExitCode, clip(string(res.Stderr), 300))
	} else {
		out = sc.parse(s, string(res.Stdout), res.ExitCode, st)
	}
	if out.Summary == nil {
		out.Summary = map[string]any{}
	}
	out.Summary["script"] = s.Script
	out.Summary["os"] = s.OS
	out.Summary["command"] = cmd
	if len(s.Args) > 0 {
		out.Summary["args"] = s.Args
	}
	if t.Slug != d.TargetSlug {
		out.Summary["ran_on"] = t.Slug
	}
	if t.Host != "" {
		out.Summary["via"] = t.Host
	}
	return out, nil
}

func (r *Runner) probeGuest(ctx context.Context, d *checkDef, s guestSpec) (Result, error) {
	t, err := r.resolve(ctx, s.Host)
	if err != nil {
		return resolveFailure("owning host "+s.Host+" of "+d.TargetSlug, err), nil
	}
	prog := "pct"
	if s.GuestKind == shchecks.GuestVM {
		prog = "qm"
	}
	cmd := prog + " status " + strconv.Itoa(s.VMID)
	res, err := r.ssh.Probe(ctx, t, cmd)
	if err != nil {
		r.forgetOnFailure(s.Host, err)
		out, ferr := execFailure(ctx, t, err, false, d.Timeout)
		if ferr == nil && out.Class == ClassUnreachable {
			out.Reason = fmt.Sprintf("Proxmox host %s unreachable (%s), so the status of %s is unknown", s.Host, t.Addr, d.TargetSlug)
		}
		return out, ferr
	}
	msg := strings.TrimSpace(string(res.Stderr))
	if res.ExitCode != 0 {
		if strings.Contains(msg, "does not exist") {
			out := observed(HealthDown, "%s %d does not exist on %s", s.GuestKind, s.VMID, s.Host)
			out.Summary = map[string]any{"vmid": s.VMID, "host": s.Host, "status": "missing"}
			out.Metrics = []Metric{{"guest_running", 0}}
			return out, nil
		}
		return unknown(ClassProbe, "%s exited %d on %s: %s", cmd, res.ExitCode, s.Host, clip(msg, 300)), nil
	}
	status := ""
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "status:"); ok {
			status = strings.TrimSpace(v)
			break
		}
	}
	var out Result
	switch status {
	case "running":
		out = observed(HealthUp, "%s %d running on %s", s.GuestKind, s.VMID, s.Host)
	case "stopped":
		out = observed(HealthDown, "%s %d stopped on %s", s.GuestKind, s.VMID, s.Host)
	case "paused", "suspended", "prelaunch":
		out = observed(HealthDegraded, "%s %d %s on %s", s.GuestKind, s.VMID, status, s.Host)
	case "":
		return unknown(ClassParse, "%s printed no status line", cmd), nil
	default:
		out = unknown(ClassProbe, "%s reports status %q", cmd, status)
	}
	running := 0.0
	if status == "running" {
		running = 1
	}
	out.Summary = map[string]any{"vmid": s.VMID, "host": s.Host, "status": status}
	out.Metrics = []Metric{{"guest_running", running}}
	return out, nil
}

func (r *Runner) probeBackup(ctx context.Context, d *checkDef, s backupSpec) (Result, error) {
	path, err := remote.QuoteArg(s.Path)
	if err != nil {
		return unknown(ClassConfig, "backup path %q cannot be quoted: %v", s.Path, err), nil
	}
	// -mmin with -type f works the same on GNU and BSD find; head stops find at the first
	// fresh file, so a datastore of millions of chunks costs one hit, not a full walk.
	cmd := fmt.Sprintf("if [ -e %s ]; then find %s -type f -mmin -%d | head -n 1; else echo 'no such path' >&2; exit 3; fi",
		path, path, s.MaxAgeMinutes)
	t, err := r.resolve(ctx, s.Holder)
	if err != nil {
		return resolveFailure("backup holder "+s.Holder, err), nil
	}
	res, err := r.ssh.Exec(ctx, t, cmd, nil)
	if err != nil {
		r.forgetOnFailure(s.Holder, err)
		out, ferr := execFailure(ctx, t, err, false, d.Timeout)
		if ferr == nil && out.Class == ClassUnreachable {
			out.Reason = fmt.Sprintf("backup holder %s unreachable, so the freshness of %s is unknown", s.Holder, s.Path)
		}
		return out, ferr
	}
	summary := map[string]any{"path": s.Path, "holder": s.Holder, "max_age_minutes": s.MaxAgeMinutes}
	var out Result
	fresh := strings.TrimSpace(firstLine(string(res.Stdout)))
	switch {
	case res.ExitCode == 3 && strings.Contains(string(res.Stderr), "no such path"):
		out = observed(HealthDown, "%s does not exist on %s", s.Path, s.Holder)
	case res.ExitCode != 0:
		if gr, ok := guestFailure(t, res); ok {
			return unknown(ClassUnreachable, "backup holder %s cannot run the check: %s", s.Holder, gr.Reason), nil
		}
		return unknown(ClassProbe, "find on %s exited %d: %s", s.Holder, res.ExitCode, clip(string(res.Stderr), 300)), nil
	case fresh != "":
		out = observed(HealthUp, "a file under %s was written in the last %d minutes", s.Path, s.MaxAgeMinutes)
		summary["fresh_file"] = fresh
	case strings.TrimSpace(string(res.Stderr)) != "":
		return unknown(ClassProbe, "find on %s failed: %s", s.Holder, clip(string(res.Stderr), 300)), nil
	default:
		out = observed(HealthDown, "no file under %s written in the last %d minutes", s.Path, s.MaxAgeMinutes)
	}
	freshV := 0.0
	if out.Health == HealthUp {
		freshV = 1
	}
	out.Summary = summary
	out.Metrics = []Metric{{"backup_fresh", freshV}}
	return out, nil
}

func (r *Runner) probeHTTP(ctx context.Context, d *checkDef, s httpSpec) (Result, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return unknown(ClassConfig, "url %q: %v", s.URL, err), nil
	}
	wantBody := s.BodyMatch != ""
	start := time.Now()
	var ans httpAnswer
	if r.httpc != nil {
		ans, err = r.httpc.get(ctx, u, wantBody)
	} else {
		ans, err = clientGet(ctx, r.http, u, wantBody)
	}
	latency := time.Since(start)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return Result{}, errShuttingDown
		}
		return netFailure(ctx, s.URL, err, d.Timeout), nil
	}
	ms := float64(latency.Microseconds()) / 1000
	var out Result
	switch {
	case ans.status != s.ExpectStatus:
		out = observed(HealthDown, "HTTP %d from %s (expected %d)", ans.status, s.URL, s.ExpectStatus)
	case s.BodyMatch != "" && !strings.Contains(string(ans.body), s.BodyMatch):
		out = observed(HealthDown, "body of %s does not contain %q", s.URL, s.BodyMatch)
	case latency > d.Timeout/2:
		out = observed(HealthDegraded, "HTTP %d in %.0f ms (slower than half the %s timeout)", ans.status, ms, d.Timeout)
	default:
		out = observed(HealthUp, "HTTP %d in %.0f ms", ans.status, ms)
	}
	out.Summary = map[string]any{"url": s.URL, "status": ans.status, "latency_ms": round2(ms)}
	out.Metrics = []Metric{{"http_latency_ms", round2(ms)}, {"http_status", float64(ans.status)}}
	return out, nil
}

// clientGet is an http check through an http.Client (Options.HTTPClient).
func clientGet(ctx context.Context, client *http.Client, u *url.URL, wantBody bool) (httpAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return httpAnswer{}, err
	}
	req.Header.Set("User-Agent", "oikos-scheduler")
	resp, err := client.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	ans := httpAnswer{status: resp.StatusCode}
	if wantBody {
		ans.body, err = io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	} else {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
	}
	if err != nil {
		return httpAnswer{}, fmt.Errorf("reading the body: %w", err)
	}
	return ans, nil
}

func (r *Runner) probeTCP(ctx context.Context, d *checkDef, s tcpSpec) (Result, error) {
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	start := time.Now()
	conn, err := r.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return Result{}, errShuttingDown
		}
		return netFailure(ctx, addr, err, d.Timeout), nil
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	_ = conn.Close()
	out := observed(HealthUp, "%s accepts connections (%.1f ms)", addr, ms)
	out.Summary = map[string]any{"address": addr, "connect_ms": round2(ms)}
	out.Metrics = []Metric{{"tcp_connect_ms", round2(ms)}}
	return out, nil
}

// netFailure classifies an http or tcp error: the scheduler's own refusal is configuration
// (S8); anything the network said is an observation of the target.
func netFailure(ctx context.Context, what string, err error, timeout time.Duration) Result {
	var tlsErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, ErrDialRefused):
		return unknown(ClassConfig, "configuration: %v", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		r := observed(HealthDown, "%s: no answer within %s", what, timeout)
		r.Class = ClassTimeout
		return r
	case errors.Is(err, syscall.ECONNREFUSED):
		return observed(HealthDown, "%s: connection refused", what)
	case errors.As(err, &tlsErr):
		return observed(HealthDown, "%s: TLS certificate not trusted: %v", what, tlsErr.Err)
	default:
		return observed(HealthDown, "%s: %v", what, err)
	}
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// checkLabel is the kind (and script) of a check, for metrics labels.
func checkLabel(d *checkDef) string {
	if s, ok := d.spec.(scriptSpec); ok && d.Kind == ontology.KindSSHScript {
		return d.Kind + "/" + s.Script
	}
	return d.Kind
}
