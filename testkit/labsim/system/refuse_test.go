package system_test

import "testing"

// TestRefusals checks that what the lab does not model is refused exactly as the real tool
// refuses an invalid sub-command or option, and that a program the machine does not have
// answers as bash does.
func TestRefusals(t *testing.T) {
	machines := goldenMachines(t)
	for _, tc := range []struct {
		machine, cmd, want string
		code               int
	}{
		{"ct", "systemctl frobnicate", "Unknown command verb 'frobnicate'.\n", 1},
		{"ct", "systemctl --frob status", "systemctl: unrecognized option '--frob'\n", 1},
		{"ct", "systemctl -Z status", "systemctl: invalid option -- 'Z'\n", 1},
		{"ct", "systemctl cat nope", "No files found for nope.service.\n", 1},
		{"ct", "systemctl status nope", "Unit nope.service could not be found.\n", 4},
		{"ct", "systemctl is-active nope", "inactive\n", 3},
		{"ct", "journalctl --frob", "journalctl: unrecognized option '--frob'\n", 1},
		{"ct", "journalctl -Z", "journalctl: invalid option -- 'Z'\n", 1},
		{"ct", "journalctl -o yaml", "Unknown output format 'yaml'.\n", 1},
		{"ct", "journalctl -b -1", "Data from the specified boot (-1) is not available: No data available\n", 1},
		{"ct", "journalctl --since 'next blue moon'", "Failed to parse timestamp: next blue moon\n", 1},
		{"ct", "journalctl -u nope", "-- No entries --\n", 0},
		{"ct", "ls --frob", "ls: unrecognized option '--frob'\nTry 'ls --help' for more information.\n", 2},
		{"ct", "df --frob", "df: unrecognized option '--frob'\nTry 'df --help' for more information.\n", 1},
		{"ct", "df -Z", "df: invalid option -- 'Z'\nTry 'df --help' for more information.\n", 1},
		{"ct", "lsblk --frob", "lsblk: unrecognized option '--frob'\nTry 'lsblk --help' for more information.\n", 1},
		{"ct", "lsblk -o NAME,FROB", "lsblk: unknown column: FROB\n", 1},
		{"ct", "findmnt --frob", "findmnt: unrecognized option '--frob'\nTry 'findmnt --help' for more information.\n", 1},
		{"ct", "findmnt /nope", "", 1},
		{"ct", "mount --frob", "mount: unrecognized option '--frob'\nTry 'mount --help' for more information.\n", 1},
		{"vm", "docker frob", "docker: 'frob' is not a docker command.\nSee 'docker --help'\n", 1},
		{"vm", "docker ps --frob", "unknown flag: --frob\nSee 'docker ps --help'.\n", 125},
		{"vm", "docker logs nope", "Error response from daemon: No such container: nope\n", 1},
		{"vm", "docker inspect nope", "[]\nError: No such object: nope\n", 1},
		{"ct", "apt-get frob", "E: Invalid operation frob\n", 100},
		{"ct", "apt-cache frob", "E: Invalid operation frob\n", 100},
		{"ct", "apt-cache policy nope", "N: Unable to locate package nope\n", 0},
		{"ct", "dpkg -s nope", "dpkg-query: package 'nope' is not installed and no information is available\nUse dpkg --info (= dpkg-deb --info) to examine archive files.\n", 1},
		{"ct", "dpkg -l nope", "dpkg-query: no packages found matching nope\n", 1},
		{"ct", "ip frob", "Object \"frob\" is unknown, try \"ip help\".\n", 1},
		{"ct", "ip -Z a", "Option \"-Z\" is unknown, try \"ip -help\".\n", 255},
		{"ct", "ip a show dev nope", "Device \"nope\" does not exist.\n", 1},
		{"ct", "ss -Z", "ss: invalid option -- 'Z'\nUsage: ss [ OPTIONS ]\n       ss [ OPTIONS ] [ FILTER ]\n", 255},
		{"pve", "zfs frob", "unrecognized command 'frob'\nusage: zfs command args ...\n", 2},
		{"pve", "zpool frob", "unrecognized command 'frob'\nusage: zpool command args ...\n", 2},
		{"pve", "zpool status nope", "cannot open 'nope': no such pool\n", 1},
		{"pve", "lvs nope", "  Volume group \"nope\" not found\n  Cannot process volume group nope\n", 5},
		{"ct", "ps --frob", "error: unknown gnu long option\n\nUsage:\n ps [options]\n\n Try 'ps --help <simple|list|output|threads|misc|all>'\n  or 'ps --help <s|l|o|t|m|a>'\n for additional help text.\n\nFor more details see ps(1).\n", 1},
		{"ct", "ps -o pid,frob", "error: unknown user-defined format specifier \"frob\"\n\nUsage:\n ps [options]\n\n Try 'ps --help <simple|list|output|threads|misc|all>'\n  or 'ps --help <s|l|o|t|m|a>'\n for additional help text.\n\nFor more details see ps(1).\n", 1},
		{"ct", "vmstat --frob", "vmstat: unrecognized option '--frob'\nTry 'vmstat --help' for more information.\n", 1},
		{"ct", "who --frob", "who: unrecognized option '--frob'\nTry 'who --help' for more information.\n", 1},
		{"ct", "id --frob", "id: unrecognized option '--frob'\nTry 'id --help' for more information.\n", 1},
		{"ct", "id nope", "id: 'nope': no such user\n", 1},
		{"ct", "getent frob", "Unknown database: frob\n", 1},
		{"ct", "nosuchprog --help", "bash: nosuchprog: command not found\n", 127},
		{"ct", "sh -c 'true; nosuchprog'", "sh: 1: nosuchprog: not found\n", 127},
		{"ct", "printf 'true\\nnosuchprog\\n' > /tmp/s.sh; sh /tmp/s.sh", "/tmp/s.sh: 2: nosuchprog: not found\n", 127},
		{"ct", "env nosuchprog", "env: 'nosuchprog': No such file or directory\n", 127},
		{"ct", "timeout 5 nosuchprog", "timeout: failed to run command 'nosuchprog': No such file or directory\n", 127},
		{"ct", "sudo nosuchprog", "sudo: nosuchprog: command not found\n", 1},
		{"ct", "zpool status", "bash: zpool: command not found\n", 127},
		{"ct", "smartctl -H /dev/sda", "bash: smartctl: command not found\n", 127},
		{"host", "lvs", "bash: lvs: command not found\n", 127},
		{"host", "resolvectl status", "bash: resolvectl: command not found\n", 127},
		{"vm", "lastlog", "bash: lastlog: command not found\n", 127},
		{"ct", "docker ps", "bash: docker: command not found\n", 127},
	} {
		out, code := sh(t, machines[tc.machine], tc.cmd)
		if out != tc.want || code != tc.code {
			t.Errorf("%s on %s:\n got %q exit %d\nwant %q exit %d", tc.cmd, tc.machine, out, code, tc.want, tc.code)
		}
	}
}
