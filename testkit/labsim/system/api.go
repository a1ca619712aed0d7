package system

import (
	"sort"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// The state.Machine API the program families (labsim/system/...) read.

var _ state.Machine = (*Machine)(nil)

// Role is the machine's role as a string (state.Proxmox, state.LXC, …).
func (m *Machine) Role() string { return string(m.cfg.Role) }

// Distro is the machine's distribution ("debian-12", …).
func (m *Machine) Distro() string { return m.cfg.Distro }

// User is the login user.
func (m *Machine) User() string { return m.cfg.User }

// Now reads the machine clock (UTC).
func (m *Machine) Now() time.Time { return m.now() }

// Boot is when the machine booted.
func (m *Machine) Boot() time.Time { return m.boot }

// Cores is the number of CPUs.
func (m *Machine) Cores() int { return m.cfg.Cores }

// MemoryMB is the machine's memory.
func (m *Machine) MemoryMB() int { return m.cfg.MemoryMB }

// DiskGB is the size of the machine's root disk.
func (m *Machine) DiskGB() int { return m.cfg.DiskGB }

// IPv4 is the machine's address (a documentation address when none was given).
func (m *Machine) IPv4() string {
	if m.cfg.IPv4 == "" {
		return "192.0.2.10"
	}
	return m.cfg.IPv4
}

// Gateway is the default route's gateway ("" when none).
func (m *Machine) Gateway() string { return m.cfg.Gateway }

// Jitter returns base varied by up to ±spread (fraction).
func (m *Machine) Jitter(base, spread float64) float64 { return m.jitter(base, spread) }

// Units are copies of the machine's units, sorted by name.
func (m *Machine) Units() []state.Unit {
	us := m.sortedUnits()
	out := make([]state.Unit, len(us))
	for i, u := range us {
		out[i] = u.export()
	}
	return out
}

func (u unitState) export() state.Unit {
	return state.Unit{Name: u.name, Active: u.active, Enabled: u.enabled, Since: u.since, PID: u.pid}
}

// Unit is a copy of one unit (false: no such unit).
func (m *Machine) Unit(name string) (state.Unit, bool) {
	u, ok := m.unit(state.UnitName(name))
	return u.export(), ok
}

// UpdateUnit changes a unit under the lock; newPID draws the PID of a (re)started process.
func (m *Machine) UpdateUnit(name string, fn func(u *state.Unit, newPID func() int)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[state.UnitName(name)]
	if !ok {
		return false
	}
	e := u.export()
	fn(&e, m.pid)
	u.active, u.enabled, u.since, u.pid = e.Active, e.Enabled, e.Since, e.PID
	return true
}

// Containers are copies of the docker containers, sorted by name.
func (m *Machine) Containers() []state.Container {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]state.Container, 0, len(m.containers))
	for _, c := range m.containers {
		out = append(out, state.Container{ID: c.id, Name: c.name, Image: c.image, Running: c.running, Since: c.since, Created: c.created})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UpdateContainer changes a container found by name or by an ID prefix of 3+ characters.
func (m *Machine) UpdateContainer(name string, fn func(c *state.Container)) (state.Container, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.containers[name]
	if !ok && len(name) >= 3 {
		for _, x := range m.containers {
			if strings.HasPrefix(x.id, name) {
				c, ok = x, true
				break
			}
		}
	}
	if !ok {
		return state.Container{}, false
	}
	e := state.Container{ID: c.id, Name: c.name, Image: c.image, Running: c.running, Since: c.since, Created: c.created}
	fn(&e)
	c.running, c.since = e.Running, e.Since
	return e, true
}

// Mounts are the mounted file systems (as df shows them).
func (m *Machine) Mounts() []state.Mount {
	ms := m.mounts()
	out := make([]state.Mount, len(ms))
	for i, x := range ms {
		out[i] = state.Mount{Source: x.fs, FSType: x.fstype, Target: x.target, SizeKB: x.size, UsedKB: x.used}
	}
	return out
}

// Memory is one reading of memory.
func (m *Machine) Memory() state.Memory {
	x := m.readMemory()
	return state.Memory{Total: x.total, Free: x.free, Used: x.used, Shared: x.shared, Buffers: x.buffers, Cached: x.cached,
		Available: x.available, SwapTotal: x.swapTotal, SwapFree: x.swapFree}
}

// Packages are the installed packages, sorted by name.
func (m *Machine) Packages() []state.Package {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]state.Package, 0, len(m.installed))
	for name, ver := range m.installed {
		p, ok := m.catalogue[name]
		if !ok {
			p = state.Package{Name: name, Arch: "amd64", Description: name, Section: "misc", SizeKB: 512}
		}
		p.Version = ver
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Upgrades are the pending upgrades.
func (m *Machine) Upgrades() []state.Upgrade {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]state.Upgrade, len(m.upgrades))
	for i, u := range m.upgrades {
		out[i] = state.Upgrade{Pkg: u.pkg, Suite: u.suite, NewVer: u.newVer, OldVer: u.oldVer}
	}
	return out
}

// Kernel is uname -r.
func (m *Machine) Kernel() string { return m.kernelRelease() }

// ZFSPools are the machine's ZFS pools.
func (m *Machine) ZFSPools() []string { return append([]string(nil), m.cfg.ZFSPools...) }
