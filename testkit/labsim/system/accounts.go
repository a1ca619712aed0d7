package system

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// passwd is /etc/passwd of a fresh Debian system, plus the login user.
func (m *Machine) passwd() []string {
	lines := []string{
		"root:x:0:0:root:/root:/bin/bash",
		"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
		"bin:x:2:2:bin:/bin:/usr/sbin/nologin",
		"sys:x:3:3:sys:/dev:/usr/sbin/nologin",
		"sync:x:4:65534:sync:/bin:/bin/sync",
		"games:x:5:60:games:/usr/games:/usr/sbin/nologin",
		"man:x:6:12:man:/var/cache/man:/usr/sbin/nologin",
		"lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin",
		"mail:x:8:8:mail:/var/mail:/usr/sbin/nologin",
		"news:x:9:9:news:/var/spool/news:/usr/sbin/nologin",
		"uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin",
		"proxy:x:13:13:proxy:/bin:/usr/sbin/nologin",
		"www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin",
		"backup:x:34:34:backup:/var/backups:/usr/sbin/nologin",
		"list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin",
		"irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin",
		"_apt:x:42:65534::/nonexistent:/usr/sbin/nologin",
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
		"systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin",
		"messagebus:x:100:107::/nonexistent:/usr/sbin/nologin",
		"sshd:x:101:65534::/run/sshd:/usr/sbin/nologin",
	}
	if m.cfg.User != "root" {
		lines = append(lines, fmt.Sprintf("%[1]s:x:1000:1000:%[1]s,,,:/home/%[1]s:/bin/bash", m.cfg.User))
	}
	return lines
}

func (m *Machine) groups() []string {
	lines := []string{"root:x:0:", "daemon:x:1:", "bin:x:2:", "sys:x:3:", "adm:x:4:", "tty:x:5:", "disk:x:6:", "lp:x:7:",
		"mail:x:8:", "news:x:9:", "uucp:x:10:", "man:x:12:", "proxy:x:13:", "sudo:x:27:", "www-data:x:33:", "backup:x:34:",
		"operator:x:37:", "list:x:38:", "irc:x:39:", "src:x:40:", "shadow:x:42:", "utmp:x:43:", "video:x:44:", "plugdev:x:46:",
		"staff:x:50:", "users:x:100:", "nogroup:x:65534:", "systemd-journal:x:999:", "systemd-network:x:998:", "messagebus:x:107:"}
	if m.cfg.User != "root" {
		lines[13] = "sudo:x:27:" + m.cfg.User
		lines = append(lines, m.cfg.User+":x:1000:")
	}
	return lines
}

func (m *Machine) resolvConf() string {
	ns := m.cfg.Gateway
	if ns == "" {
		ns = "192.0.2.1"
	}
	if m.cfg.Role == RoleLXC {
		return fmt.Sprintf("# --- BEGIN PVE ---\nsearch lab.example\nnameserver %s\n# --- END PVE ---\n", ns)
	}
	return fmt.Sprintf("domain lab.example\nsearch lab.example\nnameserver %s\n", ns)
}

// getentDB answers getent passwd/group [KEY…]: every entry without a key, exit 2 for a
// key that is not found (getent(1)).
func (m *Machine) getentDB(inv *shell.Invocation, lines []string, keys []string) int {
	if len(keys) == 0 {
		for _, l := range lines {
			fmt.Fprintln(inv.Stdout, l)
		}
		return 0
	}
	code := 0
	for _, k := range keys {
		found := false
		for _, l := range lines {
			f := strings.Split(l, ":")
			if f[0] == k || (len(f) > 2 && f[2] == k) {
				fmt.Fprintln(inv.Stdout, l)
				found = true
				break
			}
		}
		if !found {
			code = 2
		}
	}
	return code
}

func (m *Machine) id(_ context.Context, inv *shell.Invocation) int {
	var flags string
	var user string
	for _, a := range inv.Args[1:] {
		switch {
		case a == "--user":
			flags += "u"
		case a == "--group":
			flags += "g"
		case a == "--groups":
			flags += "G"
		case a == "--name":
			flags += "n"
		case strings.HasPrefix(a, "--"):
			fmt.Fprintf(inv.Stderr, "id: unrecognized option '%s'\nTry 'id --help' for more information.\n", a)
			return 1
		case strings.HasPrefix(a, "-"):
			for _, c := range a[1:] {
				if !strings.ContainsRune("ugGnrz", c) {
					fmt.Fprintf(inv.Stderr, "id: invalid option -- '%c'\nTry 'id --help' for more information.\n", c)
					return 1
				}
			}
			flags += a[1:]
		default:
			user = a
		}
	}
	if user == "" {
		user = m.cfg.User
	}
	var entry []string
	for _, l := range m.passwd() {
		if f := strings.Split(l, ":"); f[0] == user || f[2] == user {
			entry = f
		}
	}
	if entry == nil {
		fmt.Fprintf(inv.Stderr, "id: '%s': no such user\n", user)
		return 1
	}
	uid, _ := strconv.Atoi(entry[2])
	gid, _ := strconv.Atoi(entry[3])
	gname := map[int]string{0: "root", 1: "daemon", 2: "bin", 3: "sys", 65534: "nogroup", 33: "www-data", 1000: entry[0]}[gid]
	if gname == "" {
		gname = entry[0]
	}
	type grp struct {
		id   int
		name string
	}
	gs := []grp{{gid, gname}}
	if uid == 1000 {
		gs = append(gs, grp{27, "sudo"}, grp{100, "users"})
	}
	name := strings.Contains(flags, "n")
	switch {
	case strings.Contains(flags, "u"):
		if name {
			fmt.Fprintln(inv.Stdout, entry[0])
		} else {
			fmt.Fprintln(inv.Stdout, uid)
		}
	case strings.Contains(flags, "G"):
		parts := make([]string, len(gs))
		for i, g := range gs {
			parts[i] = strconv.Itoa(g.id)
			if name {
				parts[i] = g.name
			}
		}
		fmt.Fprintln(inv.Stdout, strings.Join(parts, " "))
	case strings.Contains(flags, "g"):
		if name {
			fmt.Fprintln(inv.Stdout, gname)
		} else {
			fmt.Fprintln(inv.Stdout, gid)
		}
	default:
		parts := make([]string, len(gs))
		for i, g := range gs {
			parts[i] = fmt.Sprintf("%d(%s)", g.id, g.name)
		}
		fmt.Fprintf(inv.Stdout, "uid=%d(%s) gid=%d(%s) groups=%s\n", uid, entry[0], gid, gname, strings.Join(parts, ","))
	}
	return 0
}
