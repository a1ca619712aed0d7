package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// This file is a tiny SSH server for the pool's tests. It never executes a
// host program: an exec request is answered from a table of canned replies or,
// when the server has a shell (setShell), interpreted by the lab simulator's
// shell over a throw-away sandbox, which runs only Go programs (as labsim does).

// canned is the server's answer to one exec request.
type canned struct {
	stdout, stderr string
	code           int
	noExitStatus   bool            // close the channel without an exit-status
	hang           bool            // after the output, block until the client closes the session
	gate           <-chan struct{} // after stdout, wait for this before stdoutAfter
	stdoutAfter    string
	entered        chan<- struct{} // told when the command starts
}

// testServer serves canned answers on a loopback listener.
type testServer struct {
	t       testing.TB
	ln      net.Listener
	addr    string
	answers map[string]canned

	mu         sync.Mutex
	cfg        *ssh.ServerConfig
	hostKey    ssh.Signer
	conns      map[net.Conn]struct{}
	accepted   int
	commands   []string
	active     int
	maxActive  int
	frozen     chan struct{} // non-nil while global requests go unanswered
	keepalives chan struct{} // told on every keepalive, if set
	shell      *shell.Shell  // interprets commands with no canned answer, if set
	sessions   int           // session channels opened
	sessionsC  chan struct{} // told on every session opened, if set
	signals    []string      // signal requests received
	signalsC   chan string   // told of every signal request, if set
	wg         sync.WaitGroup
	done       chan struct{}
}

func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startServer listens on 127.0.0.1 and accepts only clientKey.
func startServer(t testing.TB, clientKey ssh.PublicKey, answers map[string]canned) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{
		t:       t,
		ln:      ln,
		addr:    ln.Addr().String(),
		answers: answers,
		conns:   map[net.Conn]struct{}{},
		done:    make(chan struct{}),
	}
	s.setHostKey(newSigner(t), clientKey)
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.close)
	return s
}

// setHostKey changes the key presented to new connections.
func (s *testServer) setHostKey(key ssh.Signer, clientKey ssh.PublicKey) {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if clientKey != nil && string(k.Marshal()) == string(clientKey.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(key)
	s.mu.Lock()
	s.cfg, s.hostKey = cfg, key
	s.mu.Unlock()
}

func (s *testServer) close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	_ = s.ln.Close()
	s.dropAll()
	s.wg.Wait()
}

// dropAll closes every server-side connection, as a restarting sshd would.
func (s *testServer) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

func (s *testServer) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		s.frozen = make(chan struct{})
	}
}

func (s *testServer) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		close(s.frozen)
		s.frozen = nil
	}
}

// setShell makes the server interpret commands it has no canned answer for.
func (s *testServer) setShell(sh *shell.Shell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shell = sh
}

// notifySessions makes the server tell ch (without blocking) of every
// session opened.
func (s *testServer) notifySessions(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionsC = ch
}

// notifySignals makes the server tell ch (without blocking) of every signal
// request.
func (s *testServer) notifySignals(ch chan string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signalsC = ch
}

// sessionStats reports the session channels opened and the signals received.
func (s *testServer) sessionStats() (sessions int, signals []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, append([]string(nil), s.signals...)
}

func (s *testServer) stats() (accepted, maxActive int, commands []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted, s.maxActive, append([]string(nil), s.commands...)
}

func (s *testServer) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[nc] = struct{}{}
		s.accepted++
		cfg := s.cfg
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(nc, cfg)
	}
}

func (s *testServer) serveConn(nc net.Conn, cfg *ssh.ServerConfig) {
	defer s.wg.Done()
	defer func() {
		_ = nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	connDone := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = sc.Wait()
		close(connDone)
	}()
	s.wg.Add(1)
	go s.globalRequests(reqs, connDone)
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nch.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go s.session(ch, chReqs)
	}
}

// globalRequests answers keepalives with a failure reply, as OpenSSH does,
// unless the server is frozen, when it answers nothing.
func (s *testServer) globalRequests(reqs <-chan *ssh.Request, connDone <-chan struct{}) {
	defer s.wg.Done()
	for r := range reqs {
		s.mu.Lock()
		frozen, ka := s.frozen, s.keepalives
		s.mu.Unlock()
		if frozen != nil {
			select {
			case <-frozen:
			case <-connDone:
			case <-s.done:
			}
		}
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
		if ka != nil && r.Type == "keepalive@openssh.com" {
			select {
			case ka <- struct{}{}:
			default:
			}
		}
	}
}

func (s *testServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer s.wg.Done()
	s.mu.Lock()
	s.sessions++
	notify := s.sessionsC
	s.mu.Unlock()
	if notify != nil {
		select {
		case notify <- struct{}{}:
		default:
		}
	}
	closed := make(chan struct{})
	// killed is closed on a KILL signal, as if the command's process died.
	killed := make(chan struct{})
	var once, killOnce sync.Once
	for req := range reqs {
		switch req.Type {
		case "exec":
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			once.Do(func() {
				s.wg.Add(1)
				go s.exec(ch, p.Command, closed, killed)
			})
		case "signal":
			var p struct{ Signal string }
			if ssh.Unmarshal(req.Payload, &p) == nil {
				s.mu.Lock()
				s.signals = append(s.signals, p.Signal)
				notify := s.signalsC
				s.mu.Unlock()
				if notify != nil {
					select {
					case notify <- p.Signal:
					default:
					}
				}
				if p.Signal == "KILL" {
					killOnce.Do(func() { close(killed) })
				}
			}
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
	// The request stream ends when the client closed the channel.
	close(closed)
}

func (s *testServer) exec(ch ssh.Channel, cmd string, closed, killed <-chan struct{}) {
	defer s.wg.Done()
	defer ch.Close()
	s.mu.Lock()
	s.commands = append(s.commands, cmd)
	s.active++
	if s.active > s.maxActive {
		s.maxActive = s.active
	}
	sh := s.shell
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()

	a, ok := s.answers[cmd]
	if !ok && sh != nil {
		s.interpret(ch, sh, cmd, closed, killed)
		return
	}
	if !ok {
		a = canned{stderr: "sh: 1: " + cmd + ": not found\n", code: 127}
	}
	if a.entered != nil {
		a.entered <- struct{}{}
	}
	_, _ = io.WriteString(ch, a.stdout)
	_, _ = io.WriteString(ch.Stderr(), a.stderr)
	if a.gate != nil {
		select {
		case <-a.gate:
		case <-closed:
			return
		case <-s.done:
			return
		}
		_, _ = io.WriteString(ch, a.stdoutAfter)
	}
	if a.hang {
		select {
		case <-closed:
		case <-s.done:
		}
		return
	}
	if a.noExitStatus {
		return
	}
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(a.code)}))
}

// interpret runs cmd with the lab shell until it ends, the client closes the
// session or a KILL signal arrives (then, like a killed process, it reports
// no exit status).
func (s *testServer) interpret(ch ssh.Channel, sh *shell.Shell, cmd string, closed, killed <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-closed:
		case <-killed:
		case <-s.done:
		case <-stop:
		}
		cancel()
	}()
	code := sh.Run(ctx, cmd, shell.Stdio{Stdin: ch, Stdout: ch, Stderr: ch.Stderr()})
	if ctx.Err() != nil {
		return
	}
	_ = ch.CloseWrite()
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

// labShell is a lab machine's shell over an empty sandbox in a temporary
// directory, with the simulator's coreutils (cat, sleep, sh, …) as its only
// programs.
func labShell(t testing.TB) (*shell.Shell, string) {
	t.Helper()
	dir := t.TempDir()
	fsys, err := sandbox.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fsys.Close() })
	reg := shell.Registry{}
	coreutils.Register(reg)
	return &shell.Shell{FS: fsys, Programs: reg, Home: "/"}, dir
}
