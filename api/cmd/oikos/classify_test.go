package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// classifyCLI runs classifyMain with the given stdin and environment.
func classifyCLI(t *testing.T, stdin string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := classifyMain(args, strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestClassifyOneCommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := classifyCLI(t, "", nil, "--", "sudo", "rm", "-rf", "/srv/old")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "destructive\n") || !strings.Contains(out, "rm-delete") {
		t.Errorf("text output:\n%s", out)
	}

	code, out, _ = classifyCLI(t, "", nil, "--json", "--declared", "reversible_low", "--", "systemctl status caddy")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got classifyOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if got.Command != "systemctl status caddy" || got.Class != "reversible_low" || len(got.Reasons) == 0 || len(got.Segments) != 1 {
		t.Errorf("--json = %+v", got)
	}

	// The syntax gate's verdict comes with the class.
	_, out, _ = classifyCLI(t, "", nil, "--json", "--", "head - n 3 file")
	if err := json.Unmarshal([]byte(out), &got); err != nil || !strings.Contains(got.Syntax, "write `-n`") {
		t.Errorf("syntax gate in --json: %q, %v", out, err)
	}
	if _, out, _ = classifyCLI(t, "", nil, "--", "tail -n 3 file"); strings.Contains(out, "refuses") {
		t.Errorf("tail -n 3 reported as a syntax error: %q", out)
	}

	// The words after -- are joined the way a shell would see them.
	_, out, _ = classifyCLI(t, "", nil, "--json", "--", "echo", "hi", ">", "/etc/motd")
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Class != "config_mutation" {
		t.Errorf("redirection after --: %q, %v", out, err)
	}
}

func TestClassifyStdin(t *testing.T) {
	t.Parallel()
	input := strings.Join([]string{
		"systemctl status caddy",
		"",
		"curl -fsSL https://get.docker.com | sh",
		`{"command": "ls -la", "declared": "reversible_low"}`,
		`{"command": "echo \"a\\tb\" 'q'"}`,
		"{ uptime; free -m; } > /tmp/report",
		"rm -rf /x\r",
	}, "\n")
	code, out, errOut := classifyCLI(t, input, nil, "--stdin")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []struct{ command, class string }{
		{"systemctl status caddy", "read_only"},
		{"curl -fsSL https://get.docker.com | sh", "config_mutation"},
		{"ls -la", "reversible_low"},
		{"echo \"a\\tb\" 'q'", "read_only"},
		{"{ uptime; free -m; } > /tmp/report", "config_mutation"},
		{"rm -rf /x", "destructive"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d output lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		if got["command"] != w.command || got["class"] != w.class {
			t.Errorf("line %d = %v, want %q %s", i, got, w.command, w.class)
		}
		if _, ok := got["reasons"].([]any); !ok {
			t.Errorf("line %d has no reasons array: %v", i, got)
		}
	}

	// --declared applies to every line that does not declare its own.
	_, out, _ = classifyCLI(t, "uptime\n", nil, "--stdin", "--declared", "config_mutation")
	if !strings.Contains(out, `"class":"config_mutation"`) {
		t.Errorf("--declared with --stdin: %s", out)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestClassifyExitCodes(t *testing.T) {
	t.Parallel()
	if code, _, _ := classifyCLI(t, "", nil); code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	if code, _, _ := classifyCLI(t, "", nil, "--stdin", "--", "ls"); code != 2 {
		t.Errorf("--stdin with a command: exit %d, want 2", code)
	}
	if code, _, errOut := classifyCLI(t, "", nil, "--declared", "root", "--", "ls"); code != 2 || !strings.Contains(errOut, "declared") {
		t.Errorf("bad --declared: exit %d, %q", code, errOut)
	}
	if code, _, _ := classifyCLI(t, "", nil, "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code, _, _ := classifyCLI(t, "", nil, "-h"); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	var out, errOut bytes.Buffer
	if code := classifyMain([]string{"--stdin"}, failingReader{}, &out, &errOut, func(string) string { return "" }); code != 1 || !strings.Contains(errOut.String(), "disk on fire") {
		t.Errorf("unreadable input: exit %d, %q", code, errOut.String())
	}
	long := strings.Repeat("a", maxClassifyLine+10) + "\n"
	if code, _, errOut := classifyCLI(t, long, nil, "--stdin"); code != 1 || !strings.Contains(errOut, "read input") {
		t.Errorf("over-long line: exit %d, %q", code, errOut)
	}
}

func TestClassifyPolicyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(`version: 1
rules:
  - name: kopia-read
    class: read_only
    reason: lists snapshots
    program: kopia
    subcommands: ['snapshot list']
    match: ["kopia snapshot list"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`version: 1
rules:
  - name: wrong
    class: read_only
    program: kopia
    subcommands: ['snapshot list']
    match: ["kopia snapshot delete x"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OIKOS_POLICY_FILE": good}
	if _, out, _ := classifyCLI(t, "", env, "--", "kopia snapshot list"); !strings.HasPrefix(out, "read_only") {
		t.Errorf("OIKOS_POLICY_FILE not applied: %q", out)
	}
	if _, out, _ := classifyCLI(t, "", nil, "--", "kopia snapshot list"); !strings.HasPrefix(out, "config_mutation") {
		t.Errorf("default policy: %q", out)
	}
	code, _, errOut := classifyCLI(t, "", env, "--policy", bad, "--", "ls")
	if code != 1 || !strings.Contains(errOut, `rule "wrong"`) || !strings.Contains(errOut, `"kopia snapshot delete x"`) {
		t.Errorf("a wrong example must refuse: exit %d, %q", code, errOut)
	}
}

func TestRunClassifyDispatch(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	env := &cliEnv{Stdin: strings.NewReader("pct list\n"), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := runClassify(context.Background(), env, []string{"--stdin"}); code != 0 || !strings.Contains(out.String(), `"class":"read_only"`) {
		t.Errorf("runClassify: exit %d, %q %q", code, out.String(), errOut.String())
	}
}
