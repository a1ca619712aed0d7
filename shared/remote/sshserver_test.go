package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// This file is a tiny SSH server for the pool's tests. It never executes
// anything: every exec request is answered from a table of canned replies.

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
	closed := make(chan struct{})
	var once sync.Once
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
				go s.exec(ch, p.Command, closed)
			})
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
	// The request stream ends when the client closed the channel.
	close(closed)
}

func (s *testServer) exec(ch ssh.Channel, cmd string, closed <-chan struct{}) {
	defer s.wg.Done()
	defer ch.Close()
	s.mu.Lock()
	s.commands = append(s.commands, cmd)
	s.active++
	if s.active > s.maxActive {
		s.maxActive = s.active
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()

	a, ok := s.answers[cmd]
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
