package proxmox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// qemuConfig is a VM's configuration as qm config shows it; the caller holds pt.lab.Mu.
func (pt *Tools) qemuConfig(g *lab.Guest) map[string]string {
	mem, cores := positiveOr(g.Cfg.MemoryMB, 2048), positiveOr(g.Cfg.Cores, 2)
	kv := map[string]string{
		"boot": "order=scsi0;net0", "cores": strconv.Itoa(cores), "cpu": "x86-64-v2-AES", "memory": strconv.Itoa(mem),
		"name": g.DisplayName(), "net0": g.Net0, "numa": "0", "ostype": g.OSType, "scsihw": "virtio-scsi-single",
		"scsi0":   fmt.Sprintf("%s:vm-%d-disk-0,iothread=1,size=%dG", g.Storage, g.Cfg.VMID, vmDiskGB(g)),
		"sockets": "1",
	}
	if g.Cfg.GuestAgent {
		kv["agent"] = "1"
	}
	bootAndTags(g, kv)
	return kv
}

func (pt *Tools) qm(ctx context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "qm")
	}
	sub := inv.Args[1]
	rest := inv.Args[2:]
	h := pt.lab.Host(host)
	node := h.Cfg.Node
	if sub == "list" {
		pt.lab.Mu.Lock()
		var rows []qmRow
		for _, g := range h.SortedGuests() {
			if g.Cfg.Kind != fleet.GuestVM {
				continue
			}
			rows = append(rows, qmRow{VMID: g.Cfg.VMID, Name: g.DisplayName(), Status: g.Cfg.Status, MemMB: positiveOr(g.Cfg.MemoryMB, 2048),
				BootDiskGB: float64(vmDiskGB(g)), PID: g.PID})
		}
		pt.lab.Mu.Unlock()
		io.WriteString(inv.Stdout, formatQmList(rows))
		return 0
	}
	if sub == "migrate" {
		return pt.migrateCmd(inv, host, fleet.GuestVM, rest)
	}
	if sub == "guest" {
		if len(rest) == 0 || rest[0] != "exec" {
			fmt.Fprintln(inv.Stderr, "ERROR: unknown command 'qm guest'")
			return exitPVE
		}
		return pt.qmGuestExec(ctx, inv, host, rest[1:])
	}
	switch sub {
	case "status", "config", "start", "stop", "shutdown", "reboot", "destroy", "reset":
	default:
		return unknownCommand(inv, "qm", sub)
	}
	a := parsePVEArgs(rest, map[string]bool{"verbose": true, "purge": true, "skiplock": true, "forceStop": true})
	vmid, ok := vmidArg(inv, "qm", sub, a)
	if !ok {
		return exitPVE
	}
	_, g, ok := pt.guest(host, vmid, fleet.GuestVM)
	if !ok {
		return noConfig(inv, node, vmid, fleet.GuestVM)
	}
	now := pt.lab.Now()
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	switch sub {
	case "status":
		st := g.Cfg.Status
		if st == fleet.StatusRunning && !g.SeenRunning(h.Fault, strings.Join(inv.Args, " ")) {
			st = fleet.StatusStopped
		}
		fmt.Fprintf(inv.Stdout, "status: %s\n", st)
	case "config":
		io.WriteString(inv.Stdout, configLines(pt.qemuConfig(g)))
	case "start":
		if g.Running() {
			fmt.Fprintf(inv.Stderr, "VM %d already running\n", vmid)
			return exitPVE
		}
		g.SetRunning(true, now)
	case "stop", "shutdown":
		if !g.Running() {
			if sub == "stop" {
				return 0
			}
			fmt.Fprintf(inv.Stderr, "VM %d not running\n", vmid)
			return exitPVE
		}
		g.SetRunning(false, now)
	case "reboot", "reset":
		if !g.Running() {
			fmt.Fprintf(inv.Stderr, "VM %d not running\n", vmid)
			return exitPVE
		}
		g.SetRunning(false, now)
		g.SetRunning(true, now)
	case "destroy":
		pt.lab.Mu.Unlock()
		code := pt.destroyGuest(inv, h, g, fleet.GuestVM)
		pt.lab.Mu.Lock()
		return code
	}
	return 0
}

func (pt *Tools) qmGuestExec(ctx context.Context, inv *shell.Invocation, host string, args []string) int {
	a := parsePVEArgs(args, nil)
	if len(a.pos) == 0 {
		fmt.Fprint(inv.Stderr, "400 not enough arguments\nqm guest exec <vmid> [<extra-args>] [OPTIONS]\n")
		return exitPVE
	}
	vmid, ok := parseVMID(inv, a.pos[0])
	if !ok {
		return exitPVE
	}
	argv := a.extra
	if !a.dash {
		argv = a.pos[1:]
	}
	timeout := 30 * time.Second
	if v, ok := a.opts["timeout"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\ntimeout: type check ('integer') failed - got '%s'\n", v)
			return exitPVE
		}
		timeout = time.Duration(n) * time.Second
	}
	passStdin := false
	if v, ok := a.opts["pass-stdin"]; ok {
		passStdin, _ = pveBool(v)
	}
	if v, ok := a.opts["synchronous"]; ok {
		if sync, _ := pveBool(v); !sync {
			timeout = -1
		}
	}
	h, g, ok := pt.guest(host, vmid, fleet.GuestVM)
	if !ok {
		return noConfig(inv, h.Cfg.Node, vmid, fleet.GuestVM)
	}
	pt.lab.Mu.Lock()
	running, agent, agentDown := g.SeenRunning(h.Fault, strings.Join(inv.Args, " ")), g.Cfg.GuestAgent, g.Fault.GuestAgentDown
	pt.lab.Mu.Unlock()
	switch {
	case !running:
		fmt.Fprintf(inv.Stderr, "VM %d is not running\n", vmid)
		return exitPVE
	case !agent:
		fmt.Fprintln(inv.Stderr, "No QEMU guest agent configured")
		return exitPVE
	case agentDown:
		fmt.Fprintln(inv.Stderr, "QEMU guest agent is not running")
		return exitPVE
	case len(argv) == 0:
		fmt.Fprint(inv.Stderr, "400 Parameter verification failed.\nextra-args: No command given\n")
		return exitPVE
	}
	f, ok := pt.enterGuest(ctx, g)
	if !ok {
		return 130
	}
	if _, found := g.M.Sh.Lookup(argv[0], nil, "/"); !found {
		fmt.Fprintf(inv.Stderr, "Agent error: Failed to execute child process “%s” (No such file or directory)\n", argv[0])
		return exitPVE
	}
	var stdin io.Reader = strings.NewReader("")
	if passStdin {
		data, err := io.ReadAll(io.LimitReader(inv.Stdin, 1<<20+1))
		if err != nil || len(data) > 1<<20 {
			fmt.Fprintln(inv.Stderr, "'input-data' (STDIN) is limited to 1 MiB, aborting")
			return exitPVE
		}
		stdin = bytes.NewReader(data)
	}
	// The agent runs the command on its own: it keeps going after qm gives up waiting.
	var out, errb cappedBuffer
	done := make(chan int, 1)
	pid := 1000 + vmid%9000
	pt.spawn(func(ctx context.Context) {
		defer func() {
			if r := recover(); r != nil {
				pt.log.Error().Interface("panic", r).Msg("guest exec panicked")
				done <- 255
			}
		}()
		done <- g.M.Sh.RunArgv(ctx, argv, shell.Stdio{Stdin: stdin, Stdout: &out, Stderr: &errb})
	})
	var waitC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		waitC = t.C
	} else if timeout < 0 {
		io.WriteString(inv.Stdout, formatGuestExecPid(pid))
		return 0
	}
	var code int
	select {
	case code = <-done:
	case <-waitC:
		fmt.Fprintln(inv.Stderr, "timeout reached, returning pid")
		io.WriteString(inv.Stdout, formatGuestExecPid(pid))
		return 0
	case <-ctx.Done():
		return 130
	}
	res := guestExecResult{ExitCode: code, Stdout: out.Bytes(), Stderr: errb.Bytes(), OutTruncated: out.truncated, ErrTruncated: errb.truncated}
	text := formatGuestExec(res)
	if f.DisconnectMidOutput {
		lab.WriteHalfAndDrop(inv.Stdout, []byte(text), func() { lab.DropConn(ctx) })
		return exitPVE
	}
	io.WriteString(inv.Stdout, text)
	return 0
}

// cappedBuffer collects output up to the guest agent's limit. It is safe for the concurrent
// writes a command's pipeline may make.
type cappedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := maxAgentBytes - c.buf.Len()
	if room <= 0 {
		c.truncated = true
		return len(p), nil
	}
	if len(p) > room {
		c.buf.Write(p[:room])
		c.truncated = true
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *cappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}
