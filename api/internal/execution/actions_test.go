package execution

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestFlexBool(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    bool
		wantErr string
	}{
		{`true`, true, ""},
		{`false`, false, ""},
		{`0`, false, ""},
		{`1`, true, ""},
		{`1.0`, true, ""},
		{`"true"`, true, ""},
		{`"false"`, false, ""},
		{`"TRUE"`, true, ""},
		{`"1"`, true, ""},
		{`"0"`, false, ""},
		{`2`, false, "got 2"},
		{`-1`, false, "got -1"},
		{`"maybe"`, false, `got "maybe"`},
		{`"yes"`, false, `got "yes"`},
		{`[]`, false, "an array"},
		{`{"a":1}`, false, "an object"},
	}
	for _, c := range cases {
		got, err := FlexBool(json.RawMessage(c.in))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("FlexBool(%s) error = %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("FlexBool(%s) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestNormaliseAction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		action    string
		params    string
		wantCmd   string
		wantParam map[string]any // subset checked
		wantField string         // a *FieldError naming this field
		wantIn    string         // ... whose reason contains this
	}{
		{name: "pct_create defaults", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web"}`,
			wantCmd: "pct create 150 local:vztmpl/newest-debian --hostname web --storage local --net0 name=eth0,bridge=vmbr0,ip=dhcp --memory 512 --cores 1 --unprivileged 1 --features nesting=0 && pct start 150",
			wantParam: map[string]any{"vmid": 150, "storage": "local", "bridge": "vmbr0", "ip": "dhcp", "gw": "",
				"privileged": false, "nesting": false, "template": ""}},
		{name: "pct_create privileged 0 and nesting \"1\"", action: ActionPctCreate,
			params:    `{"vmid": "151", "hostname": "app", "privileged": 0, "nesting": "1", "template": "debian-12-standard_12.7-1_amd64.tar.zst"}`,
			wantCmd:   "pct create 151 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname app --storage local --net0 name=eth0,bridge=vmbr0,ip=dhcp --memory 512 --cores 1 --unprivileged 1 --features nesting=1 && pct start 151",
			wantParam: map[string]any{"vmid": 151, "privileged": false, "nesting": true}},
		{name: "pct_create privileged true bridge static ip", action: ActionPctCreate,
			params:    `{"vmid": 152, "hostname": "dns", "privileged": true, "bridge": "vmbr1", "ip": "192.0.2.10/24", "gw": "192.0.2.1", "memory": 1024, "cores": 2}`,
			wantCmd:   "pct create 152 local:vztmpl/newest-debian --hostname dns --storage local --net0 name=eth0,bridge=vmbr1,ip=192.0.2.10/24,gw=192.0.2.1 --memory 1024 --cores 2 --unprivileged 0 --features nesting=0 && pct start 152",
			wantParam: map[string]any{"ip": "192.0.2.10/24", "gw": "192.0.2.1", "bridge": "vmbr1", "privileged": true}},
		{name: "pct_create template with its storage", action: ActionPctCreate,
			params:    `{"vmid": 153, "hostname": "x", "template": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"}`,
			wantParam: map[string]any{"template": "debian-12-standard_12.7-1_amd64.tar.zst"}},
		{name: "privileged maybe", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "privileged": "maybe"}`,
			wantField: "params.privileged", wantIn: `"maybe"`},
		{name: "nesting object", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "nesting": {}}`,
			wantField: "params.nesting", wantIn: "an object"},
		{name: "missing vmid", action: ActionPctCreate, params: `{"hostname": "web"}`, wantField: "params.vmid", wantIn: "required"},
		{name: "vmid too small", action: ActionPctCreate, params: `{"vmid": 5, "hostname": "web"}`, wantField: "params.vmid", wantIn: "out of range"},
		{name: "vmid fractional", action: ActionPctCreate, params: `{"vmid": 150.5, "hostname": "web"}`, wantField: "params.vmid", wantIn: "integer"},
		{name: "bad hostname", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web; rm -rf /"}`, wantField: "params.hostname"},
		{name: "static ip without gw", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "ip": "192.0.2.10/24"}`,
			wantField: "params.gw", wantIn: "ask the operator"},
		{name: "gw outside subnet", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "ip": "192.0.2.10/24", "gw": "198.51.100.1"}`,
			wantField: "params.gw", wantIn: "not inside 192.0.2.0/24"},
		{name: "gw with dhcp", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "gw": "192.0.2.1"}`,
			wantField: "params.gw", wantIn: "dhcp"},
		{name: "ip without prefix", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "ip": "192.0.2.10", "gw": "192.0.2.1"}`,
			wantField: "params.ip"},
		{name: "template storage mismatch", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "template": "nfs:vztmpl/debian.tar.zst"}`,
			wantField: "params.template", wantIn: "storage"},
		{name: "unknown param", action: ActionPctCreate, params: `{"vmid": 150, "hostname": "web", "privilidged": true}`,
			wantField: "params.privilidged", wantIn: "privileged"},
		{name: "params not object", action: ActionPctCreate, params: `[1]`, wantField: "params"},
		{name: "apt_upgrade", action: ActionAptUpgrade, params: `{}`, wantCmd: "apt-get update && apt-get -y upgrade"},
		{name: "apt_upgrade null params", action: ActionAptUpgrade, params: `null`, wantCmd: "apt-get update && apt-get -y upgrade"},
		{name: "apt_upgrade takes nothing", action: ActionAptUpgrade, params: `{"packages": ["x"]}`, wantField: "params.packages", wantIn: "takes none"},
		{name: "restart", action: ActionRestart, params: `{"unit": "caddy.service"}`, wantCmd: "systemctl restart caddy.service"},
		{name: "restart bad unit", action: ActionRestart, params: `{"unit": "caddy; reboot"}`, wantField: "params.unit"},
		{name: "restart option as unit", action: ActionRestart, params: `{"unit": "--force"}`, wantField: "params.unit"},
		{name: "systemctl", action: ActionSystemctl, params: `{"verb": "status", "unit": "nginx"}`, wantCmd: "systemctl status nginx"},
		{name: "systemctl bad verb", action: ActionSystemctl, params: `{"verb": "isolate", "unit": "rescue.target"}`, wantField: "params.verb"},
		{name: "pct_exec", action: ActionPctExec, params: `{"vmid": 101, "command": "df -h /"}`, wantCmd: "df -h /",
			wantParam: map[string]any{"vmid": 101, "command": "df -h /"}},
		{name: "pct_exec without vmid", action: ActionPctExec, params: `{"command": "uptime"}`, wantCmd: "uptime"},
		{name: "pct_exec NUL", action: ActionPctExec, params: `{"command": "a\u0000b"}`, wantField: "params.command", wantIn: "NUL"},
		{name: "docker_exec", action: ActionDockerExec, params: `{"container": "web", "command": "echo 'hi there'"}`,
			wantCmd: `docker exec web sh -c "echo 'hi there'"`},
		{name: "docker_exec bad container", action: ActionDockerExec, params: `{"container": "-it", "command": "sh"}`, wantField: "params.container"},
		{name: "run is not typed", action: ActionRun, params: `{}`, wantField: "action"},
		{name: "unknown action", action: "reboot", params: `{}`, wantField: "action", wantIn: "pct_create"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n, err := NormaliseAction(c.action, json.RawMessage(c.params))
			if c.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != c.wantField || !strings.Contains(fe.Reason, c.wantIn) {
					t.Fatalf("err = %v, want a field error on %s containing %q", err, c.wantField, c.wantIn)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormaliseAction: %v", err)
			}
			if c.wantCmd != "" && n.Command != c.wantCmd {
				t.Errorf("command\n got %s\nwant %s", n.Command, c.wantCmd)
			}
			for k, want := range c.wantParam {
				if got := n.Params[k]; got != want {
					t.Errorf("params[%s] = %#v, want %#v", k, got, want)
				}
			}
			// The stored params must round-trip through JSON unchanged in meaning.
			b, err := json.Marshal(n.Params)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(b, &back); err != nil || len(back) != len(n.Params) {
				t.Fatalf("params do not round-trip: %s", b)
			}
		})
	}
}

func TestActionFloor(t *testing.T) {
	t.Parallel()
	for _, a := range []string{ActionPctCreate, ActionAptUpgrade, ActionRestart} {
		if actionFloor[a] == "" {
			t.Errorf("%s has no floor: a typed action that changes a machine must never run unattended", a)
		}
	}
}

func TestDedupKeyDistinguishesParts(t *testing.T) {
	t.Parallel()
	base := dedupKey("t", "run", "ls", []byte(`{}`), "s")
	for _, other := range []string{
		dedupKey("u", "run", "ls", []byte(`{}`), "s"),
		dedupKey("t", "restart", "ls", []byte(`{}`), "s"),
		dedupKey("t", "run", "ls -l", []byte(`{}`), "s"),
		dedupKey("t", "run", "ls", []byte(`{"a":1}`), "s"),
		dedupKey("t", "run", "ls", []byte(`{}`), "s2"),
		dedupKey("t", "run", "ls", []byte(`{}`), ""),
		dedupKey("t", "runls", "", []byte(`{}`), "s"),
	} {
		if other == base {
			t.Fatalf("dedup key collides across different requests")
		}
	}
	if dedupKey("t", "run", "ls", []byte(`{}`), "s") != base {
		t.Fatal("dedup key is not deterministic")
	}
}

func TestTextOf(t *testing.T) {
	t.Parallel()
	in := []byte("a\x00b\xffc\"\\")
	got := TextOf(in)
	if got != "a\x00b\uFFFDc\"\\" {
		t.Fatalf("TextOf = %q", got)
	}
}
