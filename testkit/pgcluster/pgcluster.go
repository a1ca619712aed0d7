// Package pgcluster starts a private PostgreSQL cluster from the server binaries installed on
// the machine, for `make up` and for the test harness when OIKOS_DATABASE_URL is unset. The
// cluster listens on a free loopback port, keeps its socket in its own directory and is stopped
// when the owner stops it or dies.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries says that no PostgreSQL server binaries were found, and how to get them.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or under " +
	"/usr/lib/postgresql/*/bin: install the Debian package postgresql-15 (apt-get install postgresql-15) " +
	"or set OIKOS_DATABASE_URL to an existing server")

// Options configure a private cluster.
type Options struct {
	// DataDir holds the cluster. An existing initialised directory is reused (make up keeps its
	// data between runs); an empty or missing one is initialised.
	DataDir string
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Fast trades durability for speed (fsync off): for tests only.
	Fast bool
	// Log receives the server's output; nil discards it.
	Log *os.File
}

// Cluster is a running private server.
type Cluster struct {
	dir     string
	sockDir string
	port    int
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// FindBinaries returns the directory holding initdb and postgres: from PATH first (symlinks
// resolved, since initdb finds its share files next to the real binary), else the newest
// /usr/lib/postgresql/<version>/bin.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(real)
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// credential returns the identity to run the server as: initdb and postgres refuse to run as
// root, so as root the server runs as the unprivileged `postgres` system user.
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root and no `postgres` system user exists to run the server as " +
			"(initdb refuses root): create one with `useradd --system postgres` or install postgresql-15")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

// Start initialises the data directory when needed and starts the server, returning once it
// accepts connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	sockDir := filepath.Join(dir, "run")
	pgdata := filepath.Join(dir, "pgdata")
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		// The unprivileged server user must reach its directories through every parent.
		for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		for _, d := range []string{dir, sockDir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, fmt.Errorf("chown %s: %w", d, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); err != nil {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", pgdata, "-U", "postgres",
			"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w: %s", pgdata, err, strings.TrimSpace(out.String()))
		}
	}
	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-D", pgdata, "-p", strconv.Itoa(port), "-k", sockDir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		"-c", "shared_buffers=128MB", "-c", "log_min_messages=warning"}
	if opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	if opts.Log != nil {
		cmd.Stdout, cmd.Stderr = opts.Log, opts.Log
	}
	// Pdeathsig stops the server when its owner dies without cleaning up (a killed test binary).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{dir: dir, sockDir: sockDir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during start-up: %v (see its log in %s)", c.waitErr, c.dir)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("postgres did not accept connections within %s: %w", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL returns a connection URL for the named database over loopback TCP.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, database)
}

// PID is the postmaster's process id.
func (c *Cluster) PID() int { return c.cmd.Process.Pid }

// Port is the port the server listens on.
func (c *Cluster) Port() int { return c.port }

// Restart stops the server with a fast shutdown and starts it again on the same port: the
// event-bus tests use it to prove that a server restart loses no event.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.stop(syscall.SIGINT, 30*time.Second); err != nil {
		return err
	}
	nc, err := Start(ctx, Options{DataDir: c.dir, Port: c.port, Fast: true})
	if err != nil {
		return err
	}
	*c = *nc
	return nil
}

// Halt stops the server with a fast shutdown and keeps its data directory and port, so
// Resume brings the same cluster back: the outage tests take the database away from
// running daemons with it.
func (c *Cluster) Halt() error { return c.stop(syscall.SIGINT, 30*time.Second) }

// Resume starts a halted server again on the same data directory and port, returning once
// it accepts connections.
func (c *Cluster) Resume(ctx context.Context) error {
	select {
	case <-c.done:
	default:
		return errors.New("pgcluster: the server is running; Halt it first")
	}
	nc, err := Start(ctx, Options{DataDir: c.dir, Port: c.port, Fast: true})
	if err != nil {
		return err
	}
	*c = *nc
	return nil
}

// Stop shuts the server down (fast shutdown, then immediate, then kill) and waits for it.
// It is safe to call more than once.
func (c *Cluster) Stop() error {
	return c.stop(syscall.SIGINT, 20*time.Second)
}

func (c *Cluster) stop(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
		return nil
	case <-time.After(grace):
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
	return errors.New("postgres had to be killed")
}
