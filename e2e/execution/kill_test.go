package execution_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
)

// Environment of the helper process that plays a scheduler to be killed.
const (
	envHelper  = "OIKOS_E2E_HELPER"
	envDBURL   = "OIKOS_E2E_DATABASE_URL"
	envKeyFile = "OIKOS_E2E_SSH_KEY_FILE"
	envAddrs   = "OIKOS_E2E_ADDRS" // JSON: declared address → where labsim listens
)

// TestHelperScheduler is not a test: re-executed by TestKill9MidRunIsInterruptedNeverRerun
// with envHelper set, it runs an executor against the parent's database and simulator until
// it is killed (or its stdin closes, so it never outlives the parent).
func TestHelperScheduler(t *testing.T) {
	if os.Getenv(envHelper) != "executor" {
		return
	}
	ctx := context.Background()
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	pool, err := pgxpool.New(ctx, os.Getenv(envDBURL))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	signer, err := remote.LoadSigner(os.Getenv(envKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	var addrs map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(envAddrs)), &addrs); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	sshPool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: app.NewHostKeys(pool, log), Logger: log,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			actual, ok := addrs[addr]
			if !ok {
				return nil, fmt.Errorf("helper: %s is not a simulated host", addr)
			}
			return d.DialContext(ctx, network, actual)
		}})
	defer sshPool.Close()
	cfg, err := pgx.ParseConfig(os.Getenv(envDBURL))
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: log})
	ex := app.NewExecutor(app.ExecutorOptions{Pool: pool, SSH: sshPool, Fleet: app.NewFleet(pool, app.FleetOptions{Logger: log}),
		Notifier: notifier, Logger: log, SchedulerID: "doomed-scheduler"})
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer notifier.Stop()
	if err := ex.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer ex.Stop()
	fmt.Println("helper scheduler ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// A scheduler killed with SIGKILL mid-run leaves its execution running; the next scheduler
// marks it interrupted at start and never runs it again — the command (which appends to a
// file inside the guest) has run exactly once.
func TestKill9MidRunIsInterruptedNeverRerun(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{noExecutor: true})
	addrs := map[string]string{}
	for _, h := range l.sim.Snapshot().Hosts {
		addrs[h.Addr] = h.ActualAddr
	}
	addrJSON, err := json.Marshal(addrs)
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperScheduler$", "-test.count=1")
	helper.Env = append(os.Environ(), envHelper+"=executor", envDBURL+"="+l.db.URL, envKeyFile+"="+l.keyFile,
		envAddrs+"="+string(addrJSON))
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	helper.Stderr = &stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = helper.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = helper.Process.Kill()
		<-exited
	})

	id := l.submit(execSpec{target: "lxc:jellyfin", command: "echo ran >> /root/ran-marker; echo started; sleep 60", timeout: 120})
	// The command has appended its line once "started" is in the log.
	l.waitFor(id, 60*time.Second, func(r execRow) bool {
		out, _ := l.logs(id)
		return r.Status == "running" && strings.Contains(string(out), "started")
	})
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("helper did not die")
	}
	if r := l.row(id); r.Status != "running" || r.ClaimedBy != "doomed-scheduler" {
		t.Fatalf("after kill -9: %+v (helper stderr: %s)", r, stderr.String())
	}

	l.startExecutor("scheduler-b", 0)
	r := l.row(id)
	if r.Status != "interrupted" || r.Finished == nil || string(r.Output) != "started\n" ||
		!strings.Contains(r.Error, "doomed-scheduler") || !strings.Contains(r.Error, "not re-run") {
		t.Fatalf("after restart: %+v (output %q)", r, r.Output)
	}
	// Later work runs; the interrupted one is never picked up again.
	_, check := l.runOnce(execSpec{target: "lxc:jellyfin", command: "cat /root/ran-marker"}, 30*time.Second)
	if check.Status != "completed" || string(check.Output) != "ran\n" {
		t.Errorf("marker = %q (%s %s): the command must have run exactly once", check.Output, check.Status, check.Error)
	}
	if got := joined(l.events(id)); got != "execution.started,execution.interrupted" {
		t.Errorf("events = %s", got)
	}
	if r := l.row(id); r.Status != "interrupted" || r.ClaimedBy != "doomed-scheduler" {
		t.Errorf("interrupted execution touched again: %+v", r)
	}
}
