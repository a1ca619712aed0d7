package proxmox

import (
	"encoding/json"
	"testing"
)

func TestFormatPctList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rows []pctRow
		want string
	}{
		{"empty prints nothing", nil, ""},
		{"padding, lock and sort", []pctRow{
			{VMID: 101, Status: "stopped", Lock: "backup", Name: "dns"},
			{VMID: 100, Status: "running", Name: "pihole"},
		}, "VMID       Status     Lock         Name                \n" +
			"100        running                 pihole              \n" +
			"101        stopped    backup       dns                 \n"},
		{"numeric order and long names", []pctRow{
			{VMID: 1000, Status: "running", Name: "a-container-name-longer-than-twenty"},
			{VMID: 999, Status: "running", Name: "CT999"},
		}, "VMID       Status     Lock         Name                \n" +
			"999        running                 CT999               \n" +
			"1000       running                 a-container-name-longer-than-twenty\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := formatPctList(tc.rows); got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestFormatQmList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rows []qmRow
		want string
	}{
		{"empty prints nothing", nil, ""},
		{"the PROXMOX.md example", []qmRow{
			{VMID: 9300, Name: "jammy-server-cloudimg-amd64", Status: "stopped", MemMB: 4096},
			{VMID: 100, Name: "web", Status: "running", MemMB: 2048, BootDiskGB: 32, PID: 1234},
		}, "      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       \n" +
			"       100 web                  running    2048              32.00 1234      \n" +
			"      9300 jammy-server-cloudimg-amd64 stopped    4096               0.00 0         \n"},
		{"default name has a space", []qmRow{{VMID: 105, Name: "VM 105", Status: "stopped", MemMB: 512, BootDiskGB: 8.5}},
			"      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       \n" +
				"       105 VM 105               stopped    512                8.50 0         \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := formatQmList(tc.rows); got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestFormatPveamList(t *testing.T) {
	t.Parallel()
	got := formatPveamList([]template{{Volid: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", SizeMB: 120.29}, {Volid: "local:vztmpl/x.tar.xz", SizeMB: 3.5}})
	want := "NAME                                                         SIZE  \n" +
		"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst         120.29MB\n" +
		"local:vztmpl/x.tar.xz                                        3.50MB\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	if got := formatPveamList(nil); got != "NAME                                                         SIZE  \n" {
		t.Fatalf("empty cache must still print the header: %q", got)
	}
}

func TestFormatGuestExec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		res  guestExecResult
		want string
	}{
		{"stdout", guestExecResult{Stdout: []byte("website-edge\n")},
			"{\n   \"exitcode\" : 0,\n   \"exited\" : 1,\n   \"out-data\" : \"website-edge\\n\",\n   \"out-truncated\" : 0\n}\n"},
		{"nothing", guestExecResult{ExitCode: 1}, "{\n   \"exitcode\" : 1,\n   \"exited\" : 1\n}\n"},
		{"both streams, truncated", guestExecResult{ExitCode: 2, Stdout: []byte("o"), Stderr: []byte("e"), OutTruncated: true},
			"{\n   \"err-data\" : \"e\",\n   \"err-truncated\" : 0,\n   \"exitcode\" : 2,\n   \"exited\" : 1,\n   \"out-data\" : \"o\",\n   \"out-truncated\" : 1\n}\n"},
		{"quotes, backslashes, NUL, controls and invalid UTF-8 pass as Perl prints them",
			guestExecResult{Stdout: []byte("a\"b\\c\x00d\x1be\tf\xff\xfeé/")},
			"{\n   \"exitcode\" : 0,\n   \"exited\" : 1,\n   \"out-data\" : \"a\\\"b\\\\c\\u0000d\\u001be\\tf\xff\xfeé/\",\n   \"out-truncated\" : 0\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := formatGuestExec(tc.res); got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	// Valid UTF-8 output stays valid JSON that decodes back to the same bytes.
	out := formatGuestExec(guestExecResult{Stdout: []byte("quote\" back\\ nul\x00 tab\t ünï\n")})
	var decoded map[string]any
	if err := json.Unmarshal([]byte(out), &decoded); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if decoded["out-data"] != "quote\" back\\ nul\x00 tab\t ünï\n" {
		t.Fatalf("round trip: %q", decoded["out-data"])
	}
	if got := formatGuestExecPid(4242); got != "{\n   \"pid\" : 4242\n}\n" {
		t.Fatalf("pid: %q", got)
	}
}

func TestConfigLinesAndPerlPretty(t *testing.T) {
	t.Parallel()
	got := configLines(map[string]string{"memory": "512", "lxc.cgroup2.devices.allow": "c 10:200 rwm", "arch": "amd64", "description": "line one\nline two 100%"})
	want := "arch: amd64\ndescription: line one%0Aline two 100%25\nmemory: 512\nlxc.cgroup2.devices.allow: c 10:200 rwm\n"
	if got != want {
		t.Fatalf("config:\n%q\nwant\n%q", got, want)
	}
	pretty := perlPretty([]any{map[string]any{"b": 1, "a": "x", "c": []any{}}})
	if pretty != "[\n   {\n      \"a\" : \"x\",\n      \"b\" : 1,\n      \"c\" : []\n   }\n]\n" {
		t.Fatalf("pretty: %q", pretty)
	}
	compact, err := compactJSON([]any{map[string]any{"vmid": 101, "cpu": 0.5, "name": "a<b"}})
	if err != nil || compact != "[{\"cpu\":0.5,\"name\":\"a<b\",\"vmid\":101}]\n" {
		t.Fatalf("compact: %q %v", compact, err)
	}
}
