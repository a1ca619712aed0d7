package labsim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// handshakeTimeout bounds the SSH handshake so a silent client cannot hold a goroutine.
const handshakeTimeout = 10 * time.Second

// bindHost starts listening for host h on addr and serves it.
func (s *Sim) bindHost(h *hostRT, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("labsim: listen for %s on %s: %w", h.Cfg.Name, addr, err)
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		ln.Close()
		return ErrNotStarted
	}
	h.ln = ln
	h.actual = ln.Addr().String()
	s.mu.Unlock()
	s.wg.Add(1)
	safego.Go(s.log, "labsim-accept-"+h.Cfg.Name, func() {
		defer s.wg.Done()
		s.acceptLoop(h, ln)
	})
	return nil
}

func (s *Sim) acceptLoop(h *hostRT, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn().Err(err).Str("host", h.Cfg.Name).Msg("accept failed")
			}
			return
		}
		s.mu.Lock()
		down, stopped := h.Fault.Down, s.stopped
		s.mu.Unlock()
		if down || stopped {
			c.Close()
			continue
		}
		s.wg.Add(1)
		safego.Go(s.log, "labsim-conn-"+h.Cfg.Name, func() {
			defer s.wg.Done()
			s.serveConn(h, c)
		})
	}
}

// serverConfig builds the SSH server configuration for one connection, reading the host's
// fault at handshake time.
func (s *Sim) serverConfig(h *hostRT) *ssh.ServerConfig {
	s.mu.Lock()
	f := h.Fault
	s.mu.Unlock()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if f.Refusing {
				return nil, errors.New("authentication refused (fault)")
			}
			// Only the machine's login user has the key in its authorized_keys.
			if want := cmp.Or(h.Cfg.User, "root"); meta.User() != want {
				return nil, fmt.Errorf("no authorized key for user %q", meta.User())
			}
			if len(s.opts.AuthorizedKeys) == 0 {
				return &ssh.Permissions{}, nil
			}
			for _, k := range s.opts.AuthorizedKeys {
				if bytes.Equal(k.Marshal(), key.Marshal()) {
					return &ssh.Permissions{}, nil
				}
			}
			return nil, errors.New("key not authorized")
		},
		ServerVersion: "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3",
	}
	if f.ChangedHostKey {
		cfg.AddHostKey(h.altKey)
	} else {
		cfg.AddHostKey(h.key)
	}
	return cfg
}

func (s *Sim) serveConn(h *hostRT, c net.Conn) {
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return
	}
	sc, chans, reqs, err := ssh.NewServerConn(c, s.serverConfig(h))
	if err != nil {
		s.log.Debug().Err(err).Str("host", h.Cfg.Name).Msg("ssh handshake failed")
		return
	}
	defer sc.Close()
	if err := c.SetDeadline(time.Time{}); err != nil {
		return
	}
	s.mu.Lock()
	// A fault set while this connection shook hands must still end it.
	if s.stopped || h.Fault.Down || h.Fault.Refusing {
		s.mu.Unlock()
		return
	}
	h.conns[c] = struct{}{}
	h.total++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(h.conns, c)
		s.mu.Unlock()
	}()
	s.log.Debug().Str("host", h.Cfg.Name).Str("user", sc.User()).Str("remote", c.RemoteAddr().String()).Msg("ssh connection")

	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	// Closing the connection ends every session's context, which stops their commands.
	safego.Go(s.log, "labsim-conn-wait", func() {
		_ = sc.Wait()
		cancel()
	})
	var sessions sync.WaitGroup
	defer sessions.Wait()
	safego.Go(s.log, "labsim-global-requests", func() { ssh.DiscardRequests(reqs) })
	drop := func() { c.Close() }
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels are supported")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		safego.Go(s.log, "labsim-session-"+h.Cfg.Name, func() {
			defer sessions.Done()
			s.serveSession(ctx, h, ch, creqs, drop)
		})
	}
}

func (s *Sim) serveSession(ctx context.Context, h *hostRT, ch ssh.Channel, reqs <-chan *ssh.Request, drop func()) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	execReq := make(chan string, 1)
	// The request loop ends when the client closes the channel: that cancels the command.
	safego.Go(s.log, "labsim-session-requests", func() {
		defer cancel()
		started := false
		for req := range reqs {
			switch req.Type {
			case "exec":
				var payload struct{ Command string }
				if started || ssh.Unmarshal(req.Payload, &payload) != nil {
					_ = req.Reply(false, nil)
					continue
				}
				started = true
				_ = req.Reply(true, nil)
				execReq <- payload.Command
			case "env":
				_ = req.Reply(true, nil)
			default:
				// No pty, shell or subsystem: this lab only runs commands.
				_ = req.Reply(false, nil)
			}
		}
	})
	var cmd string
	select {
	case cmd = <-execReq:
	case <-ctx.Done():
		return
	}
	ctx = lab.WithDrop(ctx, drop)
	code, ok := s.runCommand(ctx, h, ch, cmd, drop)
	if !ok {
		return
	}
	_ = ch.CloseWrite()
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

// runCommand applies the host's fault and runs cmd on the host's machine. ok is false when
// no exit status must be sent (hung, dropped or cancelled).
func (s *Sim) runCommand(ctx context.Context, h *hostRT, ch ssh.Channel, cmd string, drop func()) (int, bool) {
	s.mu.Lock()
	f := h.Fault
	s.mu.Unlock()
	if !f.Wait(ctx) {
		return 0, false
	}
	start := time.Now()
	// A shell that reads its commands from the session (a probe shell) meets the host's
	// faults again before every line, as a command of its own would.
	ctx = shell.WithLineHook(ctx, func(ctx context.Context, run func(context.Context, io.Writer, io.Writer)) bool {
		s.mu.Lock()
		f := h.Fault
		s.mu.Unlock()
		if !f.Wait(ctx) {
			return false
		}
		if f.DisconnectMidOutput {
			var out bytes.Buffer
			run(ctx, &out, io.Discard)
			lab.WriteHalfAndDrop(ch, out.Bytes(), drop)
			return false
		}
		run(ctx, ch, ch.Stderr())
		return true
	})
	stdio := shell.Stdio{Stdin: ch, Stdout: ch, Stderr: ch.Stderr()}
	if f.DisconnectMidOutput {
		var out, errb bytes.Buffer
		stdio.Stdout, stdio.Stderr = &out, &errb
		h.M.Sh.Run(ctx, cmd, stdio)
		lab.WriteHalfAndDrop(ch, out.Bytes(), drop)
		return 0, false
	}
	code := h.M.Sh.Run(ctx, cmd, stdio)
	s.log.Debug().Str("host", h.Cfg.Name).Str("command", cmd).Int("exit", code).Dur("took", time.Since(start)).Msg("exec")
	if ctx.Err() != nil {
		return code, false
	}
	return code, true
}
