package system_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// goldenMachines are the four kinds of Debian machine the lab runs, each on a fixed clock.
func goldenMachines(t *testing.T) map[string]*shell.Shell {
	t.Helper()
	out := map[string]*shell.Shell{}
	for name, cfg := range map[string]system.Config{
		"pve": {Hostname: "pve1", Role: system.RoleProxmox, IPv4: "192.0.2.11", Gateway: "192.0.2.1", ZFSPools: []string{"tank"}},
		"ct": {Hostname: "web", Role: system.RoleLXC, IPv4: "192.0.2.101", Gateway: "192.0.2.1", Cores: 2, MemoryMB: 2048, DiskGB: 8,
			Units: []string{"nginx"}, Listeners: []system.Listener{{Port: 80, Process: "nginx.service"}}},
		"vm": {Hostname: "media", Role: system.RoleVM, Distro: "debian-13", IPv4: "192.0.2.102", Gateway: "192.0.2.1",
			Units: []string{"docker", "qemu-guest-agent"}, Containers: []string{"jellyfin", "postgres"}},
		"host": {Hostname: "vps", Role: system.RoleLinux, IPv4: "198.51.100.7", Gateway: "198.51.100.1", User: "dana"},
	} {
		sh, _ := newMachine(t, cfg)
		out[name] = sh
	}
	return out
}

// goldenCase is one read-only command: the machine it runs on, the command line, and the
// documented shape its output must have (a regular expression over the whole output, drawn
// from the program's manual: header line, column layout, field formats).
type goldenCase struct {
	machine, cmd string
	code         int
	shape        string
}

// goldenFamilies are the modelled programs, one golden file each.
var goldenFamilies = map[string][]goldenCase{
	"systemctl": {
		{"ct", "systemctl status nginx", 0, `^● nginx\.service - .+\n     Loaded: loaded \(/lib/systemd/system/nginx\.service; enabled; preset: enabled\)\n     Active: active \(running\) since \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; .+ ago\n   Main PID: \d+ \(nginx\)\n      Tasks: \d+ \(limit: \d+\)\n     Memory: [\d.]+M\n        CPU: .+\n     CGroup: /system\.slice/nginx\.service\n             └─\d+ .+\n\n(\w{3} \d\d \d\d:\d\d:\d\d web \S+\[\d+\]: .+\n)+$`},
		{"pve", "systemctl status", 0, `^● pve1\n    State: running\n    Units: \d+ loaded \(incl\. loaded aliases\)\n     Jobs: 0 queued\n   Failed: 0 units\n    Since: .+ UTC; .+ ago\n  systemd: 252\.\d+\n   CGroup: /\n$`},
		{"pve", "systemctl status apt-daily.timer", 0, `(?m)^● apt-daily\.timer - Daily apt download activities\n.*\n     Active: active \(waiting\) since .+\n    Trigger: \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; .+ left\n   Triggers: ● apt-daily\.service$`},
		{"ct", "systemctl list-units --type=service", 0, `^  UNIT +LOAD +ACTIVE +SUB +DESCRIPTION *\n(  \S+\.service +loaded +active +running +.+\n)+\nLOAD   = .+\nACTIVE = .+\nSUB    = .+\n\d+ loaded units listed\. Pass --all to see loaded but inactive units, too\.\nTo show all installed unit files use 'systemctl list-unit-files'\.\n$`},
		{"ct", "systemctl list-units --all --no-legend --plain", 0, `^(\S+ +loaded +(active|inactive) +\w+ +.+\n)+$`},
		{"ct", "systemctl list-units --state=failed", 0, `^0 loaded units listed\.`},
		{"pve", "systemctl list-timers", 0, `^NEXT +LEFT +LAST +PASSED +UNIT +ACTIVATES\n(\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC [\w ]+ left +(\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC [\w ]+ ago|- +-) +\S+\.timer +\S+\.service\n)+\n\d+ timers listed\.\nPass --all to see loaded but inactive timers, too\.\n$`},
		{"vm", "systemctl list-timers --all --no-pager", 0, `(?m)^NEXT +LEFT +LAST +PASSED +UNIT +ACTIVATES$`},
		{"ct", "systemctl list-unit-files --type=timer", 0, `^UNIT FILE +STATE +PRESET\n(\S+\.timer +enabled +enabled\n)+\n\d+ unit files listed\.\n$`},
		{"ct", "systemctl is-active nginx cron", 0, `^active\nactive\n$`},
		{"ct", "systemctl is-enabled nginx", 0, `^enabled\n$`},
		{"ct", "systemctl is-failed nginx", 1, `^active\n$`},
		{"ct", "systemctl show -p ActiveState,SubState,MainPID nginx", 0, `^ActiveState=active\nSubState=running\nMainPID=\d+\n$`},
		{"ct", "systemctl show -p ActiveState --value nginx", 0, `^active\n$`},
		{"pve", "systemctl show apt-daily.timer -p NextElapseUSecRealtime -p LastTriggerUSec", 0, `^NextElapseUSecRealtime=\w{3} .+ UTC\nLastTriggerUSec=(\w{3} .+ UTC|n/a)\n$`},
		{"ct", "systemctl cat nginx", 0, `^# /lib/systemd/system/nginx\.service\n\[Unit\]\nDescription=.+\n(.*\n)*\[Service\]\n(.*\n)*\[Install\]\nWantedBy=multi-user\.target\n$`},
		{"pve", "systemctl status apt-daily.service", 3, `^○ apt-daily\.service - Daily apt download activities\n     Loaded: loaded \(/lib/systemd/system/apt-daily\.service; static\)\n     Active: inactive \(dead\) since \w{3} .+ UTC; .+ ago\nTriggeredBy: ● apt-daily\.timer\n    Process: \d+ ExecStart=\S+ \(code=exited, status=0/SUCCESS\)\n   Main PID: \d+ \(code=exited, status=0/SUCCESS\)\n        CPU: \d+ms\n\n(\w{3} \d\d \d\d:\d\d:\d\d pve1 systemd\[1\]: .+\n)+$`},
		{"pve", "systemctl is-enabled apt-daily.service; systemctl is-active apt-daily.service", 3, `^static\ninactive\n$`},
		{"vm", "systemctl cat logrotate.timer", 0, `^# /usr/lib/systemd/system/logrotate\.timer\n\[Unit\]\n(.*\n)*\[Timer\]\nOnCalendar=daily\n`},
	},
	"journalctl": {
		{"ct", "journalctl -u nginx -n 3 --no-pager", 0, `^(\w{3} \d\d \d\d:\d\d:\d\d web \S+\[\d+\]: .+\n){3}$`},
		{"ct", "journalctl -u nginx --since '-2h' --no-pager", 0, `^(\w{3} \d\d \d\d:\d\d:\d\d web nginx\[\d+\]: .+\n){2,3}$`},
		{"ct", "journalctl -u nginx --since today --until '-3h' -o cat", 0, `^(.+\n)+$`},
		{"pve", "journalctl -u logrotate.service -n 3 --no-pager", 0, `^\w{3} \d\d \d\d:\d\d:\d\d pve1 systemd\[1\]: Starting logrotate\.service - Rotate log files\.\.\.\n.+ systemd\[1\]: logrotate\.service: Deactivated successfully\.\n.+ systemd\[1\]: Finished logrotate\.service - Rotate log files\.\n$`},
		{"ct", "journalctl -p err -b --no-pager", 0, `^-- No entries --\n$`},
		{"ct", "journalctl -b 0 -n 2 -o short-iso", 0, `^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d web \S+\[\d+\]: .+\n){2}$`},
		{"ct", "journalctl -u nginx -n 1 -o json", 0, `^\{"__CURSOR":"s=[0-9a-f]+;i=[0-9a-f]+;b=[0-9a-f]{32};m=[0-9a-f]+;t=[0-9a-f]+;x=[0-9a-f]+","__REALTIME_TIMESTAMP":"\d{16}","__MONOTONIC_TIMESTAMP":"\d+","_BOOT_ID":"[0-9a-f]{32}","PRIORITY":"6",.*"MESSAGE":".+".*\}\n$`},
		{"ct", "journalctl -u nginx -n 1 -o json-pretty", 0, `^\{\n\t"__CURSOR" : ".+",\n(\t"\w+" : ".*",\n)+\t"\w+" : ".*"\n\}\n$`},
		{"pve", "journalctl -k -n 2 --no-hostname", 0, `^(\w{3} \d\d \d\d:\d\d:\d\d kernel: .+\n){2}$`},
		{"ct", "journalctl --list-boots", 0, `^IDX BOOT ID +FIRST ENTRY +LAST ENTRY +\n  0 [0-9a-f]{32} \w{3} .+ UTC \w{3} .+ UTC\n$`},
		{"ct", "journalctl --disk-usage", 0, `^Archived and active journals take up [\d.]+M in the file system\.\n$`},
	},
	"packages": {
		{"ct", "apt list --installed 2>/dev/null | head -4", 0, `^Listing\.\.\. Done\n(\S+/\S+,now \S+ (amd64|all) \[installed(,upgradable to: \S+)?\]\n){3}$`},
		{"pve", "apt list --upgradable 2>/dev/null", 0, `^Listing\.\.\. Done\n(\S+/\S+ \S+ amd64 \[upgradable from: \S+\]\n)*$`},
		{"ct", "apt-cache policy bash", 0, `^bash:\n  Installed: \S+\n  Candidate: \S+\n  Version table:\n \*\*\* \S+ 500\n        500 http://deb\.debian\.org/debian bookworm/main amd64 Packages\n        100 /var/lib/dpkg/status\n$`},
		{"ct", "apt-cache policy", 0, `^Package files:\n 100 /var/lib/dpkg/status\n     release a=now\n( 500 http://\S+ \S+/main amd64 Packages\n     release v=.+\n     origin \S+\n)+Pinned packages:\n$`},
		{"ct", "dpkg -l 'bash*' 'coreutils'", 0, `^Desired=Unknown/Install/Remove/Purge/Hold\n\| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n\|/ Err\?=\(none\)/Reinst-required \(Status,Err: uppercase=bad\)\n\|\|/ Name +Version +Architecture +Description\n\+\+\+-=+-=+-=+-=+\n(ii  \S+ +\S+ +\S+ +.+\n)+$`},
		{"vm", "dpkg -s docker-ce", 0, `^Package: docker-ce\nStatus: install ok installed\nPriority: \w+\nSection: \w+\nInstalled-Size: \d+\nMaintainer: .+\nArchitecture: amd64\nVersion: \S+\nDescription: .+\n$`},
		{"ct", "dpkg-query -W -f '${Package} ${Version}\\n' systemd", 0, `^systemd 252\.\S+\n$`},
	},
	"storage": {
		{"pve", "df -h", 0, `^Filesystem +Size +Used +Avail +Use% +Mounted on\n(\S+ +[\d.]+[KMGT]? +[\d.]+[KMGT]? +[\d.]+[KMGT]? +\d+% /\S*\n)+$`},
		{"ct", "df -T", 0, `^Filesystem +Type +1K-blocks +Used +Available +Use% +Mounted on\n(\S+ +\w+ +\d+ +\d+ +\d+ +\d+% /\S*\n)+$`},
		{"host", "df -i /", 0, `^Filesystem +Inodes +IUsed +IFree +IUse% +Mounted on\n/dev/sda1 +\d+ +\d+ +\d+ +\d+% /\n$`},
		{"pve", "lsblk", 0, `^NAME +MAJ:MIN RM +SIZE RO TYPE MOUNTPOINTS\nnvme0n1 +259:0 +0 +[\d.]+G +0 disk\n├─nvme0n1p1 .+ part\n├─nvme0n1p2 .+ part /boot/efi\n└─nvme0n1p3 .+ part\n  ├─pve-swap .+ lvm  \[SWAP\]\n  ├─pve-root .+ lvm  /\n(.+\n)+$`},
		{"vm", "lsblk -f", 0, `^NAME +FSTYPE +FSVER +LABEL +UUID +FSAVAIL +FSUSE% +MOUNTPOINTS\nsda\n├─sda1 +ext4 +1\.0 +[0-9a-f-]{36} +[\d.]+G +\d+% /\n(.+\n)+$`},
		{"host", "lsblk -J", 0, `^\{\n   "blockdevices": \[\n      \{\n         "name": "sda",\n         "maj:min": "8:0",\n         "rm": false,\n         "size": "[\d.]+G",\n         "ro": false,\n         "type": "disk",\n         "mountpoints": \[\n             null\n         \],\n         "children": \[\n(.+\n)+   \]\n\}\n$`},
		{"host", "lsblk -d -n -o NAME,SIZE,TYPE", 0, `^sda +[\d.]+G disk\n$`},
		{"ct", "findmnt", 0, `^TARGET +SOURCE +FSTYPE +OPTIONS\n/ +\S+ +ext4 +rw,relatime\n(├─|└─|│ ).+\n(.+\n)*$`},
		{"pve", "findmnt -n -o SOURCE,FSTYPE /", 0, `^/dev/mapper/pve-root ext4\n$`},
		{"host", "findmnt -D", 0, `^SOURCE +FSTYPE +SIZE +USED +AVAIL +USE% +TARGET\n(\S+ +\w+ +[\d.]+[KMGT]? +[\d.]+[KMGT]?B? +[\d.]+[KMGT]? +\d+% +/\S*\n)+$`},
		{"host", "mount -t ext4", 0, `^/dev/sda1 on / type ext4 \(rw,relatime,errors=remount-ro\)\n$`},
		{"ct", "head -2 /proc/mounts", 0, `^(\S+ /\S* \S+ \S+ 0 0\n){2}$`},
		{"host", "du -sh /etc", 0, `^[\d.]+[KMG]?\t/etc\n$`},
		{"pve", "pvs", 0, `^  PV +VG +Fmt +Attr +PSize +PFree\n  /dev/nvme0n1p3 pve +lvm2 a-- +<?[\d.]+g +<?[\d.]+g\n$`},
		{"pve", "vgs", 0, `^  VG +#PV #LV #SN Attr +VSize +VFree\n  pve +1 +3 +0 wz--n- <?[\d.]+g <?[\d.]+g\n$`},
		{"pve", "lvs", 0, `^  LV +VG +Attr +LSize +Pool Origin Data% +Meta% +Move Log Cpy%Sync Convert\n  data pve +twi-a-tz-- <?[\d.]+g +[\d.]+ +[\d.]+\n  root pve +-wi-ao---- +<?[\d.]+g\n  swap pve +-wi-ao---- +<?[\d.]+g\n$`},
		{"pve", "zfs list", 0, `^NAME +USED +AVAIL +REFER +MOUNTPOINT\n(tank\S* +[\d.]+[KMGT] +[\d.]+[KMGT] +[\d.]+[KMGT] +/tank\S*\n)+$`},
		{"pve", "zfs list -H -o name,used", 0, `^(tank\S*\t[\d.]+[KMGT]\n)+$`},
		{"pve", "zpool list", 0, `^NAME +SIZE +ALLOC +FREE +CKPOINT +EXPANDSZ +FRAG +CAP +DEDUP +HEALTH +ALTROOT\ntank +[\d.]+T +[\d.]+[GT] +[\d.]+[GT] +- +- +\d+% +\d+% +1\.00x +ONLINE +-\n$`},
		{"pve", "zpool status", 0, `^  pool: tank\n state: ONLINE\n  scan: scrub repaired 0B in \d\d:\d\d:\d\d with 0 errors on \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\nconfig:\n\n\tNAME +STATE +READ WRITE CKSUM\n\ttank +ONLINE +0 +0 +0\n\t  mirror-0 +ONLINE +0 +0 +0\n(\t    \S+ +ONLINE +0 +0 +0\n){2}\nerrors: No known data errors\n$`},
		{"pve", "zpool status -x", 0, `^all pools are healthy\n$`},
	},
	"smartctl": {
		{"pve", "smartctl -H /dev/nvme0n1", 0, `^smartctl 7\.3 .+\nCopyright \(C\) .+www\.smartmontools\.org\n\n=== START OF SMART DATA SECTION ===\nSMART overall-health self-assessment test result: PASSED\n\n$`},
		{"pve", "smartctl -a /dev/nvme0n1", 0, `(?s)^smartctl .+=== START OF INFORMATION SECTION ===\nModel Number: +.+\n.+=== START OF SMART DATA SECTION ===\nSMART overall-health self-assessment test result: PASSED\n\nSMART/Health Information \(NVMe Log 0x02\)\nCritical Warning: +0x00\nTemperature: +\d+ Celsius\n.+\nError Information \(NVMe Log 0x01, 16 of 64 entries\)\nNo Errors Logged\n\n$`},
		{"host", "smartctl -a /dev/sda", 0, `(?s)=== START OF READ SMART DATA SECTION ===\nSMART overall-health self-assessment test result: PASSED\n\nSMART Attributes Data Structure revision number: 4\nVendor Specific SMART Attributes with Thresholds:\nID# ATTRIBUTE_NAME +FLAG +VALUE WORST THRESH TYPE +UPDATED +WHEN_FAILED RAW_VALUE\n(  ?\d+ \w+ +0x[0-9a-f]{4} +\d{3} +\d{3} +\d{3} +\w+ +Always +- +.+\n)+`},
		{"host", "smartctl --scan", 0, `^/dev/sda -d scsi # /dev/sda, SCSI device\n$`},
	},
	"network": {
		{"ct", "ip -br a", 0, `^lo +UNKNOWN +127\.0\.0\.1/8 ::1/128 \neth0@if\d+ +UP +192\.0\.2\.101/24 fe80::\S+/64 \n$`},
		{"vm", "ip a", 0, `^1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n    inet 127\.0\.0\.1/8 scope host lo\n       valid_lft forever preferred_lft forever\n    inet6 ::1/128 scope host noprefixroute \n       valid_lft forever preferred_lft forever\n2: ens18: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UP group default qlen 1000\n    link/ether ([0-9a-f]{2}:){5}[0-9a-f]{2} brd ff:ff:ff:ff:ff:ff\n    altname enp0s18\n    inet 192\.0\.2\.102/24 brd 192\.0\.2\.255 scope global ens18\n`},
		{"pve", "ip r", 0, `^default via 192\.0\.2\.1 dev vmbr0 proto kernel onlink \n192\.0\.2\.0/24 dev vmbr0 proto kernel scope link src 192\.0\.2\.11 \n$`},
		{"pve", "ip link", 0, `^(\d+: \S+: <[A-Z_,]+> mtu \d+ qdisc \w+( master vmbr0)? state \w+ group default qlen 1000\n    link/(loopback|ether) \S+ brd \S+\n)+$`},
		{"host", "ip -br link", 0, `^(\S+ +(UNKNOWN|UP) +([0-9a-f]{2}:){5}[0-9a-f]{2} <[A-Z_,]+> \n)+$`},
		{"ct", "ss -tlnp", 0, `^State +Recv-Q +Send-Q +Local Address:Port +Peer Address:PortProcess\n(LISTEN +0 +\d+ +\S+:\d+ +\S+:\* +users:\(\("\S+",pid=\d+,fd=\d+\)\)\n)+$`},
		{"host", "ss -tunap", 0, `^Netid +State +Recv-Q +Send-Q +Local Address:Port +Peer Address:Port +Process\n(tcp +(LISTEN|ESTAB) +0 +\d+ +\S+:\d+ +\S+:(\*|\d+) +users:\(\(.+\)\)\n)+$`},
		{"ct", "ping -c 2 -i 0.01 127.0.0.1", 0, `^PING 127\.0\.0\.1 \(127\.0\.0\.1\) 56\(84\) bytes of data\.\n(64 bytes from 127\.0\.0\.1: icmp_seq=\d ttl=64 time=\d+\.\d{3} ms\n){2}\n--- 127\.0\.0\.1 ping statistics ---\n2 packets transmitted, 2 received, 0% packet loss, time \d+ms\nrtt min/avg/max/mdev = [\d.]+/[\d.]+/[\d.]+/[\d.]+ ms\n$`},
		{"ct", "ping -c 1 -W 0.05 192.0.2.99", 1, `^PING 192\.0\.2\.99 \(192\.0\.2\.99\) 56\(84\) bytes of data\.\n\n--- 192\.0\.2\.99 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time \d+ms\n\n$`},
		{"host", "hostname -I", 0, `^198\.51\.100\.7 \n$`},
		{"ct", "cat /etc/resolv.conf", 0, `(?m)^nameserver 192\.0\.2\.1$`},
		{"vm", "getent hosts localhost", 0, `^127\.0\.0\.1 +localhost\n$`},
	},
	"processes": {
		{"ct", "ps aux", 0, `^USER +PID %CPU %MEM +VSZ +RSS TTY +STAT START +TIME COMMAND\n(\S+ +\d+ +\d+\.\d +\d+\.\d +\d+ +\d+ \S+ +\S+ +(\d\d:\d\d|\w{3}\d\d) +\d+:\d\d .+\n)+$`},
		{"ct", "ps -ef", 0, `^UID +PID +PPID +C STIME TTY +TIME CMD\n(\S+ +\d+ +\d+ +\d+ (\d\d:\d\d|\w{3}\d\d) \S+ +\d\d:\d\d:\d\d .+\n)+$`},
		{"ct", "ps -eo pid,comm,%cpu,%mem --sort=-%cpu", 0, `^    PID COMMAND         %CPU %MEM\n( *\d+ \S+ +\d+\.\d +\d+\.\d\n)+$`},
		{"ct", "ps", 0, `^    PID TTY          TIME CMD\n( +\d+ pts/0 +\d\d:\d\d:\d\d \S+\n)+$`},
		{"pve", "top -bn1 | head -6", 0, `^top - \d\d:\d\d:\d\d up .+,  1 user,  load average: [\d.]+, [\d.]+, [\d.]+\nTasks: +\d+ total, +\d+ running, +\d+ sleeping, +\d+ stopped, +\d+ zombie\n%Cpu\(s\): +[\d.]+ us, +[\d.]+ sy, .+ st \nMiB Mem : +[\d.]+ total, +[\d.]+ free, +[\d.]+ used, +[\d.]+ buff/cache +\nMiB Swap: +[\d.]+ total, +[\d.]+ free, +[\d.]+ used\. +[\d.]+ avail Mem \n\n$`},
		{"host", "free -h", 0, `^ +total +used +free +shared +buff/cache +available\nMem: +[\d.]+[KMGT]i +[\d.]+[KMGT]i +[\d.]+[KMGT]i +[\d.]+[KMGT]i +[\d.]+[KMGT]i +[\d.]+[KMGT]i\nSwap: +[\d.]+[KMGT]i +[\d.]+([KMGT]i|B) +[\d.]+[KMGT]i\n$`},
		{"host", "free -m", 0, `^ +total +used +free +shared +buff/cache +available\nMem: +\d+ +\d+ +\d+ +\d+ +\d+ +\d+\nSwap: +\d+ +\d+ +\d+\n$`},
		{"vm", "uptime", 0, `^ \d\d:\d\d:\d\d up .+,  1 user,  load average: \d+\.\d\d, \d+\.\d\d, \d+\.\d\d\n$`},
		{"host", "vmstat", 0, `^procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n +\d+ +\d+( +\d+){15}\n$`},
		{"vm", "vmstat", 0, `(?m)^ r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st gu$`},
		{"ct", "cat /proc/loadavg", 0, `^\d+\.\d\d \d+\.\d\d \d+\.\d\d \d+/\d+ \d+\n$`},
		{"ct", "head -3 /proc/meminfo", 0, `^MemTotal: +\d+ kB\nMemFree: +\d+ kB\nMemAvailable: +\d+ kB\n$`},
	},
	"users": {
		{"host", "who", 0, `^dana +pts/0 +\d{4}-\d\d-\d\d \d\d:\d\d \(198\.51\.100\.1\)\n$`},
		{"host", "w", 0, `^ \d\d:\d\d:\d\d up .+,  1 user,  load average: [\d.]+, [\d.]+, [\d.]+\nUSER +TTY +FROM +LOGIN@ +IDLE +JCPU +PCPU WHAT\ndana +pts/0 +198\.51\.100\.1 +\d\d:\d\d .+ w\n$`},
		{"host", "last -n 3", 0, `^(\S+ +\S+ +\S+ +\w{3} \w{3} [ \d]\d \d\d:\d\d .+\n){3}\nwtmp begins \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\n$`},
		{"host", "id", 0, `^uid=1000\(dana\) gid=1000\(dana\) groups=1000\(dana\),27\(sudo\),100\(users\)\n$`},
		{"ct", "id -un", 0, `^root\n$`},
		{"host", "getent passwd root dana", 0, `^root:x:0:0:root:/root:/bin/bash\ndana:x:1000:1000:dana,,,:/home/dana:/bin/bash\n$`},
		{"host", "lastlog -u dana", 0, `^Username +Port +From +Latest\ndana +pts/0 +198\.51\.100\.1 +\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \+0000 \d{4}\n$`},
		{"host", "who -b", 0, `^ +system boot  \d{4}-\d\d-\d\d \d\d:\d\d\n$`},
	},
	"cron": {
		{"ct", "crontab -l", 1, `^no crontab for root\n$`},
		{"ct", "printf '0 3 * * * /usr/local/bin/backup\\n' | crontab - && crontab -l", 0, `^0 3 \* \* \* /usr/local/bin/backup\n$`},
		{"host", "grep run-parts /etc/crontab", 0, `^(\d+ \S+\t\S+ \* \S+\troot\t.+run-parts --report /etc/cron\.\w+.*\n){4}$`},
		{"host", "ls /etc/cron.daily", 0, `^(\S+\n)+$`},
	},
	"docker": {
		{"vm", "docker ps", 0, `^CONTAINER ID +IMAGE +COMMAND +CREATED +STATUS +PORTS +NAMES\n([0-9a-f]{12} +\S+ +"\S+" +.+ ago +Up .+ +\S+\n)+$`},
		{"vm", "docker ps -a --format '{{.Names}}\t{{.Status}}'", 0, `^(\S+\tUp .+\n)+$`},
		{"vm", "docker ps --format 'table {{.Names}}\t{{.Image}}'", 0, `^NAMES +IMAGE\n(\S+ +\S+\n)+$`},
		{"vm", "docker images", 0, `^REPOSITORY +TAG +IMAGE ID +CREATED +SIZE\n(\S+ +\S+ +[0-9a-f]{12} +.+ ago +\d+MB\n)+$`},
		{"vm", "docker inspect jellyfin", 0, `^\[\n    \{\n        "Id": "[0-9a-f]{64}",\n        "Created": ".+",\n(.+\n)+    \}\n\]\n$`},
		{"vm", "docker inspect -f '{{.State.Status}} {{.State.Running}}' jellyfin", 0, `^running true\n$`},
		{"vm", "docker logs --tail 2 jellyfin", 0, `^(.+\n){2}$`},
		{"vm", "docker stats --no-stream", 0, `^CONTAINER ID +NAME +CPU % +MEM USAGE / LIMIT +MEM % +NET I/O +BLOCK I/O +PIDS\n([0-9a-f]{12} +\S+ +[\d.]+% +[\d.]+MiB / [\d.]+GiB +[\d.]+% +.+ / .+ +.+ / .+ +\d+\n)+$`},
		{"vm", "docker compose ls", 0, `^NAME +STATUS +CONFIG FILES\n(\S+ +running\(\d+\) +/\S+\n)+$`},
		{"vm", "cd /opt && mkdir -p jellyfin && cd jellyfin && docker compose ps", 0, `^NAME +IMAGE +COMMAND +SERVICE +CREATED +STATUS +PORTS\njellyfin-jellyfin-1 +\S+ +"\S+" +jellyfin +.+ ago +Up .+\n$`},
		{"vm", "docker info | head -12", 0, `^Client: Docker Engine - Community\n Version: +2[78]\.\d+\.\d+\n Context: +default\n Debug Mode: false\n Plugins:\n(.*\n)+$`},
		{"vm", "docker version --format x >/dev/null; docker --version", 0, `^Docker version \d+\.\d+\.\d+, build [0-9a-f]+\n$`},
	},
}

// TestGoldenOutputs runs every modelled read-only command and checks its output against the
// documented shape and against testdata/golden/<family>.txt (go test -update rewrites them).
func TestGoldenOutputs(t *testing.T) {
	machines := goldenMachines(t)
	total := 0
	families := make([]string, 0, len(goldenFamilies))
	for f := range goldenFamilies {
		families = append(families, f)
	}
	sort.Strings(families) // the machines' figures depend on the order commands run in
	for _, family := range families {
		cases := goldenFamilies[family]
		var b strings.Builder
		for _, c := range cases {
			total++
			out, code := sh(t, machines[c.machine], c.cmd)
			// ping's elapsed time is the test's wall clock, not the machine's.
			stable := elapsedMS.ReplaceAllString(out, "time Nms")
			fmt.Fprintf(&b, "$ [%s] %s\n# exit %d\n%s", c.machine, c.cmd, code, stable)
			if !strings.HasSuffix(out, "\n") && out != "" {
				b.WriteString("\n")
			}
			b.WriteString("\n")
			if code != c.code {
				t.Errorf("%s on %s: exit %d, want %d\n%s", c.cmd, c.machine, code, c.code, out)
			}
			if !regexp.MustCompile(c.shape).MatchString(out) {
				t.Errorf("%s on %s: output does not have the documented shape %s:\n%s", c.cmd, c.machine, c.shape, out)
			}
			lower := strings.ToLower(out)
			for _, w := range []string{"labsim", "simulat", "lab "} {
				if strings.Contains(lower, w) {
					t.Errorf("%s on %s names the lab (%q):\n%s", c.cmd, c.machine, w, out)
				}
			}
		}
		path := filepath.Join("testdata", "golden", family+".txt")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if string(want) != b.String() {
			t.Errorf("%s differs from %s (go test -update rewrites it after review):\n%s", family, path, diff(string(want), b.String()))
		}
	}
	if total < 60 {
		t.Fatalf("%d golden commands, want at least 60", total)
	}
}

var elapsedMS = regexp.MustCompile(`time \d+ms`)

// diff shows the first differing line.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, a, b)
		}
	}
	return ""
}
