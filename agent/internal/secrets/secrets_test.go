package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// env makes a getenv and an environ from pairs.
func env(pairs ...string) (func(string) string, []string) {
	m := map[string]string{}
	var environ []string
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
		environ = append(environ, pairs[i]+"="+pairs[i+1])
	}
	if environ == nil {
		environ = []string{}
	}
	return func(k string) string { return m[k] }, environ
}

func TestFromEnvNotConfigured(t *testing.T) {
	t.Parallel()
	getenv, environ := env("PATH", "/usr/bin", "OIKOS_SECRET_", "nameless", "OIKOS_SECRET_EMPTY", "", "OIKOS_SECRETS_DIR", "  ")
	b, err := FromEnv(getenv, environ)
	if b != nil || !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("FromEnv = %v, %v; want nil, ErrNotConfigured", b, err)
	}
	want := "no secrets backend is configured: set OIKOS_SECRETS_DIR, OIKOS_SECRET_<NAME> variables, or OIKOS_INFISICAL_*"
	if err.Error() != want {
		t.Errorf("message %q", err)
	}
}

func TestEnvBackend(t *testing.T) {
	t.Parallel()
	getenv, environ := env(
		"OIKOS_SECRET_GRAFANA_TOKEN", "glsa_abc123",
		"OIKOS_SECRET_DB_PASSWORD", "pw=with=equals",
		"OIKOS_SECRET_Mixed_Case", "mixed",
		"OIKOS_SECRET_EMPTY", "",
		"OIKOS_SECRETS_DIRX", "not a secret: the prefix is OIKOS_SECRET_ only",
		"OIKOS_API_TOKEN", "not a secret either",
	)
	b, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "env/file" {
		t.Errorf("Name %q", b.Name())
	}
	names, err := b.List(t.Context())
	if want := []string{"db_password", "grafana_token", "mixed_case"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("List = %v, %v; want %v", names, err, want)
	}
	for name, want := range map[string]string{"grafana_token": "glsa_abc123", "GRAFANA_TOKEN": "glsa_abc123", " db_password ": "pw=with=equals", "Mixed_CASE": "mixed"} {
		if v, err := b.Resolve(t.Context(), name); err != nil || v != want {
			t.Errorf("Resolve(%q) = %q, %v", name, v, err)
		}
	}
	for _, name := range []string{"empty", "nope", "api_token", "s_dirx", ""} {
		if _, err := b.Resolve(t.Context(), name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q): %v; want ErrNotFound", name, err)
		}
	}
	_, err = b.Resolve(t.Context(), "nope")
	if want := `secret not found: no secret named "nope" (OIKOS_SECRET_<NAME> variables)`; err == nil || err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
}

func TestDirBackend(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "secrets")
	outside := t.TempDir()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(d, name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(dir, "proxmox_token", "PVEAPIToken=root@pam!oikos=1234\n")
	write(dir, "Grafana.Token", "crlf\r\n")
	write(dir, "two_lines", "a\nb\n\n")
	write(dir, "no_newline", "exact")
	write(dir, ".hidden", "dotfiles are ignored")
	write(dir, "bad name", "names with spaces are ignored")
	write(dir, "shadowed", "the variable wins")
	write(dir, "huge", strings.Repeat("x", maxFileBytes+1))
	write(outside, "target", "through a link\n")
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "subdir"), "nested", "directories are ignored")
	// A Kubernetes-style mount: ..data is a dotfile, the visible names are links.
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "..data"), "k8s_token", "from a mount")
	for link, target := range map[string]string{
		"k8s_token": filepath.Join("..data", "k8s_token"), "linked": filepath.Join(outside, "target"),
		"dangling": filepath.Join(outside, "missing"), "dirlink": outside,
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}

	getenv, environ := env("OIKOS_SECRETS_DIR", dir, "OIKOS_SECRET_SHADOWED", "from the environment")
	b, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	names, err := b.List(t.Context())
	want := []string{"grafana.token", "huge", "k8s_token", "linked", "no_newline", "proxmox_token", "shadowed", "two_lines"}
	if err != nil || !slices.Equal(names, want) {
		t.Errorf("List = %v, %v; want %v", names, err, want)
	}
	for name, want := range map[string]string{
		"proxmox_token": "PVEAPIToken=root@pam!oikos=1234", "grafana.token": "crlf", "two_lines": "a\nb\n",
		"no_newline": "exact", "linked": "through a link", "k8s_token": "from a mount", "shadowed": "from the environment",
	} {
		if v, err := b.Resolve(t.Context(), name); err != nil || v != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", name, v, err, want)
		}
	}
	for _, name := range []string{".hidden", "hidden", "bad name", "subdir", "dangling", "dirlink", "../secrets/proxmox_token", "subdir/nested"} {
		if _, err := b.Resolve(t.Context(), name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q): %v; want ErrNotFound", name, err)
		}
	}
	if _, err := b.Resolve(t.Context(), "huge"); err == nil || !strings.Contains(err.Error(), "secret file huge in OIKOS_SECRETS_DIR is larger than 64 KiB") {
		t.Errorf("huge: %v", err)
	}
	// A file written after FromEnv is seen (the directory is read at every call).
	write(dir, "rotated", "new")
	if v, err := b.Resolve(t.Context(), "rotated"); err != nil || v != "new" {
		t.Errorf("rotated: %q, %v", v, err)
	}
	// Two files differing only in case are ambiguous.
	write(dir, "Dup", "1")
	write(dir, "dup", "2")
	if _, err := b.Resolve(t.Context(), "dup"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("dup: %v", err)
	}
}

func TestDirBackendErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for dir, want := range map[string]string{
		file:    "OIKOS_SECRETS_DIR=" + file + " is not a directory",
		missing: "OIKOS_SECRETS_DIR: stat " + missing,
	} {
		getenv, environ := env("OIKOS_SECRETS_DIR", dir)
		if b, err := FromEnv(getenv, environ); b != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("FromEnv(dir %s) = %v, %v; want an ErrConfig containing %q", dir, b, err, want)
		}
	}
	// A directory removed after start makes List fail with a sentence.
	dir := t.TempDir()
	getenv, environ := env("OIKOS_SECRETS_DIR", dir)
	b, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := b.List(t.Context()); err == nil || !strings.Contains(err.Error(), "reading OIKOS_SECRETS_DIR") {
		t.Errorf("List of a removed directory: %v", err)
	}
}

// List never carries a value, whatever the backend holds.
func TestListNeverReturnsValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	values := map[string]string{"file_secret": "file-value-123", "env_secret": "env-value-456"}
	if err := os.WriteFile(filepath.Join(dir, "file_secret"), []byte(values["file_secret"]), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv, environ := env("OIKOS_SECRETS_DIR", dir, "OIKOS_SECRET_ENV_SECRET", values["env_secret"])
	envBackend, err := FromEnv(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	inf := newFakeInfisical(t, func(f *fakeInfisical) {
		f.secrets = map[string]string{"API_KEY": "infisical-value-789", "OTHER": "infisical-value-000"}
		f.ignoreViewSecretValue = true // an old server that sends values anyway
	})
	for _, b := range []Backend{envBackend, inf.backend(t)} {
		names, err := b.List(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		joined := strings.Join(names, "\n")
		for _, v := range []string{"value-123", "value-456", "value-789", "value-000"} {
			if strings.Contains(joined, v) {
				t.Errorf("%s: List %v carries a value", b.Name(), names)
			}
		}
		if len(names) != 2 {
			t.Errorf("%s: List %v", b.Name(), names)
		}
	}
	if !inf.sawViewSecretValue("false") {
		t.Errorf("List asked Infisical for values: %v", inf.queries())
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"grafana_token": "glsa_abc123",
		"long":          "glsa_abc123_and_more", // contains grafana_token's value: replaced whole
		"quoted":        `pa"ss\word`,
		"spaced":        "two words&more",
		"empty":         "",
	}
	tests := []struct{ in, want string }{
		{"Authorization: Bearer glsa_abc123", "Authorization: Bearer [secret:grafana_token]"},
		{"glsa_abc123 twice glsa_abc123", "[secret:grafana_token] twice [secret:grafana_token]"},
		{"x glsa_abc123_and_more y", "x [secret:long] y"},
		{`{"password":"pa\"ss\\word"}`, `{"password":"[secret:quoted]"}`},
		{`raw pa"ss\word`, "raw [secret:quoted]"},
		{"?q=two+words%26more", "?q=[secret:spaced]"},
		{"/p/two%20words&more", "/p/[secret:spaced]"},
		{"nothing to hide", "nothing to hide"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := Redact(tc.in, values); got != tc.want {
			t.Errorf("Redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	if got := Redact("text", nil); got != "text" {
		t.Errorf("no values: %q", got)
	}
	// Two names with one value: the choice is deterministic.
	for range 20 {
		if got := Redact("v=same-value", map[string]string{"b": "same-value", "a": "same-value"}); got != "v=[secret:a]" {
			t.Fatalf("same value: %q", got)
		}
	}
}
