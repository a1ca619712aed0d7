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
	// tasks are the task log entries of each node (pvesh get /nodes/N/tasks), oldest
	// first; guarded by the lab's lock.
	tasks map[string][]map[string]any
}

// New prepares the tools of l's Proxmox nodes. extraTemplates are container template volids
// every node's cache holds beside the built-in ones (fleet.Fleet.Templates). spawn runs a
// function on its own goroutine until the lab stops, with the lab's context (the guest
// agent's commands outlive the qm that started them).
func New(l *lab.Lab, extraTemplates []string, log zerolog.Logger, spawn func(fn func(ctx context.Context))) *Tools {
	return &Tools{lab: l, templates: templateCache(extraTemplates), log: log, spawn: spawn, tasks: map[string][]map[string]any{}}
}

// Programs are the Proxmox programs of the node host (a host of the lab, looked up when a
// program runs).
func (pt *Tools) Programs(host string) shell.Registry {
	return shell.Registry{
		"pct":        func(ctx context.Context, inv *shell.Invocation) int { return pt.pct(ctx, inv, host) },
		"qm":         func(ctx context.Context, inv *shell.Invocation) int { return pt.qm(ctx, inv, host) },
		"pveam":      func(ctx context.Context, inv *shell.Invocation) int { return pt.pveam(ctx, inv, host) },
		"pvesh":      func(ctx context.Context, inv *shell.Invocation) int { return pt.pvesh(ctx, inv, host) },
		"pveversion": pveversion,
		"pvecm":      func(ctx context.Context, inv *shell.Invocation) int { return pt.pvecm(ctx, inv, host) },
		"ha-manager": func(ctx context.Context, inv *shell.Invocation) int { return pt.haManager(ctx, inv, host) },
		"pvesm":      func(ctx context.Context, inv *shell.Invocation) int { return pt.pvesm(ctx, inv, host) },
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

// noCommand answers a Proxmox CLI called without a sub-command: pve-common's
// print_usage_short on stderr, exit 255.
func noCommand(inv *shell.Invocation, tool string) int {
	fmt.Fprintf(inv.Stderr, "ERROR: no command specified\n%s", usageList(tool, usages[tool]))
	return exitPVE
}

// unknownCommand answers a sub-command the tool does not have.
func unknownCommand(inv *shell.Invocation, tool, sub string) int {
	fmt.Fprintf(inv.Stderr, "ERROR: unknown command '%s %s'\n%s", tool, sub, usageList(tool, usages[tool]))
	return exitPVE
}

// usages are the short synopses the tools list after USAGE (abridged to the commands
// operators use most).
var usages = map[string][]string{
	"pct": {
		"pct clone <vmid> <newid> [OPTIONS]", "pct config <vmid> [OPTIONS]", "pct console <vmid> [OPTIONS]",
		"pct cpusets", "pct create <vmid> <ostemplate> [OPTIONS]", "pct destroy <vmid> [OPTIONS]",
		"pct df <vmid>", "pct enter <vmid> [OPTIONS]", "pct exec <vmid> [<extra-args>] [OPTIONS]",
		"pct list", "pct migrate <vmid> <target> [OPTIONS]", "pct mount <vmid>", "pct pending <vmid>",
		"pct reboot <vmid> [OPTIONS]", "pct resume <vmid>", "pct set <vmid> [OPTIONS]", "pct shutdown <vmid> [OPTIONS]",
		"pct snapshot <vmid> <snapname> [OPTIONS]", "pct start <vmid> [OPTIONS]", "pct status <vmid> [OPTIONS]",
		"pct stop <vmid> [OPTIONS]", "pct suspend <vmid>", "pct template <vmid>", "pct unlock <vmid>", "pct unmount <vmid>",
		"pct help [<extra-args>] [OPTIONS]",
	},
	"qm": {
		"qm agent <vmid> <command>", "qm clone <vmid> <newid> [OPTIONS]", "qm config <vmid> [OPTIONS]",
		"qm create <vmid> [OPTIONS]", "qm destroy <vmid> [OPTIONS]", "qm guest cmd <vmid> <command>",
		"qm guest exec <vmid> [<extra-args>] [OPTIONS]", "qm guest exec-status <vmid> <pid>",
		"qm list  [OPTIONS]", "qm migrate <vmid> <target> [OPTIONS]", "qm pending <vmid>",
		"qm reboot <vmid> [OPTIONS]", "qm reset <vmid> [OPTIONS]", "qm resume <vmid> [OPTIONS]", "qm set <vmid> [OPTIONS]",
		"qm showcmd <vmid> [OPTIONS]", "qm shutdown <vmid> [OPTIONS]", "qm snapshot <vmid> <snapname> [OPTIONS]",
		"qm start <vmid> [OPTIONS]", "qm status <vmid> [OPTIONS]", "qm stop <vmid> [OPTIONS]",
		"qm suspend <vmid> [OPTIONS]", "qm template <vmid> [OPTIONS]", "qm unlock <vmid>",
		"qm help [<extra-args>] [OPTIONS]",
	},
	"pveam": {
		"pveam available  [OPTIONS]", "pveam download <storage> <template>", "pveam list <storage>",
		"pveam remove <template_path>", "pveam update", "pveam help [<extra-args>] [OPTIONS]",
	},
	"pvesm":      pvesmUsage,
	"pvecm":      pvecmUsage,
	"ha-manager": haUsage,
	"pvesh": {
		"pvesh create <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh delete <api_path> [OPTIONS] [FORMAT_OPTIONS]",
		"pvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh ls <api_path> [OPTIONS] [FORMAT_OPTIONS]",
		"pvesh set <api_path> [OPTIONS] [FORMAT_OPTIONS]", "pvesh usage <api_path> [OPTIONS]",
		"pvesh help [<extra-args>] [OPTIONS]",
	},
}

// pveversion prints what PVE 8.3 prints; -v lists the Proxmox packages and their versions.
func pveversion(_ context.Context, inv *shell.Invocation) int {
	verbose := false
	for _, a := range inv.Args[1:] {
		switch a {
		case "-v", "--verbose", "-verbose":
			verbose = true
		case "--verbose=1", "-verbose=1":
			verbose = true
		default:
			fmt.Fprintf(inv.Stderr, "Unknown option: %s\n400 unable to parse option\npveversion  [OPTIONS]\n", strings.TrimLeft(a, "-"))
			return exitPVE
		}
	}
	if !verbose {
		fmt.Fprintln(inv.Stdout, "pve-manager/8.3.0/c1689ccb1065a83b (running kernel: 6.8.12-4-pve)")
		return 0
	}
	fmt.Fprintln(inv.Stdout, "proxmox-ve: 8.3.0 (running kernel: 6.8.12-4-pve)")
	fmt.Fprintln(inv.Stdout, "pve-manager: 8.3.0 (running version: 8.3.0/c1689ccb1065a83b)")
	for _, p := range pvePackages {
		fmt.Fprintf(inv.Stdout, "%s: %s\n", p[0], p[1])
	}
	return 0
}

// pvePackages are the packages pveversion -v lists after proxmox-ve and pve-manager, in
// its order (the kernels first, then alphabetical).
var pvePackages = [][2]string{
	{"proxmox-kernel-helper", "8.1.0"}, {"proxmox-kernel-6.8", "6.8.12-4"}, {"proxmox-kernel-6.8.12-4-pve-signed", "6.8.12-4"},
	{"ceph-fuse", "17.2.7-pve3"}, {"corosync", "3.1.7-pve3"}, {"criu", "3.17.1-2"}, {"glusterfs-client", "10.3-5"},
	{"ifupdown2", "3.2.0-1+pmx11"}, {"ksm-control-daemon", "1.5-1"}, {"libjs-extjs", "7.0.0-5"}, {"libknet1", "1.28-pve1"},
	{"libproxmox-acme-perl", "1.5.1"}, {"libproxmox-backup-qemu0", "1.4.1"}, {"libproxmox-rs-perl", "0.3.4"},
	{"libpve-access-control", "8.2.0"}, {"libpve-apiclient-perl", "3.3.2"}, {"libpve-cluster-api-perl", "8.0.10"},
	{"libpve-cluster-perl", "8.0.10"}, {"libpve-common-perl", "8.2.9"}, {"libpve-guest-common-perl", "5.1.6"},
	{"libpve-http-server-perl", "5.1.2"}, {"libpve-network-perl", "0.10.0"}, {"libpve-rs-perl", "0.9.0"},
	{"libpve-storage-perl", "8.2.9"}, {"libspice-server1", "0.15.1-1"}, {"lvm2", "2.03.16-2"}, {"lxc-pve", "6.0.0-1"},
	{"lxcfs", "6.0.0-pve2"}, {"novnc-pve", "1.5.0-1"}, {"proxmox-backup-client", "3.3.0-1"},
	{"proxmox-backup-file-restore", "3.3.0-1"}, {"proxmox-firewall", "0.6.0"}, {"proxmox-mail-forward", "0.3.1"},
	{"proxmox-mini-journalreader", "1.4.0"}, {"proxmox-widget-toolkit", "4.3.1"}, {"pve-cluster", "8.0.10"},
	{"pve-container", "5.2.2"}, {"pve-docs", "8.3.1"}, {"pve-edk2-firmware", "4.2023.08-4"}, {"pve-esxi-import-tools", "0.7.2"},
	{"pve-firewall", "5.1.0"}, {"pve-firmware", "3.14-1"}, {"pve-ha-manager", "4.0.6"}, {"pve-i18n", "3.3.1"},
	{"pve-qemu-kvm", "9.0.2-4"}, {"pve-xtermjs", "5.3.0-3"}, {"qemu-server", "8.3.0"}, {"smartmontools", "7.3-pve1"},
	{"spiceterm", "3.3.0"}, {"swtpm", "0.8.0+pve1"}, {"vncterm", "1.8.0"}, {"zfsutils-linux", "2.2.6-pve1"},
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
