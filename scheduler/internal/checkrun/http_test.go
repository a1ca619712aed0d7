package checkrun

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/httpprobe"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/netmap"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

// Stopping the runner ends an exchange in flight: no result (the scheduler stopping says
// nothing about the target), and the probe returns at once rather than at its timeout.
func TestHTTPCancelledMidRequest(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(func() { close(release) })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	ctx, cancel := context.WithCancel(context.Background())
	type outcome struct {
		res results.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.runProbe(ctx, httpDef("http://svc.lab.example:"+port+"/", 200, "", time.Hour), nil)
		done <- outcome{res, err}
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the server")
	}
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, errShuttingDown) {
			t.Errorf("cancelled probe: %+v %v, want errShuttingDown", o.res, o.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the probe did not return after cancellation")
	}
}

// End to end: an https check of a route, through the runner's own transport and dialer,
// reaches labsim's HTTPS ingress with the name map of the env form and the CA file labsim
// wrote. (In make up the map is "*.lab.example=127.0.20.1:8443"; here the ingress is on a
// free loopback port.)
func TestHTTPSCheckReachesLabsimIngress(t *testing.T) {
	t.Parallel()
	fleet := labsim.Fleet{
		Hosts: []labsim.Host{{
			Name: "atlas", Kind: labsim.KindProxmox, Addr: "127.0.10.1:2222",
			Guests: []labsim.Guest{
				{VMID: 101, Kind: labsim.GuestLXC, Name: "x", Hostname: "x", Status: labsim.StatusRunning},
				{VMID: 102, Kind: labsim.GuestLXC, Name: "y", Hostname: "y", Status: labsim.StatusStopped},
			},
		}},
		Routes: map[string]labsim.RouteTarget{
			"x.lab.example": {Host: "atlas", VMID: 101},
			"y.lab.example": {Host: "atlas", VMID: 102},
		},
	}
	sim, err := labsim.New(fleet, labsim.Options{StateDir: t.TempDir(), Logger: zerolog.Nop(),
		Listen: func(string) string { return "127.0.0.1:0" }})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	_, port, err := net.SplitHostPort(sim.HTTPSAddr())
	if err != nil {
		t.Fatal(err)
	}
	names, err := netmap.Parse("*.lab.example=127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := httpprobe.LoadCAFile(sim.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: names, TLSConfig: tlsConfig}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	probe := func(r *Runner, url, match string) results.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := r.runProbe(ctx, httpDef(url, 200, match, 10*time.Second), nil)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		return res
	}
	if res := probe(r, "https://x.lab.example/", "ok x.lab.example"); res.Health != results.HealthUp || !res.Observed {
		t.Fatalf("https route of a running guest: %+v", res)
	}
	if res := probe(r, "https://y.lab.example/", ""); res.Health != results.HealthDown || !strings.Contains(res.Reason, "HTTP 502") {
		t.Fatalf("https route of a stopped guest: %+v", res)
	}
	if err := sim.SetGuestStatus("atlas", 101, false); err != nil {
		t.Fatal(err)
	}
	if res := probe(r, "https://x.lab.example/", ""); res.Health != results.HealthDown || !strings.Contains(res.Reason, "HTTP 502") {
		t.Fatalf("after stopping the guest: %+v", res)
	}

	// Without the CA file the same check cannot trust the ingress.
	untrusting := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: names}, &blockingExec{})
	t.Cleanup(func() { untrusting.closeIdleHTTP(0) })
	if res := probe(untrusting, "https://x.lab.example/", ""); res.Health == results.HealthUp || !strings.Contains(res.Reason, "certificate") {
		t.Fatalf("without the CA file: %+v", res)
	}
}

// httpServer is an httptest server closed when the test ends.
func httpServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
