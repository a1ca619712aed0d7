// Package cron simulates Debian's cron: crontab -l/-r/-u reading the spool under
// /var/spool/cron/crontabs in the machine's sandbox, and the files a fresh Debian system has
// (/etc/crontab, /etc/cron.daily, …). Formats follow crontab(1) and crontab(5) of Debian's
// cron 3.0pl1.
package cron

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"io"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Files are the cron files of a fresh Debian machine.
func Files() map[string][]byte {
	return map[string][]byte{
		"/etc/crontab": []byte(`# /etc/crontab: system-wide crontab
# Unlike any other crontab you don't have to run the ` + "`crontab'" + `
# command to install the new version when you edit this file
# and files in /etc/cron.d. These files also have username fields,
# that none of the other crontabs do.

SHELL=/bin/sh
# You can also override PATH, but by default, newer versions inherit it from the environment
#PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin

# Example of job definition:
# .---------------- minute (0 - 59)
# |  .------------- hour (0 - 23)
# |  |  .---------- day of month (1 - 31)
# |  |  |  .------- month (1 - 12) OR jan,feb,mar,apr ...
# |  |  |  |  .---- day of week (0 - 6) (Sunday=0 or 7) OR sun,mon,tue,wed,thu,fri,sat
# |  |  |  |  |
# *  *  *  *  * user-name command to be executed
17 *	* * *	root	cd / && run-parts --report /etc/cron.hourly
25 6	* * *	root	test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
47 6	* * 7	root	test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }
52 6	1 * *	root	test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }
#
`),
		"/etc/cron.d/e2scrub_all":        []byte("30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron\n10 3 * * * root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r\n"),
		"/etc/cron.daily/apt-compat":     []byte("#!/bin/sh\n\nset -e\n\n# Systemd systems use a systemd timer unit which is preferable to\n# run. We want to randomize the apt update and unattended-upgrade\n# runs as much as possible to avoid hitting the mirrors all at the\n# same time. The systemd time is better at this than the fixed\n# cron.daily time\nif [ -d /run/systemd/system ]; then\n    exit 0\nfi\n"),
		"/etc/cron.daily/dpkg":           []byte("#!/bin/sh\n\n# Skip if systemd is running.\nif [ -d /run/systemd/system ]; then\n    exit 0\nfi\n\n/usr/libexec/dpkg/dpkg-db-backup\n"),
		"/etc/cron.daily/man-db":         []byte("#!/bin/sh\n#\n# man-db cron daily\n\nset -e\n\nif [ -d /run/systemd/system ]; then\n    # Skip in favour of systemd timer.\n    exit 0\nfi\n"),
		"/etc/cron.daily/logrotate":      []byte("#!/bin/sh\n\n# skip in favour of systemd timer\nif [ -d /run/systemd/system ]; then\n    exit 0\nfi\n\n/usr/sbin/logrotate /etc/logrotate.conf\n"),
		"/etc/cron.hourly/.placeholder":  []byte("# DO NOT EDIT OR REMOVE\n# This file is a simple placeholder to keep dpkg from removing this directory\n"),
		"/etc/cron.weekly/.placeholder":  []byte("# DO NOT EDIT OR REMOVE\n# This file is a simple placeholder to keep dpkg from removing this directory\n"),
		"/etc/cron.monthly/.placeholder": []byte("# DO NOT EDIT OR REMOVE\n# This file is a simple placeholder to keep dpkg from removing this directory\n"),
	}
}

// Dirs are the cron directories of a fresh machine.
func Dirs() []string {
	return []string{"/etc/cron.d", "/etc/cron.daily", "/etc/cron.hourly", "/etc/cron.weekly", "/etc/cron.monthly", "/var/spool/cron/crontabs"}
}

const usage = `usage:	crontab [-u user] file
	crontab [ -u user ] [ -i ] { -e | -l | -r }
		(default operation is replace, per 1003.2)
	-e	(edit user's crontab)
	-l	(list user's crontab)
	-r	(delete user's crontab)
	-i	(prompt before deleting user's crontab)
`

// Crontab is the crontab program.
func Crontab(_ context.Context, inv *shell.Invocation) int {
	user := inv.Getenv("USER")
	if user == "" {
		user = "root"
	}
	op, file := "", ""
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-u" && i+1 < len(args):
			i++
			user = args[i]
		case a == "-l" || a == "-r" || a == "-e":
			op = a
		case a == "-i":
		case strings.HasPrefix(a, "-") && a != "-":
			fmt.Fprintf(inv.Stderr, "crontab: invalid option -- '%s'\ncrontab: usage error: unrecognized option\n%s", strings.TrimLeft(a, "-")[:1], usage)
			return 1
		default:
			file = a
		}
	}
	path := "/var/spool/cron/crontabs/" + user
	switch op {
	case "-l":
		data, err := inv.FS().ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(inv.Stderr, "no crontab for %s\n", user)
			return 1
		}
		if err != nil {
			return inv.PathError(path, err)
		}
		fmt.Fprint(inv.Stdout, string(data))
		return 0
	case "-r":
		if err := inv.FS().Remove(path); err != nil {
			fmt.Fprintf(inv.Stderr, "no crontab for %s\n", user)
			return 1
		}
		return 0
	case "-e":
		// Without a terminal the editor gives up at once, and crontab says so.
		fmt.Fprintf(inv.Stderr, "no crontab for %s - using an empty one\ncrontab: \"/usr/bin/sensible-editor\" exited with status 1\n", user)
		return 1
	}
	if file == "" {
		fmt.Fprintf(inv.Stderr, "crontab: usage error: file name must be specified for replace\n%s", usage)
		return 1
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(inv.Stdin)
	} else {
		data, err = inv.FS().ReadFile(inv.Abs(file))
	}
	if err != nil {
		fmt.Fprintf(inv.Stderr, "%s: No such file or directory\n", file)
		return 1
	}
	if err := inv.FS().WriteFile(path, data, 0o600); err != nil {
		return inv.PathError(path, err)
	}
	return 0
}
