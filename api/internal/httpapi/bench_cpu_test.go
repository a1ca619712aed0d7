package httpapi_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// benchWants reports whether the benchmark row named name should run: OIKOS_BENCH_ONLY
// holds comma-separated substrings of row names (for example "blast radius"); unset runs
// every row. Measuring one read then takes seconds instead of the whole benchmark.
func benchWants(name string) bool {
	only := os.Getenv("OIKOS_BENCH_ONLY")
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// cpuMeter reads the CPU time (user + system) of this process and of the PostgreSQL server
// the pool talks to, so a benchmark can report CPU per request split between the api (and
// the load generator, which shares its process) and Postgres. On a shared 2-core machine
// CPU per request is steadier than wall-clock latency.
type cpuMeter struct {
	postmaster int
}

// newCPUMeter finds the postmaster as the parent of a pool backend. It returns a meter
// without Postgres figures when the server is not a local process this user can read.
func newCPUMeter(t testing.TB, pool *pgxpool.Pool) *cpuMeter {
	t.Helper()
	var pid int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	st, err := procStat(pid)
	if err != nil {
		return &cpuMeter{}
	}
	return &cpuMeter{postmaster: st.ppid}
}

// cpuSample: pg is the CPU of the backends (the sessions serving queries); pgOther that of
// the postmaster and its background processes (autovacuum, checkpointer, ...), reported
// apart because a vacuum of the freshly loaded fleet can land in any measurement.
type cpuSample struct{ self, pg, pgOther time.Duration }

func (m *cpuMeter) sample() cpuSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if m.postmaster == 0 {
		return s
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return s
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procStat(pid)
		if err != nil || (pid != m.postmaster && st.ppid != m.postmaster) {
			continue
		}
		if pid != m.postmaster && isBackend(pid) {
			s.pg += st.cpu
		} else {
			s.pgOther += st.cpu
		}
	}
	return s
}

// perOp formats the CPU used between two samples divided by n operations.
func (m *cpuMeter) perOp(a, b cpuSample, n int) string {
	if n == 0 {
		return ""
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Microseconds())/float64(n)) }
	out := "CPU/request: api+loadgen " + us(b.self-a.self)
	if m.postmaster != 0 {
		out += ", postgres " + us(b.pg-a.pg) + " (+ " + us(b.pgOther-a.pgOther) + " background)"
	}
	return out
}

// isBackend reports whether a postgres child process is a client backend: its title is
// "postgres: <user> <database> <client address> ..." (background processes name
// themselves: "postgres: autovacuum worker", "postgres: checkpointer", ...).
func isBackend(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return strings.Contains(string(raw), "127.0.0.1") || strings.Contains(string(raw), "[local]")
}

type procStatus struct {
	ppid int
	cpu  time.Duration
}

// procStat reads the parent pid and utime+stime of a process from /proc/<pid>/stat.
func procStat(pid int) (procStatus, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatus{}, err
	}
	// The command name (field 2) may contain spaces; fields after it are space-separated.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStatus{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return procStatus{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stm, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return procStatus{ppid: ppid, cpu: time.Duration(ut+stm) * time.Second / hz}, nil
}
