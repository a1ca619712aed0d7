// Package proxmox holds the simulated Proxmox VE tools of a lab node — pct, qm, pveam,
// pvesh and pveversion — which read and change the lab's guests (labsim/lab) and print
// exactly what docs/proxmox.md describes (format.go renders the byte-exact output).
//
// One file per program (pct.go, qm.go, pveam.go, pvesh.go); a new program is a file of its
// own and an entry in Tools.Programs.
package proxmox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Proxmox CLI exit statuses: a `die` in the Perl tools exits 255, except when a missing
// config file set errno to ENOENT first (2).
const (
	exitPVE       = 255
	exitNoConfig  = 2
	maxAgentBytes = 16 << 20 // qemu-ga truncates captured output at 16 MiB
)

// storages are the storage ids every simulated node has.
var storages = map[string]bool{"local": true, "local-lvm": true, "local-zfs": true}

// Tools are the Proxmox programs of every node of one lab.
type Tools struct {
	lab       *lab.Lab
	templates []template
	log       zerolog.Logger
	spawn     func(fn func(ctx context.Context))
}

// New prepares the tools of l's Proxmox nodes. extraTemplates are container template volids
// every node's cache holds beside the built-in ones (fleet.Fleet.Templates). spawn runs a
// function on its own goroutine until the lab stops, with the lab's context (the guest
// agent's commands outlive the qm that started them).
func New(l *lab.Lab, extraTemplates []string, log zerolog.Logger, spawn func(fn func(ctx context.Context))) *Tools {
	return &Tools{lab: l, templates: templateCache(extraTemplates), log: log, spawn: spawn}
}

// Programs are the Proxmox programs of the node host (a host of the lab, looked up when a
// program runs).
func (pt *Tools) Programs(host string) shell.Registry {
	return shell.Registry{
		"pct":   func(ctx context.Context, inv *shell.Invocation) int { return pt.pct(ctx, inv, host) },
		"qm":    func(ctx context.Context, inv *shell.Invocation) int { return pt.qm(ctx, inv, host) },
		"pveam": func(ctx context.Context, inv *shell.Invocation) int { return pt.pveam(ctx, inv, host) },
		"pvesh": func(ctx context.Context, inv *shell.Invocation) int { return pt.pvesh(ctx, inv, host) },
		"pveversion": func(_ context.Context, inv *shell.Invocation) int {
			// What PVE 8.3 prints; -v (the package list) is not simulated.
			fmt.Fprintln(inv.Stdout, "pve-manager/8.3.0/c1689ccb1065a83b (running kernel: 6.8.12-4-pve)")
			return 0
		},
	}
}

// pveArgs splits a PVE command line into positional arguments, --options and the extra
// arguments after "--".
type pveArgs struct {
	pos   []string
	opts  map[string]string
	order []string
	extra []string
	dash  bool
}

func parsePVEArgs(args []string, flags map[string]bool) pveArgs {
	a := pveArgs{opts: map[string]string{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			a.dash = true
			a.extra = append([]string(nil), args[i+1:]...)
			return a
		}
		if strings.HasPrefix(arg, "-") && len(arg) > 1 {
			name := strings.TrimLeft(arg, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				a.opts[k] = v
				a.order = append(a.order, k)
				continue
			}
			if flags[name] || i+1 >= len(args) {
				a.opts[name] = "1"
				a.order = append(a.order, name)
				continue
			}
			i++
			a.opts[name] = args[i]
			a.order = append(a.order, name)
			continue
		}
		a.pos = append(a.pos, arg)
	}
	return a
}

func pveBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return true, true
	case "0", "no", "off", "false":
		return false, true
	}
	return false, false
}

// guest looks up a guest of kind on host; the caller holds no lock.
func (pt *Tools) guest(host string, vmid int, kind string) (*lab.Host, *lab.Guest, bool) {
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	h := pt.lab.Host(host)
	g, ok := h.Guests[vmid]
	if !ok || g.Cfg.Kind != kind {
		return h, nil, false
	}
	return h, g, true
}

// noCommand answers a Proxmox CLI called without a sub-command.
func noCommand(inv *shell.Invocation, tool string) int {
	fmt.Fprintf(inv.Stderr, "ERROR: no command specified\nUSAGE: %s <COMMAND> [ARGS] [OPTIONS]\n", tool)
	return exitPVE
}

// unknownCommand answers a sub-command the tool does not have.
func unknownCommand(inv *shell.Invocation, tool, sub string) int {
	fmt.Fprintf(inv.Stderr, "ERROR: unknown command '%s %s'\nUSAGE: %s <COMMAND> [ARGS] [OPTIONS]\n", tool, sub, tool)
	return exitPVE
}

// vmidArg reads the vmid operand of `<tool> <sub> <vmid>`; false (with the message printed)
// when it is missing or malformed.
func vmidArg(inv *shell.Invocation, tool, sub string, a pveArgs) (int, bool) {
	if len(a.pos) == 0 {
		fmt.Fprintf(inv.Stderr, "400 not enough arguments\n%s %s <vmid>\n", tool, sub)
		return 0, false
	}
	return parseVMID(inv, a.pos[0])
}

func parseVMID(inv *shell.Invocation, v string) (int, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 || n > 999999999 {
		fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\nvmid: invalid format - value does not look like a valid VM ID\n")
		return 0, false
	}
	return n, true
}

func noConfig(inv *shell.Invocation, node string, vmid int, kind string) int {
	dir := "lxc"
	if kind == fleet.GuestVM {
		dir = "qemu-server"
	}
	fmt.Fprintf(inv.Stderr, "Configuration file 'nodes/%s/%s/%d.conf' does not exist\n", node, dir, vmid)
	return exitNoConfig
}

// enterGuest applies a guest's fault to a command entering it. It returns false when the
// command must not run (hung until the session ended, or the connection was dropped).
func (pt *Tools) enterGuest(ctx context.Context, g *lab.Guest) (lab.Fault, bool) {
	pt.lab.Mu.Lock()
	f := g.Fault
	pt.lab.Mu.Unlock()
	return f, f.Wait(ctx)
}

// bootAndTags adds what both config formats show only when set.
func bootAndTags(g *lab.Guest, kv map[string]string) {
	if g.Cfg.OnBoot {
		kv["onboot"] = "1"
	}
	if len(g.Cfg.Tags) > 0 {
		kv["tags"] = strings.Join(g.Cfg.Tags, ";")
	}
}

func vmDiskGB(g *lab.Guest) int { return positiveOr(g.Cfg.DiskGB, 32) }

// positiveOr is n, or def when n is not set (zero or negative): a guest's figure or the
// default Proxmox shows for it.
func positiveOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func (pt *Tools) destroyGuest(inv *shell.Invocation, h *lab.Host, g *lab.Guest, kind string) int {
	pt.lab.Mu.Lock()
	if g.Running() {
		pt.lab.Mu.Unlock()
		if kind == fleet.GuestLXC {
			fmt.Fprintf(inv.Stderr, "unable to destroy CT %d - container is running\n", g.Cfg.VMID)
		} else {
			fmt.Fprintf(inv.Stderr, "VM %d is running - destroy failed\n", g.Cfg.VMID)
		}
		return exitPVE
	}
	delete(h.Guests, g.Cfg.VMID)
	storage := g.Storage
	pt.lab.Mu.Unlock()
	g.M.FS.Close()
	dir := g.Dir
	if err := os.RemoveAll(dir); err != nil {
		pt.log.Error().Err(err).Str("dir", dir).Msg("remove guest directory")
	}
	if strings.HasSuffix(storage, "lvm") {
		fmt.Fprintf(inv.Stdout, "  Logical volume \"vm-%d-disk-0\" successfully removed.\n", g.Cfg.VMID)
	}
	return 0
}
