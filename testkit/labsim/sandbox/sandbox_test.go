package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newFS builds a sandbox under a temp dir next to an "outside" directory holding a secret.
func newFS(t *testing.T) (*FS, string, string) {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(filepath.Join(base, "machine"), map[string]Generator{
		"/proc/loadavg": func() []byte { return []byte("0.10 0.20 0.30 1/100 42\n") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, secret, filepath.Join(base, "machine")
}

func TestPathsStayInside(t *testing.T) {
	t.Parallel()
	f, secret, real := newFS(t)
	if err := f.MkdirAll("/etc", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/etc/passwd", []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Symlinks planted by a guest, absolute and climbing, and one written straight into the
	// real directory as an attacker with host access might.
	if err := f.Symlink(secret, "/abs"); err != nil {
		t.Fatal(err)
	}
	if err := f.Symlink("../../../../../../../../"+strings.TrimPrefix(secret, "/"), "/climb"); err != nil {
		t.Fatal(err)
	}
	if err := f.Symlink("/", "/rootlink"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(real, "planted")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/../../../../" + secret,
		Clean("/tmp", "../../../../../../"+secret),
		"/abs", "/climb", "/planted",
		"/rootlink/../../" + secret,
	} {
		data, err := f.ReadFile(p)
		if err == nil && strings.Contains(string(data), "host secret") {
			t.Errorf("%s: read the host's secret", p)
		}
		if err == nil {
			t.Errorf("%s: expected an error, read %q", p, data)
		}
	}
	// "/rootlink/etc/passwd" is the sandbox's own file.
	data, err := f.ReadFile("/rootlink/etc/passwd")
	if err != nil || !strings.HasPrefix(string(data), "root:x:0:0::/root") {
		t.Fatalf("symlink to / should resolve inside: %q %v", data, err)
	}
	// Writing through an escaping link creates the file inside the sandbox, never outside.
	if err := f.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/abs", []byte("overwritten"), 0o644); err != nil {
		t.Fatalf("write through absolute link: %v", err)
	}
	if got, _ := os.ReadFile(secret); string(got) != "host secret\n" {
		t.Fatalf("secret changed: %q", got)
	}
	inside := filepath.Join(real, strings.TrimPrefix(secret, "/"))
	if got, err := os.ReadFile(inside); err != nil || string(got) != "overwritten" {
		t.Fatalf("write should land at %s: %q %v", inside, got, err)
	}
}

func TestRemoveAllRootEmptiesOnlyTheSandbox(t *testing.T) {
	t.Parallel()
	f, secret, real := newFS(t)
	for _, d := range []string{"/var/lib/x", "/etc", "/root"} {
		if err := f.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.WriteFile("/var/lib/x/data", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Symlink(filepath.Dir(secret), "/outside-link"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveAll("/"); err != nil {
		t.Fatalf("RemoveAll(/): %v", err)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("sandbox not empty: %v", entries)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatalf("file outside the sandbox was touched: %v", err)
	}
	// The synthetic /proc survives, as the kernel's would.
	if _, err := f.ReadFile("/proc/loadavg"); err != nil {
		t.Fatalf("/proc/loadavg: %v", err)
	}
}

func TestSyntheticFiles(t *testing.T) {
	t.Parallel()
	f, _, _ := newFS(t)
	data, err := f.ReadFile("/proc/loadavg")
	if err != nil || string(data) != "0.10 0.20 0.30 1/100 42\n" {
		t.Fatalf("read /proc/loadavg: %q %v", data, err)
	}
	if err := f.WriteFile("/proc/loadavg", []byte("9"), 0o644); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("write /proc/loadavg: want permission error, got %v", err)
	}
	if err := f.Remove("/proc/loadavg"); err == nil {
		t.Fatal("remove /proc/loadavg succeeded")
	}
	entries, err := f.ReadDir("/")
	if err != nil || len(entries) != 1 || entries[0].Name() != "proc" || !entries[0].IsDir() {
		t.Fatalf("ReadDir(/) = %v, %v", entries, err)
	}
	if _, err := f.ReadFile("/proc/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/proc/nothing: %v", err)
	}
}

func TestSymlinkLoop(t *testing.T) {
	t.Parallel()
	f, _, _ := newFS(t)
	if err := f.Symlink("/b", "/a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Symlink("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	_, err := f.ReadFile("/a")
	if err == nil || Describe(err) != "Too many levels of symbolic links" {
		t.Fatalf("loop: %v", err)
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cwd, name, want string }{
		{"/root", "x", "/root/x"},
		{"/root", "../../../etc", "/etc"},
		{"/", "/a/./b/../c", "/a/c"},
		{"", "rel", "/rel"},
	} {
		if got := Clean(tc.cwd, tc.name); got != tc.want {
			t.Errorf("Clean(%q, %q) = %q, want %q", tc.cwd, tc.name, got, tc.want)
		}
	}
}
