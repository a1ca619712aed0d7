package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/remote"
)

func TestPickTemplate(t *testing.T) {
	t.Parallel()
	cached := []string{
		"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz",
		"local:vztmpl/debian-11-standard_11.7-1_amd64.tar.zst",
		"local:vztmpl/debian-12-standard_12.2-1_amd64.tar.zst",
		"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
		"local:vztmpl/debian-12-turnkey-nextcloud_18.0-1_amd64.tar.gz",
		"local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst",
	}
	for _, c := range []struct {
		name, want, got string
		auto            bool
		cache           []string
		err             string
	}{
		{"full volid cached", "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst",
			"local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst", false, cached, ""},
		{"file name cached", "debian-11-standard_11.7-1_amd64.tar.zst",
			"local:vztmpl/debian-11-standard_11.7-1_amd64.tar.zst", false, cached, ""},
		{"missing → newest debian", "debian-13-standard_13.0-1_amd64.tar.zst",
			"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", true, cached, ""},
		{"none requested → newest debian", "", "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", true, cached, ""},
		{"numeric not lexical order", "", "local:vztmpl/debian-12-standard_12.10-1_amd64.tar.zst", true,
			[]string{"local:vztmpl/debian-12-standard_12.9-1_amd64.tar.zst", "local:vztmpl/debian-12-standard_12.10-1_amd64.tar.zst",
				"local:vztmpl/debian-9-standard_9.9-1_amd64.tar.gz"}, ""},
		{"no debian at all", "debian-13", "", true, []string{"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"}, "no Debian"},
		{"empty cache", "", "", true, nil, "no Debian"},
	} {
		got, auto, err := pickTemplate(c.cache, c.want)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.got || auto != c.auto {
			t.Errorf("%s: pickTemplate = %q auto %v err %v, want %q auto %v", c.name, got, auto, err, c.got, c.auto)
		}
	}
}

func TestPveamTemplates(t *testing.T) {
	t.Parallel()
	out := "NAME                                                         SIZE  \n" +
		"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst         120.29MB\n" +
		"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz       3.10MB\n\n"
	got := pveamTemplates([]byte(out))
	if len(got) != 2 || got[0] != "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst" || got[1] != "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz" {
		t.Errorf("pveamTemplates = %q", got)
	}
	if got := pveamTemplates([]byte("NAME                                                         SIZE  \n")); len(got) != 0 {
		t.Errorf("header only = %q", got)
	}
}

func TestParsePctCreate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		params map[string]any
		check  func(pctCreateSpec) bool
		err    string
	}{
		{"defaults: dhcp, unprivileged", map[string]any{"hostname": "web", "vmid": float64(150)}, func(s pctCreateSpec) bool {
			return s.IP == "dhcp" && !s.Privileged && s.Bridge == "vmbr0" && s.Storage == "local" && s.VMID == 150 &&
				s.net0() == "name=eth0,bridge=vmbr0,ip=dhcp,type=veth"
		}, ""},
		{"privileged as 0", map[string]any{"hostname": "web", "privileged": float64(0), "nesting": "true"}, func(s pctCreateSpec) bool {
			return !s.Privileged && s.Nesting
		}, ""},
		{"privileged as \"1\"", map[string]any{"hostname": "web", "privileged": "1"}, func(s pctCreateSpec) bool { return s.Privileged }, ""},
		{"unprivileged false", map[string]any{"hostname": "web", "unprivileged": false}, func(s pctCreateSpec) bool { return s.Privileged }, ""},
		{"static with gateway", map[string]any{"hostname": "web", "ip": "192.0.2.10/24", "gw": "192.0.2.1", "bridge": "vmbr1"},
			func(s pctCreateSpec) bool {
				return s.net0() == "name=eth0,bridge=vmbr1,ip=192.0.2.10/24,gw=192.0.2.1,type=veth"
			}, ""},
		{"vmid as string", map[string]any{"hostname": "web", "vmid": "151"}, func(s pctCreateSpec) bool { return s.VMID == 151 }, ""},
		{"static without gateway", map[string]any{"hostname": "web", "ip": "192.0.2.10/24"}, nil, "do not guess"},
		{"gateway outside subnet", map[string]any{"hostname": "web", "ip": "192.0.2.10/28", "gw": "192.0.2.33"}, nil, "not inside"},
		{"static without prefix", map[string]any{"hostname": "web", "ip": "192.0.2.10", "gw": "192.0.2.1"}, nil, "prefix length"},
		{"gateway with dhcp", map[string]any{"hostname": "web", "gw": "192.0.2.1"}, nil, "without a static"},
		{"bad hostname", map[string]any{"hostname": "web; rm -rf /"}, nil, "not a valid host name"},
		{"no hostname", map[string]any{}, nil, "not a valid host name"},
		{"bad boolean", map[string]any{"hostname": "web", "privileged": "maybe"}, nil, "not a boolean"},
		{"vmid too small", map[string]any{"hostname": "web", "vmid": 5}, nil, "below 100"},
		{"bad bridge", map[string]any{"hostname": "web", "bridge": "vmbr0,ip=1.2.3.4"}, nil, "not a valid name"},
	} {
		s, err := parsePctCreate(c.params)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !c.check(s) {
			t.Errorf("%s: spec %+v, err %v", c.name, s, err)
		}
	}
}

func TestCreateLineQuotesAndFlags(t *testing.T) {
	t.Parallel()
	s, err := parsePctCreate(map[string]any{"hostname": "web", "vmid": 150, "nesting": 1, "privileged": 0, "cores": 2, "memory_mb": 1024})
	if err != nil {
		t.Fatal(err)
	}
	line, err := s.createLine(150, "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	want := "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname web --cores 2 --memory 1024 " +
		"--swap 512 --rootfs local-lvm:8 --net0 'name=eth0,bridge=vmbr0,ip=dhcp,type=veth' --unprivileged 1 --features 'nesting=1'"
	if line != want {
		t.Errorf("createLine =\n%s\nwant\n%s", line, want)
	}
	if msg := gatewaySilentMessage("192.0.2.1", "proxmox-host:atlas"); msg !=
		"gateway 192.0.2.1 did not answer from proxmox-host:atlas; do not guess another address — ask the operator" {
		t.Errorf("message = %q", msg)
	}
}

func TestParamShapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v       any
		want    bool
		present bool
		bad     bool
	}{
		{true, true, true, false}, {false, false, true, false}, {float64(1), true, true, false}, {float64(0), false, true, false},
		{"true", true, true, false}, {"False", false, true, false}, {"1", true, true, false}, {"0", false, true, false},
		{nil, false, false, false}, {float64(2), false, true, true}, {"maybe", false, true, true},
	} {
		got, ok, err := paramBool(map[string]any{"k": c.v}, "k")
		if got != c.want || ok != c.present || (err != nil) != c.bad {
			t.Errorf("paramBool(%#v) = %v %v %v", c.v, got, ok, err)
		}
	}
	if n, ok, err := paramInt(map[string]any{"k": 1.5}, "k"); err == nil {
		t.Errorf("paramInt(1.5) = %d %v", n, ok)
	}
	line, err := shellLine("systemctl", "restart", "caddy.service; reboot")
	if err != nil || line != "systemctl restart 'caddy.service; reboot'" {
		t.Errorf("shellLine = %q, %v", line, err)
	}
	if _, err := shellLine("docker", "exec", "c", "a\x00b"); err == nil {
		t.Error("NUL accepted")
	}
}

// Only the execution's own deadline (or qm giving up at it) is a timeout; an inner deadline,
// such as the dial's or the host key lookup's, is a failure with its own words.
func TestFromErrorClassifiesDeadlines(t *testing.T) {
	t.Parallel()
	e := New(Options{})
	j := job{Timeout: time.Second}
	live := context.Background()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	inner := fmt.Errorf("read pinned host key: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"inner deadline", live, inner, StatusFailed},
		{"own deadline", expired, inner, StatusTimedOut},
		{"guest timeout", live, fmt.Errorf("exec: %w", remote.ErrGuestTimeout), StatusTimedOut},
		{"unreachable", live, remote.ErrUnreachable, StatusFailed},
	} {
		if o := e.fromError(c.ctx, j, "", c.err); o.Status != c.want || o.ExitCode != nil {
			t.Errorf("%s: %+v, want %s", c.name, o, c.want)
		}
	}
}

func TestPGText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"plain": "plain", "nul\x00": "nul\uFFFD", "bad\xff\xfe": "bad\uFFFD", `q"\`: `q"\`} {
		if got := pgText(in); got != want {
			t.Errorf("pgText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := string(pgJSON([]byte(`{"a":"x\u0000","b":["\\u0000"]}`))); got != `{"a":"x`+"\uFFFD"+`","b":["\\u0000"]}` {
		t.Errorf("pgJSON = %s", got)
	}
}
