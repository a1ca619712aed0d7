package system

import (
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// basePackages are the packages a fresh machine has, with the versions of the distribution's
// point release (Debian 12.8 and 13.1; the others reuse Debian 12's names).
func basePackages(distro string, r Role, docker bool) map[string]state.Package {
	type p struct{ name, v12, v13, section, desc string }
	list := []p{
		{"adduser", "3.134", "3.152", "admin", "add and remove users and groups"},
		{"apt", "2.6.1", "3.0.3", "admin", "commandline package manager"},
		{"base-files", "12.4+deb12u8", "13.8+deb13u1", "admin", "Debian base system miscellaneous files"},
		{"bash", "5.2.15-2+b7", "5.2.37-2+b5", "shells", "GNU Bourne Again SHell"},
		{"ca-certificates", "20230311", "20250419", "misc", "Common CA certificates"},
		{"coreutils", "9.1-1", "9.7-3", "utils", "GNU core utilities"},
		{"cron", "3.0pl1-162", "3.0pl1-197", "admin", "process scheduling daemon"},
		{"curl", "7.88.1-10+deb12u7", "8.14.1-2", "web", "command line tool for transferring data with URL syntax"},
		{"dpkg", "1.21.22", "1.22.21", "admin", "Debian package management system"},
		{"gzip", "1.12-1", "1.13-1", "utils", "GNU compression utilities"},
		{"iproute2", "6.1.0-3", "6.15.0-1", "net", "networking and traffic control tools"},
		{"iputils-ping", "3:20221126-1+deb12u1", "3:20240905-3", "net", "Tools to test the reachability of network hosts"},
		{"libc6", "2.36-9+deb12u9", "2.41-12", "libs", "GNU C Library: Shared libraries"},
		{"libssl3", "3.0.14-1~deb12u2", "", "libs", "Secure Sockets Layer toolkit - shared libraries"},
		{"libssl3t64", "", "3.5.1-1", "libs", "Secure Sockets Layer toolkit - shared libraries"},
		{"login", "1:4.13+dfsg1-1+b1", "1:4.16.0-2+really2.41-5", "admin", "system login tools"},
		{"openssl", "3.0.14-1~deb12u2", "3.5.1-1", "utils", "Secure Sockets Layer toolkit - cryptographic utility"},
		{"procps", "2:4.0.2-3", "2:4.0.4-9", "admin", "/proc file system utilities"},
		{"systemd", "252.31-1~deb12u1", "257.8-1~deb13u2", "admin", "system and service manager"},
		{"tzdata", "2024a-0+deb12u1", "2025b-4+deb13u1", "localization", "time zone and daylight-saving time data"},
		{"util-linux", "2.38.1-5+deb12u2", "2.41-5", "utils", "miscellaneous system utilities"},
	}
	if r != RoleLXC {
		list = append(list, p{"openssh-server", "1:9.2p1-2+deb12u3", "1:10.0p1-7", "net", "secure shell (SSH) server, for secure access from remote machines"})
	}
	if r == RoleLXC {
		list = append(list, p{"postfix", "3.7.11-0+deb12u1", "3.10.3-1", "mail", "High-performance mail transport agent"})
	}
	if r == RoleVM {
		list = append(list, p{"qemu-guest-agent", "1:7.2+dfsg-7+deb12u7", "1:10.0.2+ds-2", "admin", "Guest-side qemu-system agent"})
	}
	if r == RoleProxmox {
		list = append(list,
			p{"lvm2", "2.03.16-2", "2.03.31-2", "admin", "Linux Logical Volume Manager"},
			p{"pve-manager", "8.3.0", "9.0.10", "admin", "Proxmox Virtual Environment Management Tools"},
			p{"smartmontools", "7.3-pve1", "7.4-pve1", "utils", "control and monitor storage systems using S.M.A.R.T."},
			p{"zfsutils-linux", "2.2.6-pve1", "2.3.4-pve1", "admin", "command-line tools to manage OpenZFS filesystems"},
		)
	}
	if docker {
		list = append(list,
			p{"docker-ce", "5:27.3.1-1~debian.12~bookworm", "5:28.5.1-1~debian.13~trixie", "admin", "Docker: the open-source application container engine"},
			p{"docker-compose-plugin", "2.29.7-1~debian.12~bookworm", "2.40.0-1~debian.13~trixie", "admin", "Docker Compose (V2) plugin for the Docker CLI."},
		)
	}
	thirteen := distro == "debian-13"
	out := map[string]state.Package{}
	for _, x := range list {
		v := x.v12
		if thirteen {
			v = x.v13
		}
		if v == "" {
			continue
		}
		arch := "amd64"
		if strings.HasPrefix(x.name, "tzdata") || x.name == "ca-certificates" || x.name == "adduser" {
			arch = "all"
		}
		out[x.name] = state.Package{Name: x.name, Version: v, Arch: arch, Description: x.desc, Section: x.section, SizeKB: 300 + len(x.desc)*37}
	}
	return out
}
