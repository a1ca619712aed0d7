package discover

import (
	"reflect"
	"testing"
)

// unitsPlain is `systemctl list-units --type=service --state=running --no-legend --plain
// --no-pager` on a Debian 12 LXC running Jellyfin and a PostgreSQL cluster.
const unitsPlain = `console-getty.service               loaded active running Console Getty
container-getty@1.service           loaded active running Container Getty on /dev/tty1
cron.service                        loaded active running Regular background program processing daemon
dbus.service                        loaded active running D-Bus System Message Bus
jellyfin.service                    loaded active running Jellyfin Media Server
postfix@-.service                   loaded active running Postfix Mail Transport Agent (instance -)
postgresql@16-main.service          loaded active running PostgreSQL Cluster 16-main
ssh.service                         loaded active running OpenBSD Secure Shell server
systemd-journald.service            loaded active running Journal Service
systemd-logind.service              loaded active running User Login Management
systemd-networkd.service            loaded active running Network Configuration
systemd-resolved.service            loaded active running Network Name Resolution
home-assistant@homeassistant.service loaded active running Home Assistant
`

// unitsLegend is the same command without --plain and --no-legend, with a failed unit and
// an exited one, as an operator's own systemctl shows it.
const unitsLegend = `  UNIT                     LOAD   ACTIVE SUB     DESCRIPTION
  caddy.service            loaded active running Caddy
● grafana-server.service   loaded failed failed  Grafana instance
  ifupdown-pre.service     loaded active exited  Helper to synchronize boot up for ifupdown
  nginx.service            loaded active running A high performance web server and a reverse proxy server
  backup.timer             loaded active waiting Nightly backup

LOAD   = Reflects whether the unit definition was properly loaded.
ACTIVE = The high-level unit activation state, i.e. generalization of SUB.
SUB    = The low-level unit activation state, values depend on unit type.
3 loaded units listed.
`

// listeners is `ss -Hltnp` on the same LXC, as root.
const listeners = `LISTEN 0      4096         0.0.0.0:8096       0.0.0.0:*    users:(("jellyfin",pid=412,fd=300))
LISTEN 0      200        127.0.0.1:5432       0.0.0.0:*    users:(("postgres",pid=388,fd=6))
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*    users:(("sshd",pid=201,fd=3))
LISTEN 0      100        127.0.0.1:25         0.0.0.0:*    users:(("master",pid=350,fd=13))
LISTEN 0      4096      127.0.0.54:53         0.0.0.0:*    users:(("systemd-resolve",pid=180,fd=20))
LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*    users:(("systemd-resolve",pid=180,fd=18))
LISTEN 0      4096            [::]:8096          [::]:*    users:(("jellyfin",pid=412,fd=301))
LISTEN 0      200            [::1]:5432          [::]:*    users:(("postgres",pid=388,fd=5))
LISTEN 0      128             [::]:22            [::]:*    users:(("sshd",pid=201,fd=4))
LISTEN 0      4096               *:8123             *:*    users:(("python3",pid=930,fd=11),("python3",pid=930,fd=12))
LISTEN 0      4096         0.0.0.0:8920       0.0.0.0:*    users:(("jellyfin",pid=412,fd=310))
LISTEN 0      4096         0.0.0.0:9000       0.0.0.0:*
`

func TestParseUnits(t *testing.T) {
	got := ParseUnits(unitsPlain)
	if len(got) != 13 {
		t.Fatalf("%d units: %+v", len(got), got)
	}
	if got[4] != (Unit{Name: "jellyfin.service", Description: "Jellyfin Media Server"}) {
		t.Errorf("jellyfin: %+v", got[4])
	}
	got = ParseUnits(unitsLegend)
	want := []Unit{{"caddy.service", "Caddy"}, {"nginx.service", "A high performance web server and a reverse proxy server"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with the legend: %+v", got)
	}
	if got := ParseUnits(""); len(got) != 0 {
		t.Errorf("empty output: %+v", got)
	}
}

func TestParseListeners(t *testing.T) {
	got := ParseListeners(listeners)
	if len(got) != 12 {
		t.Fatalf("%d listeners: %+v", len(got), got)
	}
	for i, want := range map[int]Listener{
		0:  {Address: "0.0.0.0", Port: 8096, Process: "jellyfin", PID: 412},
		5:  {Address: "127.0.0.53", Port: 53, Process: "systemd-resolve", PID: 180},
		6:  {Address: "::", Port: 8096, Process: "jellyfin", PID: 412},
		7:  {Address: "::1", Port: 5432, Process: "postgres", PID: 388},
		9:  {Address: "0.0.0.0", Port: 8123, Process: "python3", PID: 930},
		11: {Address: "0.0.0.0", Port: 9000},
	} {
		if got[i] != want {
			t.Errorf("listener %d: %+v, want %+v", i, got[i], want)
		}
	}
	if !got[1].Loopback() || !got[7].Loopback() || got[0].Loopback() || got[6].Loopback() {
		t.Error("loopback")
	}
	// With the header (no -H) and the Netid column (no -t), as labsim and older ss print it.
	withHeader := "State  Recv-Q Send-Q   Local Address:Port    Peer Address:Port Process\n" +
		"LISTEN 0      4096           0.0.0.0:8096         0.0.0.0:* users:((\"jellyfin\",pid=100,fd=3))\n" +
		"Netid State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n" +
		"tcp   LISTEN 0      511    [::ffff:127.0.0.1]:631 *:* users:((\"cupsd\",pid=7,fd=7))\n" +
		"udp   UNCONN 0      0      0.0.0.0:5353 0.0.0.0:* users:((\"avahi-daemon\",pid=8,fd=12))\n"
	got = ParseListeners(withHeader)
	want := []Listener{{Address: "0.0.0.0", Port: 8096, Process: "jellyfin", PID: 100},
		{Address: "::ffff:127.0.0.1", Port: 631, Process: "cupsd", PID: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a header: %+v", got)
	}
	if !got[1].Loopback() {
		t.Error("a v4-mapped loopback is loopback")
	}
}

func TestPlumbing(t *testing.T) {
	for _, u := range []string{"ssh.service", "sshd.service", "cron.service", "dbus.service", "systemd-journald.service",
		"systemd-resolved.service", "getty@tty1.service", "container-getty@1.service", "console-getty.service",
		"networking.service", "postfix@-.service", "user@0.service", "pveproxy.service", "pve-cluster.service",
		"qemu-guest-agent.service"} {
		if !IsPlumbing(u) {
			t.Errorf("%s is plumbing", u)
		}
	}
	for _, u := range []string{"jellyfin.service", "nginx.service", "postgresql@16-main.service", "docker.service",
		"caddy.service", "sshuttle.service", "crond-exporter.service"} {
		if IsPlumbing(u) {
			t.Errorf("%s is not plumbing", u)
		}
	}
}

func TestMatch(t *testing.T) {
	var units []Unit
	for _, u := range ParseUnits(unitsPlain) {
		if !IsPlumbing(u.Name) {
			units = append(units, u)
		}
	}
	names := []string{}
	for _, u := range units {
		names = append(names, u.Name)
	}
	if want := []string{"jellyfin.service", "postgresql@16-main.service", "home-assistant@homeassistant.service"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("services: %v", names)
	}
	owned, unmatched := Match(units, ParseListeners(listeners))
	if p := Ports(owned["jellyfin.service"]); !reflect.DeepEqual(p, []int{8096, 8920}) {
		t.Errorf("jellyfin: %v", p)
	}
	if p := MainPort(owned["jellyfin.service"]); p != 8096 {
		t.Errorf("jellyfin's main port %d", p)
	}
	// postgres is a prefix of postgresql; it listens on loopback only.
	if p := Ports(owned["postgresql@16-main.service"]); !reflect.DeepEqual(p, []int{5432}) || MainPort(owned["postgresql@16-main.service"]) != 5432 {
		t.Errorf("postgresql: %v", p)
	}
	if len(owned["home-assistant@homeassistant.service"]) != 0 {
		t.Errorf("python3 is not home-assistant: %v", owned["home-assistant@homeassistant.service"])
	}
	var left []int
	for _, l := range unmatched {
		left = append(left, l.Port)
	}
	// sshd, master and systemd-resolve belong to plumbing left out; python3 and the ownerless
	// 9000 to nobody.
	if want := []int{22, 25, 53, 53, 22, 8123, 9000}; !reflect.DeepEqual(left, want) {
		t.Errorf("unmatched %v", left)
	}
	if MainPort(nil) != 0 || len(Ports(nil)) != 0 {
		t.Error("no listeners")
	}
}

func TestMatchScore(t *testing.T) {
	for _, c := range []struct {
		unit, proc string
		want       int
	}{
		{"nginx.service", "nginx", 3},
		{"ssh.service", "sshd", 2},
		{"mariadb.service", "mariadbd", 2},
		{"grafana-server.service", "grafana", 2},
		{"prometheus-node-exporter.service", "prometheus-node", 2},
		{"postgresql@16-main.service", "postgres", 2},
		{"Jellyfin.service", "jellyfin", 3},
		{"node-exporter.service", "no", 0},
		{"caddy.service", "python3", 0},
		{"caddy.service", "", 0},
	} {
		if got := matchScore(c.unit, c.proc); got != c.want {
			t.Errorf("%s / %s: %d, want %d", c.unit, c.proc, got, c.want)
		}
	}
	// Of two prefixes the longer shared one wins: grafana-agent's "grafana-agent" listener is
	// not grafana-server's.
	owned, _ := Match([]Unit{{Name: "grafana-server.service"}, {Name: "grafana-agent.service"}},
		[]Listener{{Port: 3000, Process: "grafana"}, {Port: 12345, Process: "grafana-agent"}})
	if p := Ports(owned["grafana-agent.service"]); !reflect.DeepEqual(p, []int{12345}) {
		t.Errorf("grafana-agent %v", p)
	}
	if p := Ports(owned["grafana-server.service"]); !reflect.DeepEqual(p, []int{3000}) {
		t.Errorf("grafana-server %v", p)
	}
}

func TestPropose(t *testing.T) {
	st := graphState{
		onByUnit: map[string]string{"caddy.service": "reverse-proxy:caddy"},
		onByName: map[string]string{"caddy": "reverse-proxy:caddy", "jellyfin": "service:jellyfin"},
		taken:    map[string]string{"service:nginx": "lxc:web", "service:redis": "", "service:redis-cache": "lxc:other"},
	}
	for _, c := range []struct {
		unit, name, entity string
		exists, note       bool
	}{
		{"caddy.service", "caddy", "reverse-proxy:caddy", true, false},
		{"jellyfin.service", "jellyfin", "service:jellyfin", true, false},
		{"nginx.service", "nginx-cache", "", false, true},
		{"redis.service", "redis-cache", "", false, true},
		{"vaultwarden.service", "vaultwarden", "", false, false},
	} {
		name, exists, entity, note := st.propose(c.unit, "cache")
		if name != c.name || exists != c.exists || entity != c.entity || (note != "") != c.note {
			t.Errorf("%s: %q %v %q %q", c.unit, name, exists, entity, note)
		}
	}
}
