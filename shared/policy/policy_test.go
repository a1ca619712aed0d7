package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultPolicyVerifies(t *testing.T) {
	t.Parallel()
	p := Default()
	if p.failed != nil {
		t.Fatalf("embedded default policy does not compile: %v", p.failed)
	}
	if err := p.Verify(); err != nil {
		t.Fatalf("default policy examples:\n%v", err)
	}
	if _, err := Load(""); err != nil {
		t.Errorf(`Load("") = %v`, err)
	}
}

func writePolicy(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadOperatorFile(t *testing.T) {
	t.Parallel()
	path := writePolicy(t, `
version: 1
patterns:
  app_dir: '/srv/app(/.*)?'
host_only: [pmg]
programs:
  restic:
    value_flags: [-r, --repo]
rules:
  # a new read-only rule
  - name: restic-snapshots
    class: read_only
    reason: lists backup snapshots
    program: restic
    subcommands: ['snapshots|stats|check']
    match: ["restic -r /srv/restic snapshots"]
    not_match: ["restic -r /srv/restic forget --prune"]
  # replaces a default destructive rule
  - name: git-clean-force
    class: destructive
    reason: deletes untracked files
    program: git
    subcommands: [clean]
    require_flags: [-f, --force]
    deny_flags: [-n, --dry-run]
    match: ["git clean -fdx"]
    not_match: ["git clean -n"]
  # replaces the default rule of the same name: cat is no longer read-only
  # for files under /srv/app
  - name: app-secrets
    class: config_mutation
    reason: reads application secrets
    programs: [cat, head, tail]
    require_args: ['{{app_dir}}']
    match: ["cat /srv/app/.env"]
    not_match: ["cat /etc/hosts"]
disable: [wg-bare]
`)
	p, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	tests := []struct {
		cmd  string
		want Class
	}{
		{"restic -r /srv/restic snapshots", ReadOnly},
		{"restic -r /srv/restic forget --prune", Destructive}, // the default restic-forget rule
		{"git clean -fdx", Destructive},
		{"git status", ReadOnly},
		{"cat /srv/app/.env", ConfigMutation},
		{"cat /etc/hosts", ReadOnly},
		{"wg", ConfigMutation},
		{"wg show", ReadOnly},
	}
	for _, tt := range tests {
		if got := p.Classify(tt.cmd, "").Class; got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
	}
	if !p.HostOnly("pmg") || !p.HostOnly("pct") {
		t.Errorf("host_only must extend the default list")
	}
	// The default policy itself is untouched.
	if got := Default().Classify("cat /srv/app/.env", "").Class; got != ReadOnly {
		t.Errorf("default policy changed: cat /srv/app/.env = %s", got)
	}
}

func TestLoadOverridesRuleByName(t *testing.T) {
	t.Parallel()
	path := writePolicy(t, `
version: 1
rules:
  - name: read-files
    class: read_only
    reason: reads files (operator's narrower list)
    programs: [cat]
    match: ["cat /etc/hosts"]
`)
	p, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := p.Classify("head /etc/hosts", "").Class; got != ConfigMutation {
		t.Errorf("head after the override = %s, want config_mutation", got)
	}
	if got := p.Classify("cat /etc/hosts", "").Class; got != ReadOnly {
		t.Errorf("cat after the override = %s, want read_only", got)
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"wrong match example", `
version: 1
rules:
  - name: too-broad
    class: read_only
    program: systemctl
    subcommands: [restart]
    match: ["systemctl status caddy"]
`, []string{`rule "too-broad"`, `"systemctl status caddy"`, "must match"}},
		{"wrong not_match example", `
version: 1
rules:
  - name: ls-any
    class: read_only
    program: ls
    match: ["ls"]
    not_match: ["ls -la"]
`, []string{`rule "ls-any"`, `"ls -la"`, "must not match"}},
		{"example outclassed by another rule", `
version: 1
rules:
  - name: rm-read
    class: read_only
    program: rm
    match: ["rm -rf /x"]
`, []string{`rule "rm-read"`, `"rm -rf /x"`, "classifies as destructive"}},
		{"an operator rule that breaks a default rule's examples", `
version: 1
rules:
  - name: git-everything
    class: destructive
    program: git
    match: ["git push --force"]
`, []string{`rule "git-read"`, `"git status"`, "classifies as destructive"}},
		{"unknown field", "version: 1\nrules:\n  - name: x\n    class: read_only\n    program: ls\n    deny_flag: [-a]\n", []string{"deny_flag"}},
		{"bad class", "version: 1\nrules:\n  - name: x\n    class: reversible_low\n    program: ls\n", []string{`rule "x"`, "class"}},
		{"no program", "version: 1\nrules:\n  - name: x\n    class: read_only\n", []string{`rule "x"`, "program"}},
		{"path as program", "version: 1\nrules:\n  - name: x\n    class: read_only\n    program: /bin/ls\n", []string{"bare name"}},
		{"bad regexp", "version: 1\nrules:\n  - name: x\n    class: destructive\n    program: ls\n    require_args: ['(']\n", []string{`rule "x"`, "regexp"}},
		{"unknown pattern", "version: 1\nrules:\n  - name: x\n    class: destructive\n    program: ls\n    require_args: ['{{nope}}']\n", []string{"{{nope}}"}},
		{"bad version", "version: 2\n", []string{"version"}},
		{"disable unknown", "version: 1\ndisable: [no-such-rule]\n", []string{"no-such-rule"}},
		{"bad style", "version: 1\nprograms:\n  foo: {style: weird}\n", []string{"style"}},
		{"not yaml", "version: [1\n", []string{"parse"}},
	}
	for _, tt := range tests {
		_, err := Load(writePolicy(t, tt.body))
		if err == nil || !errors.Is(err, ErrPolicy) {
			t.Errorf("%s: Load error = %v, want an ErrPolicy", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, w)
			}
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Errorf("Load of a missing file succeeded")
	}
}

// TestDocsExampleLoads keeps the operator example in docs/policy.md honest.
func TestDocsExampleLoads(t *testing.T) {
	t.Parallel()
	// The test runs in shared/policy; docs/policy.md is part of the repository, so a missing
	// file is a failure, never a reason to skip.
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatalf("read docs/policy.md (two levels above shared/policy): %v", err)
	}
	s := string(doc)
	start := strings.Index(s, "```yaml\nversion: 1")
	if start < 0 {
		t.Fatal("docs/policy.md has no ```yaml example starting with version: 1")
	}
	body := s[start+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	p, err := Load(writePolicy(t, body))
	if err != nil {
		t.Fatalf("the example in docs/policy.md does not load: %v", err)
	}
	if got := p.Classify("git clean -fdx", "").Class; got != Destructive {
		t.Errorf("docs example: git clean -fdx = %s", got)
	}
	if got := p.Classify("echo x > /dev/tape/0", "").Class; got != Destructive {
		t.Errorf("docs example: destructive_write_targets not applied (%s)", got)
	}
}
