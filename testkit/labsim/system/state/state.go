// Package state is the small read (and narrow write) API a simulated machine offers to the
// program families beside labsim/system (systemd, docker, storage, logins, dpkg): each
// family renders a real program's output from these figures and never holds a machine's
// lock itself. labsim/system implements Machine; the families import only this package, so
// imports go one way (system → family → state).
package state

import (
	"strings"
	"time"
)

// Roles of simulated machines (the values of labsim/system.Role).
const (
	Proxmox = "proxmox"
	Linux   = "linux"
	Darwin  = "darwin"
	LXC     = "lxc"
	VM      = "vm"
)

// Unit is a copy of one systemd unit's state.
type Unit struct {
	Name    string
	Active  bool
	Enabled bool
	Since   time.Time // when it last changed state
	PID     int       // main PID while active (services)
}

// Container is a copy of one docker container's state.
type Container struct {
	ID, Name, Image string
	Running         bool
	Since, Created  time.Time
}

// Mount is one mounted file system, sizes in KiB.
type Mount struct {
	Source, FSType, Target string
	SizeKB, UsedKB         int64
}

// Memory is one reading of the memory figures, in KiB.
type Memory struct {
	Total, Free, Used, Shared, Buffers, Cached, Available, SwapTotal, SwapFree int64
}

// Package is one installed Debian package.
type Package struct {
	Name, Version, Arch, Description, Section string
	SizeKB                                    int
}

// Upgrade is a pending upgrade of an installed package.
type Upgrade struct {
	Pkg, Suite, NewVer, OldVer string
}

// Machine is what a family reads of the machine it runs on.
type Machine interface {
	Hostname() string
	// Role is one of the role constants above.
	Role() string
	// Distro is "debian-12", "debian-13", "ubuntu-24.04", …
	Distro() string
	User() string
	Now() time.Time
	Boot() time.Time
	Cores() int
	MemoryMB() int
	DiskGB() int
	IPv4() string
	Gateway() string
	// Jitter returns base varied by up to ±spread (a fraction), from the machine's
	// reproducible random source.
	Jitter(base, spread float64) float64
	Units() []Unit
	Unit(name string) (Unit, bool)
	// UpdateUnit changes a unit under the machine's lock (false: no such unit).
	UpdateUnit(name string, fn func(u *Unit, newPID func() int)) bool
	Containers() []Container
	// UpdateContainer changes a container under the machine's lock (name or ID prefix).
	UpdateContainer(name string, fn func(c *Container)) (Container, bool)
	Mounts() []Mount
	Memory() Memory
	Packages() []Package
	Upgrades() []Upgrade
	// Kernel is the running kernel's release (uname -r).
	Kernel() string
	// ZFSPools are the machine's ZFS pools (none: no ZFS).
	ZFSPools() []string
}

// UnitName normalises a unit name: "jellyfin" becomes "jellyfin.service".
func UnitName(u string) string {
	if strings.Contains(u, ".") {
		return u
	}
	return u + ".service"
}

// IsService reports whether the unit is a service (the only units with processes).
func IsService(unit string) bool { return strings.HasSuffix(unit, ".service") }

// ProcessName is the command name of a service's main process.
func ProcessName(unit string) string {
	n := strings.TrimSuffix(unit, ".service")
	switch n {
	case "ssh":
		return "sshd"
	case "systemd-journald":
		return "systemd-journal"
	case "postfix":
		return "master"
	case "docker":
		return "dockerd"
	}
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

// Describe is a unit's Description=.
func Describe(name string) string {
	known := map[string]string{
		"ssh.service":                        "OpenBSD Secure Shell server",
		"cron.service":                       "Regular background program processing daemon",
		"systemd-journald.service":           "Journal Service",
		"postfix.service":                    "Postfix Mail Transport Agent",
		"pve-cluster.service":                "The Proxmox VE cluster filesystem",
		"pvedaemon.service":                  "PVE API Daemon",
		"pveproxy.service":                   "PVE API Proxy Server",
		"pvestatd.service":                   "PVE Status Daemon",
		"docker.service":                     "Docker Application Container Engine",
		"apt-daily.timer":                    "Daily apt download activities",
		"apt-daily-upgrade.timer":            "Daily apt upgrade and clean activities",
		"dpkg-db-backup.timer":               "Daily dpkg database backup timer",
		"e2scrub_all.timer":                  "Periodic ext4 Online Metadata Check for All Filesystems",
		"fstrim.timer":                       "Discard unused filesystem blocks once a week",
		"logrotate.timer":                    "Daily rotation of log files",
		"man-db.timer":                       "Daily man-db regeneration",
		"systemd-tmpfiles-clean.timer":       "Daily Cleanup of Temporary Directories",
		"pve-daily-update.timer":             "Daily PVE download activities",
		"apt-daily.service":                  "Daily apt download activities",
		"apt-daily-upgrade.service":          "Daily apt upgrade and clean activities",
		"dpkg-db-backup.service":             "Daily dpkg database backup service",
		"e2scrub_all.service":                "Online ext4 Metadata Check for All Filesystems",
		"fstrim.service":                     "Discard unused blocks on filesystems from /etc/fstab",
		"logrotate.service":                  "Rotate log files",
		"man-db.service":                     "Daily man-db regeneration",
		"systemd-tmpfiles-clean.service":     "Cleanup of Temporary Directories",
		"pve-daily-update.service":           "Daily PVE download activities",
		"zfs-scrub-monthly@rpool.timer":      "Monthly zpool scrub timer for rpool",
		"systemd-timesyncd.service":          "Network Time Synchronization",
		"chrony.service":                     "chrony, an NTP client/server",
		"qemu-guest-agent.service":           "QEMU Guest Agent",
		"systemd-networkd.service":           "Network Configuration",
		"networking.service":                 "Raise network interfaces",
		"smartmontools.service":              "Self Monitoring and Reporting Technology (SMART) Daemon",
		"zfs-zed.service":                    "ZFS Event Daemon (zed)",
		"containerd.service":                 "containerd container runtime",
		"systemd-logind.service":             "User Login Management",
		"dbus.service":                       "D-Bus System Message Bus",
		"rsyslog.service":                    "System Logging Service",
		"nginx.service":                      "A high performance web server and a reverse proxy server",
		"postgresql.service":                 "PostgreSQL RDBMS",
		"systemd-journal-flush.service":      "Flush Journal to Persistent Storage",
		"pve-ha-lrm.service":                 "PVE Local HA Resource Manager Daemon",
		"pve-ha-crm.service":                 "PVE Cluster HA Resource Manager Daemon",
		"corosync.service":                   "Corosync Cluster Engine",
		"pve-firewall.service":               "Proxmox VE firewall",
		"spiceproxy.service":                 "PVE SPICE Proxy Server",
		"systemd-resolved.service":           "Network Name Resolution",
		"unattended-upgrades.service":        "Unattended Upgrades Shutdown",
		"getty@tty1.service":                 "Getty on tty1",
		"console-getty.service":              "Console Getty",
		"container-getty@1.service":          "Container Getty on /dev/tty1",
		"systemd-udevd.service":              "Rule-based Manager for Device Events and Files",
		"ksmtuned.service":                   "Kernel Samepage Merging (KSM) Tuning Daemon",
		"lxcfs.service":                      "FUSE filesystem for LXC",
		"rrdcached.service":                  "LSB: start or stop rrdcached",
		"proxmox-firewall.service":           "Proxmox nftables firewall",
		"systemd-timedated.service":          "Time & Date Service",
		"systemd-hostnamed.service":          "Hostname Service",
		"systemd-user-sessions.service":      "Permit User Sessions",
		"systemd-journald-audit.socket":      "Journal Audit Socket",
		"user@0.service":                     "User Manager for UID 0",
		"systemd-update-utmp.service":        "Record System Boot/Shutdown in UTMP",
		"systemd-random-seed.service":        "Load/Save Random Seed",
		"systemd-remount-fs.service":         "Remount Root and Kernel File Systems",
		"systemd-sysctl.service":             "Apply Kernel Variables",
		"systemd-tmpfiles-setup.service":     "Create Volatile Files and Directories",
		"systemd-modules-load.service":       "Load Kernel Modules",
		"systemd-binfmt.service":             "Set Up Additional Binary Formats",
		"systemd-sysusers.service":           "Create System Users",
		"systemd-tmpfiles-setup-dev.service": "Create Static Device Nodes in /dev",
	}
	if d, ok := known[name]; ok {
		return d
	}
	base := name
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	if base == "" {
		return name
	}
	return strings.ToUpper(base[:1]) + base[1:]
}
