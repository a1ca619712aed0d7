package checkrun

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/httpprobe"
	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/remote"
)

// confirmUnreachable is how many consecutive runs must find a machine unreachable before it
// is down.
const confirmUnreachable = 2

// errShuttingDown marks a run cut short by Stop: it produces no result at all, since "the
// scheduler stopped" says nothing about the target.
var errShuttingDown = errors.New("scheduler stopping")

// runProbe runs one check and returns its result.
func (r *Runner) runProbe(ctx context.Context, d *checkDef, st *runState) (results.Result, error) {
	if d.specErr != nil {
		return results.Unknown(results.ClassConfig, "check config unusable: %v", d.specErr), nil
	}
	switch s := d.spec.(type) {
	case probeparse.Spec:
		return r.probeScript(ctx, d, s, st)
	case httpSpec:
		return r.probeHTTP(ctx, d, s)
	case tcpSpec:
		return r.probeTCP(ctx, d, s)
	case backupSpec:
		return r.probeBackup(ctx, d, s)
	case probeparse.Guest:
		return r.probeGuest(ctx, d, s)
	default:
		return results.Unknown(results.ClassConfig, "no probe for kind %q", d.Kind), nil
	}
}

// resolveFailure reports a target that could not be resolved (S8): a missing fact in the
// graph is a configuration problem and says so; a failed lookup says that instead.
func resolveFailure(what string, err error) results.Result {
	if errors.Is(err, remote.ErrResolution) {
		return results.Unknown(results.ClassResolution, "configuration: cannot resolve %s: %v", what, err)
	}
	return results.Unknown(results.ClassResolution, "cannot resolve %s (graph lookup failed): %v", what, err)
}

// execFailure classifies an error of remote.Exec. selfObserved says whether reaching t is
// itself what the check observes (a machine's own probes): then an unreachable machine is
// down. For a guest, a backup or a Proxmox guest status, an unreachable hop only means the
// scheduler cannot see: unknown, with the host named (S3).
func execFailure(ctx context.Context, t remote.Target, err error, selfObserved bool, timeout time.Duration) (results.Result, error) {
	host := t.Slug
	if t.Host != "" {
		host = t.Host
	}
	switch {
	case errors.Is(err, remote.ErrPoolClosed) || errors.Is(ctx.Err(), context.Canceled):
		return results.Result{}, errShuttingDown
	case errors.Is(err, remote.ErrHostKeyChanged):
		return results.Unknown(results.ClassHostKey, "host key of %s (%s) changed; connections are refused until it is re-pinned", host, t.Addr), nil
	case errors.Is(err, remote.ErrAuthFailed):
		return results.Unknown(results.ClassAuth, "%s (%s) refused the scheduler's key as %s", host, t.Addr, t.User), nil
	case errors.Is(err, remote.ErrUnreachable):
		if t.Kind == remote.KindLXC || t.Kind == remote.KindVM {
			return results.Unknown(results.ClassUnreachable, "Proxmox host %s unreachable (%s), so %s cannot be observed", t.Host, t.Addr, t.Slug), nil
		}
		if selfObserved {
			r := results.Observed(results.HealthDown, "unreachable over SSH at %s: %v", t.Addr, err)
			r.Class = results.ClassUnreachable
			return r, nil
		}
		return results.Unknown(results.ClassUnreachable, "%s unreachable (%s)", host, t.Addr), nil
	case errors.Is(err, remote.ErrNoGuestAgent):
		return results.Unknown(results.ClassGuestAgent, "%s: QEMU guest agent not available: %v", t.Slug, err), nil
	case errors.Is(err, remote.ErrGuestExec) && strings.Contains(err.Error(), "is not running"):
		return notRunning(t, "vm"), nil
	case errors.Is(err, context.DeadlineExceeded):
		return results.Unknown(results.ClassTimeout, "no answer from %s within %s", t.Slug, timeout), nil
	default:
		if t.Host != "" {
			return results.Unknown(results.ClassExec, "running the probe on %s through %s failed: %v", t.Slug, t.Host, err), nil
		}
		return results.Unknown(results.ClassExec, "running the probe on %s failed: %v", t.Slug, err), nil
	}
}

// notRunning is a probe that found its guest not running: down, unless the graph says the
// guest is stopped on purpose (S11), when nothing inside it is expected to run either.
func notRunning(t remote.Target, what string) results.Result {
	if t.StoppedOnPurpose {
		return results.Observed(results.HealthUp, "%s %d on %s is stopped on purpose (expected_status: stopped): nothing runs in it",
			what, t.VMID, t.Host)
	}
	return results.Observed(results.HealthDown, "%s %d is not running on %s", what, t.VMID, t.Host)
}

// guestFailure recognises pct's own refusals (the command never ran in the guest).
func guestFailure(t remote.Target, res remote.Result) (results.Result, bool) {
	if t.Kind != remote.KindLXC || res.ExitCode == 0 {
		return results.Result{}, false
	}
	msg := strings.TrimSpace(string(res.Stderr))
	switch {
	case strings.Contains(msg, "not running"):
		return notRunning(t, "container"), true
	case strings.Contains(msg, "does not exist"):
		return results.Observed(results.HealthDown, "container %d does not exist on %s (%s)", t.VMID, t.Host, msg), true
	}
	return results.Result{}, false
}

func (r *Runner) probeScript(ctx context.Context, d *checkDef, s probeparse.Spec, st *runState) (results.Result, error) {
	t, err := r.resolveExec(ctx, d)
	if err != nil {
		return resolveFailure(d.TargetSlug, err), nil
	}
	if t.OS == checks.OSDarwin {
		// The machine the probe lands on decides: a service declares no os of its own.
		s.OS = checks.OSDarwin
	}
	sc, _ := probeparse.Lookup(s.Script) // parseSpec checked it exists
	cmd, err := sc.Command(s)
	if err != nil {
		return results.Unknown(results.ClassConfig, "cannot build the %s probe: %v", probeparse.Describe(s), err), nil
	}
	if t.Kind == remote.KindVM {
		// qm waits for the guest no longer than the check does.
		vmid, timeout := t.VMID, d.Timeout
		t.Wrap = func(c string) (string, error) { return remote.GuestExecCommand(vmid, timeout, c) }
	}
	// A line of the host's probe shell, not a session of its own: a session makes sshd fork
	// and exec the login shell for every check (remote.Pool.Probe).
	var h hop
	var res remote.Result
	if t.Kind == remote.KindLXC || t.Kind == remote.KindVM {
		// A guest's node may no longer be its node (moved.go): wherever it runs, through that
		// node's hop.
		graphT := t
		h = r.onNode(ctx, d, guestRef{slug: t.Slug, graphHost: t.Host, vmid: t.VMID, kind: t.Kind}, func(host string) (remote.Result, error) {
			nt, err := r.guestVia(ctx, graphT, host)
			if err != nil {
				return remote.Result{}, err
			}
			t = nt
			return r.ssh.Probe(ctx, nt, cmd)
		})
		if out, ok := movedFailure(h); ok {
			return out, nil
		}
		res, err = h.res, h.err
	} else {
		res, err = r.ssh.Probe(ctx, t, cmd)
	}
	if err != nil {
		r.forgetOnFailure(execKey(d.TargetID), err)
		out, ferr := execFailure(ctx, t, err, t.Slug == d.TargetSlug, d.Timeout)
		if ferr == nil && out.Health == results.HealthDown && out.Class == results.ClassUnreachable {
			st.mu.Lock()
			st.unreachable++
			first := st.unreachable < confirmUnreachable
			st.mu.Unlock()
			if first {
				// Down only when confirmed by the next run: a single failed dial is as
				// likely a busy host or a lost packet as a dead machine.
				out = results.Unknown(results.ClassUnreachable, "%s (once so far: down if the next attempt fails too)", out.Reason)
			}
		}
		noteMove(&out, h)
		return out, ferr
	}
	st.mu.Lock()
	st.unreachable = 0
	st.mu.Unlock()
	var out results.Result
	if gr, ok := guestFailure(t, res); ok {
		out = gr
	} else if res.ExitCode != 0 && !sc.AnswersWithExit {
		out = results.Unknown(results.ClassProbe, "%s probe exited %d: %s", probeparse.Describe(s), res.ExitCode, probeparse.Clip(string(res.Stderr), 300))
	} else {
		out = sc.Parse(s, string(res.Stdout), res.ExitCode, &st.parse)
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
	noteMove(&out, h)
	return out, nil
}

// guestVia is guest target t reached through the proxmox-host host instead of its own: the
// same guest, vmid and wrapping, on that node's connection.
func (r *Runner) guestVia(ctx context.Context, t remote.Target, host string) (remote.Target, error) {
	if host == t.Host {
		return t, nil
	}
	ht, err := r.resolve(ctx, host)
	if err != nil {
		return remote.Target{}, fmt.Errorf("the node %s runs on now: %w", t.Slug, err)
	}
	t.Addr, t.User, t.Host = ht.Addr, ht.User, host
	return t, nil
}

func (r *Runner) probeGuest(ctx context.Context, d *checkDef, s probeparse.Guest) (results.Result, error) {
	t, err := r.resolve(ctx, s.Host)
	if err != nil {
		return resolveFailure("owning host "+s.Host+" of "+d.TargetSlug, err), nil
	}
	kind := remote.KindLXC
	if s.Kind == checks.GuestVM {
		kind = remote.KindVM
	}
	// The status is asked of the node the guest is on (moved.go).
	h := r.onNode(ctx, d, guestRef{slug: d.TargetSlug, graphHost: s.Host, vmid: s.VMID, kind: kind}, func(host string) (remote.Result, error) {
		nt, err := r.resolve(ctx, host)
		if err != nil {
			return remote.Result{}, fmt.Errorf("the node %s runs on now: %w", d.TargetSlug, err)
		}
		t = nt
		return r.ssh.Probe(ctx, nt, probeparse.GuestCommand(s))
	})
	if out, ok := movedFailure(h); ok {
		return out, nil
	}
	if h.err != nil {
		r.forgetOnFailure(h.host, h.err)
		out, ferr := execFailure(ctx, t, h.err, false, d.Timeout)
		if ferr == nil && out.Class == results.ClassUnreachable {
			out.Reason = fmt.Sprintf("Proxmox host %s unreachable (%s), so the status of %s is unknown", h.host, t.Addr, d.TargetSlug)
		}
		noteMove(&out, h)
		return out, ferr
	}
	s.Host = h.host
	out := probeparse.ParseGuestStatus(s, h.res)
	noteMove(&out, h)
	return out, nil
}

func (r *Runner) probeBackup(ctx context.Context, d *checkDef, s backupSpec) (results.Result, error) {
	path, err := remote.QuoteArg(s.Path)
	if err != nil {
		return results.Unknown(results.ClassConfig, "backup path %q cannot be quoted: %v", s.Path, err), nil
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
		if ferr == nil && out.Class == results.ClassUnreachable {
			out.Reason = fmt.Sprintf("backup holder %s unreachable, so the freshness of %s is unknown", s.Holder, s.Path)
		}
		return out, ferr
	}
	summary := map[string]any{"path": s.Path, "holder": s.Holder, "max_age_minutes": s.MaxAgeMinutes}
	var out results.Result
	fresh := strings.TrimSpace(probeparse.FirstLine(string(res.Stdout)))
	switch {
	case res.ExitCode == 3 && strings.Contains(string(res.Stderr), "no such path"):
		out = results.Observed(results.HealthDown, "%s does not exist on %s", s.Path, s.Holder)
	case res.ExitCode != 0:
		if gr, ok := guestFailure(t, res); ok {
			return results.Unknown(results.ClassUnreachable, "backup holder %s cannot run the check: %s", s.Holder, gr.Reason), nil
		}
		return results.Unknown(results.ClassProbe, "find on %s exited %d: %s", s.Holder, res.ExitCode, probeparse.Clip(string(res.Stderr), 300)), nil
	case fresh != "":
		out = results.Observed(results.HealthUp, "a file under %s was written in the last %d minutes", s.Path, s.MaxAgeMinutes)
		summary["fresh_file"] = fresh
	case strings.TrimSpace(string(res.Stderr)) != "":
		return results.Unknown(results.ClassProbe, "find on %s failed: %s", s.Holder, probeparse.Clip(string(res.Stderr), 300)), nil
	default:
		out = results.Observed(results.HealthDown, "no file under %s written in the last %d minutes", s.Path, s.MaxAgeMinutes)
	}
	freshV := 0.0
	if out.Health == results.HealthUp {
		freshV = 1
	}
	out.Summary = summary
	out.Metrics = []results.Metric{{Name: "backup_fresh", Value: freshV}}
	return out, nil
}

func (r *Runner) probeHTTP(ctx context.Context, d *checkDef, s httpSpec) (results.Result, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return results.Unknown(results.ClassConfig, "url %q: %v", s.URL, err), nil
	}
	header, bad := r.checkHeader(ctx, s.Headers)
	if bad != "" {
		return results.Unknown(results.ClassConfig, "%s", bad), nil
	}
	wantBody := s.BodyMatch != ""
	start := time.Now()
	var ans httpprobe.Answer
	if r.httpc != nil {
		ans, err = r.httpc.GetHeader(ctx, u, header, wantBody)
	} else {
		ans, err = httpprobe.GetWithHeader(ctx, r.http, u, header, wantBody)
	}
	latency := time.Since(start)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return results.Result{}, errShuttingDown
		}
		return netFailure(ctx, s.URL, err, d.Timeout), nil
	}
	ms := float64(latency.Microseconds()) / 1000
	var out results.Result
	switch {
	case ans.Status != s.ExpectStatus:
		out = results.Observed(results.HealthDown, "HTTP %d from %s (expected %d)", ans.Status, s.URL, s.ExpectStatus)
	case s.BodyMatch != "" && !strings.Contains(string(ans.Body), s.BodyMatch):
		out = results.Observed(results.HealthDown, "body of %s does not contain %q", s.URL, s.BodyMatch)
	case latency > d.Timeout/2:
		out = results.Observed(results.HealthDegraded, "HTTP %d in %.0f ms (slower than half the %s timeout)", ans.Status, ms, d.Timeout)
	default:
		out = results.Observed(results.HealthUp, "HTTP %d in %.0f ms", ans.Status, ms)
	}
	out.Summary = map[string]any{"url": s.URL, "status": ans.Status, "latency_ms": probeparse.Round2(ms)}
	out.Metrics = []results.Metric{{Name: "http_latency_ms", Value: probeparse.Round2(ms)}, {Name: "http_status", Value: float64(ans.Status)}}
	return out, nil
}

// checkHeader is the header an http check sends, its `secret:NAME` values resolved now,
// at the point of use; or why it cannot be sent ("header Authorization: secret grafana
// is not set (oikos secret set grafana)"). The reason names the secret, never a value.
func (r *Runner) checkHeader(ctx context.Context, lines []string) (http.Header, string) {
	if len(lines) == 0 {
		return nil, ""
	}
	h := make(http.Header, len(lines))
	for _, l := range lines {
		name, v, _ := checks.SplitHeader(l)
		val, err := r.opts.Secrets.Value(ctx, v)
		if err != nil {
			return nil, fmt.Sprintf("header %s: %v", name, err)
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Sprintf("header %s: the value of %s holds a line break", name, v)
		}
		h.Add(name, val)
	}
	return h, ""
}

func (r *Runner) probeTCP(ctx context.Context, d *checkDef, s tcpSpec) (results.Result, error) {
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	start := time.Now()
	conn, err := r.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return results.Result{}, errShuttingDown
		}
		return netFailure(ctx, addr, err, d.Timeout), nil
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	_ = conn.Close()
	out := results.Observed(results.HealthUp, "%s accepts connections (%.1f ms)", addr, ms)
	out.Summary = map[string]any{"address": addr, "connect_ms": probeparse.Round2(ms)}
	out.Metrics = []results.Metric{{Name: "tcp_connect_ms", Value: probeparse.Round2(ms)}}
	return out, nil
}

// netFailure classifies an http or tcp error: the scheduler's own refusal is configuration
// (S8); anything the network said is an observation of the target.
func netFailure(ctx context.Context, what string, err error, timeout time.Duration) results.Result {
	var tlsErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, httpprobe.ErrDialRefused):
		return results.Unknown(results.ClassConfig, "configuration: %v", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		r := results.Observed(results.HealthDown, "%s: no answer within %s", what, timeout)
		r.Class = results.ClassTimeout
		return r
	case errors.Is(err, syscall.ECONNREFUSED):
		return results.Observed(results.HealthDown, "%s: connection refused", what)
	case errors.As(err, &tlsErr):
		return results.Observed(results.HealthDown, "%s: TLS certificate not trusted: %v", what, tlsErr.Err)
	default:
		return results.Observed(results.HealthDown, "%s: %v", what, err)
	}
}

// checkLabel is the kind (and script) of a check, for metrics labels.
func checkLabel(d *checkDef) string {
	if s, ok := d.spec.(probeparse.Spec); ok && d.Kind == ontology.KindSSHScript {
		return d.Kind + "/" + s.Script
	}
	return d.Kind
}
