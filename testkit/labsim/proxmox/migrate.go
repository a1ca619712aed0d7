package proxmox

import (
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// MigrateMode is how a running guest moves: a VM live (qm migrate --online), a container by
// restart (pct migrate --restart). A stopped guest always moves offline.
type MigrateMode int

// Migration modes.
const (
	Offline MigrateMode = iota
	Online
)

// CheckTarget is the first check qm and pct migrate make (and the control API's migrate):
// the target names another node of h's cluster. It returns the target's host, or a message
// as the tools print it. The caller holds the lab's lock.
func (pt *Tools) CheckTarget(h *lab.Host, target string) (*lab.Host, string) {
	if target == h.Cfg.Node {
		return nil, "target is local node."
	}
	for _, m := range pt.lab.Members(h) {
		if m.Cfg.Node == target && m != h {
			return m, ""
		}
	}
	return nil, fmt.Sprintf("no such cluster node '%s'", target)
}

// migrateCmd runs `<tool> migrate <vmid> <target> [OPTIONS]`.
func (pt *Tools) migrateCmd(inv *shell.Invocation, host, kind string, args []string) int {
	tool, what := "pct", "CT"
	if kind == fleet.GuestVM {
		tool, what = "qm", "VM"
	}
	usage := tool + " migrate <vmid> <target> [OPTIONS]"
	a := parsePVEArgs(args, map[string]bool{"online": true, "restart": true, "force": true, "with-local-disks": true,
		"with-conntrack-state": true})
	known := map[string]bool{"online": true, "force": true, "with-local-disks": true, "targetstorage": true, "bwlimit": true,
		"migration_type": true, "migration_network": true, "with-conntrack-state": true}
	if kind == fleet.GuestLXC {
		known = map[string]bool{"online": true, "restart": true, "timeout": true, "target-storage": true, "bwlimit": true}
	}
	for _, k := range a.order {
		if !known[k] {
			fmt.Fprintf(inv.Stderr, "Unknown option: %s\n400 unable to parse option\n%s\n", k, usage)
			return exitPVE
		}
	}
	// Boolean options may also be written --online 1: drop such values from the operands.
	var pos []string
	for _, p := range a.pos {
		if _, isBool := pveBool(p); isBool && len(pos) >= 2 {
			continue
		}
		pos = append(pos, p)
	}
	if len(pos) < 2 {
		fmt.Fprintf(inv.Stderr, "400 not enough arguments\n%s\n", usage)
		return exitPVE
	}
	vmid, ok := parseVMID(inv, pos[0])
	if !ok {
		fmt.Fprintln(inv.Stderr, usage)
		return exitPVE
	}
	online, restart := optBool(a, "online"), optBool(a, "restart")
	pt.lab.Mu.Lock()
	defer pt.lab.Mu.Unlock()
	h := pt.lab.Host(host)
	target, msg := pt.CheckTarget(h, pos[1])
	if msg == "target is local node." {
		fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\ntarget: %s\n%s\n", msg, usage)
		return exitPVE
	}
	if !pt.lab.Quorate(h) {
		fmt.Fprintln(inv.Stderr, "cluster not ready - no quorum?")
		return exitPVE
	}
	if target == nil {
		fmt.Fprintln(inv.Stderr, msg)
		return exitPVE
	}
	g, ok := h.Guests[vmid]
	if !ok || g.Cfg.Kind != kind {
		return noConfig(inv, h.Cfg.Node, vmid, kind)
	}
	if g.Lock != "" {
		fmt.Fprintf(inv.Stderr, "%s is locked (%s)\n", what, g.Lock)
		return exitPVE
	}
	running := g.Running()
	switch {
	case running && kind == fleet.GuestVM && !online:
		fmt.Fprintln(inv.Stderr, "can't migrate running VM without --online")
		return exitPVE
	case running && kind == fleet.GuestLXC && !online && !restart:
		fmt.Fprintln(inv.Stderr, "can't migrate running container without --online or --restart")
		return exitPVE
	case !running && kind == fleet.GuestVM && online:
		fmt.Fprintln(inv.Stderr, "VM isn't running. Doing offline migration instead.")
	}
	now := pt.lab.Now()
	stamp := func(format string, args ...any) {
		fmt.Fprintf(inv.Stdout, "%s %s\n", now.Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
	}
	if g.HAReq != "" {
		// The CRM carries out the request; the lab does at once what it would do within
		// seconds.
		fmt.Fprintf(inv.Stdout, "Requesting HA migration for %s %d to node %s\n", what, vmid, target.Cfg.Node)
		pt.lab.Migrate(g, target)
		return 0
	}
	if running && kind == fleet.GuestLXC && !restart {
		stamp("ERROR: migration aborted (duration 00:00:00): lxc live migration is currently not implemented")
		fmt.Fprintln(inv.Stdout, "TASK ERROR: migration aborted")
		return exitPVE
	}
	if running && kind == fleet.GuestLXC {
		stamp("shutdown CT %d", vmid)
	}
	stamp("starting migration of %s %d to node '%s' (%s)", what, vmid, target.Cfg.Node, lab.HostIP(target.Cfg.Addr))
	if target.Fault.Down {
		stamp("ERROR: migration aborted (duration 00:00:00): Can't connect to destination address using public key")
		fmt.Fprintln(inv.Stdout, "TASK ERROR: migration aborted")
		return exitPVE
	}
	disk := fmt.Sprintf("%s:vm-%d-disk-0", g.Storage, vmid)
	switch {
	case kind == fleet.GuestVM && running:
		stamp("starting VM %d on remote node '%s'", vmid, target.Cfg.Node)
		stamp("start remote tunnel")
		stamp("starting online/live migration on unix:/run/qemu-server/%d.migrate", vmid)
		stamp("migration status: completed")
	case kind == fleet.GuestVM:
		stamp("found local disk '%s' (attached)", disk)
		stamp("copying local disk images")
	default:
		stamp("found local volume '%s' (in current VM config)", disk)
		stamp("volume '%s' is '%s' on the target", disk, disk)
	}
	pt.lab.Migrate(g, target)
	if running && kind == fleet.GuestLXC {
		stamp("start final cleanup")
		stamp("start container on target node")
		// A restart migration stops the container and starts it on the target.
		g.SetRunning(false, now)
		g.SetRunning(true, now)
	}
	stamp("migration finished successfully (duration %s)", clockDuration(time.Second))
	pt.addTask(h, map[string]string{fleet.GuestVM: "qmigrate", fleet.GuestLXC: "vzmigrate"}[kind], vmid, now)
	return 0
}

func optBool(a pveArgs, k string) bool {
	v, ok := a.opts[k]
	if !ok {
		return false
	}
	b, _ := pveBool(v)
	return b
}

// clockDuration renders a task's duration as HH:MM:SS.
func clockDuration(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// Placement is where a guest is after a migration (the control API's answer).
type Placement struct {
	Host   string `json:"host"`
	Node   string `json:"node"`
	VMID   int    `json:"vmid"`
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
}

// PlacementOf describes guest g on its node; the caller holds the lab's lock.
func PlacementOf(g *lab.Guest) Placement {
	h := g.Host()
	return Placement{Host: h.Cfg.Name, Node: h.Cfg.Node, VMID: g.Cfg.VMID, Name: g.DisplayName(), Kind: g.Cfg.Kind, Status: g.Cfg.Status}
}

// addTask records a finished task in node h's task log; the caller holds the lock.
func (pt *Tools) addTask(h *lab.Host, typ string, vmid int, at time.Time) {
	pid := 10000 + len(pt.tasks[h.Cfg.Node])*17 + vmid%1000
	start := at.Unix()
	upid := fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%d:root@pam:", h.Cfg.Node, pid, pid*131, start, typ, vmid)
	pt.tasks[h.Cfg.Node] = append(pt.tasks[h.Cfg.Node], map[string]any{"upid": upid, "node": h.Cfg.Node, "pid": pid,
		"pstart": pid * 131, "starttime": start, "endtime": start + 1, "type": typ, "id": fmt.Sprint(vmid), "user": "root@pam", "status": "OK"})
}
