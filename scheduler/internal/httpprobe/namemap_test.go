package httpprobe

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseNameMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     map[string]string
		err      string // substring of the error; "" means success
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{name: "only separators", in: " ,\n\t, ", want: map[string]string{}},
		{name: "one ip", in: "svc.lab.example=127.0.0.1", want: map[string]string{"svc.lab.example": "127.0.0.1"}},
		{name: "ip and port", in: "svc.lab.example=127.0.20.1:8443", want: map[string]string{"svc.lab.example": "127.0.20.1:8443"}},
		{name: "wildcard", in: "*.lab.example=127.0.20.1:8443", want: map[string]string{"*.lab.example": "127.0.20.1:8443"}},
		{
			name: "the env form, commas",
			in:   "jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443",
			want: map[string]string{"jellyfin.lab.example": "127.0.20.1", "*.lab.example": "127.0.20.1:8443"},
		},
		{
			name: "newlines, spaces and a trailing comma",
			in:   "\n  a.lab.example=127.0.0.2\n\tb.lab.example=127.0.0.3:80 ,\n*.example=127.0.0.4,\n",
			want: map[string]string{"a.lab.example": "127.0.0.2", "b.lab.example": "127.0.0.3:80", "*.example": "127.0.0.4"},
		},
		{name: "names normalised", in: "Svc.Lab.Example.=127.0.0.1", want: map[string]string{"svc.lab.example": "127.0.0.1"}},
		{name: "ipv6 loopback", in: "v6.lab.example=::1", want: map[string]string{"v6.lab.example": "::1"}},
		{name: "ipv6 with port", in: "v6.lab.example=[::1]:8443", want: map[string]string{"v6.lab.example": "[::1]:8443"}},
		{name: "ip literal key", in: "192.0.2.10=127.0.0.1", want: map[string]string{"192.0.2.10": "127.0.0.1"}},
		{name: "non-loopback value parses (the dialer refuses it)", in: "x.example=192.0.2.1", want: map[string]string{"x.example": "192.0.2.1"}},
		{name: "underscore and digits", in: "_svc-1.lab.example=127.0.0.1", want: map[string]string{"_svc-1.lab.example": "127.0.0.1"}},

		{name: "no equals", in: "a.lab.example=127.0.0.1,b.lab.example", err: `entry "b.lab.example": want name=ip`},
		{name: "value is a name", in: "a.lab.example=localhost", err: `entry "a.lab.example=localhost": value "localhost" is not an IP literal`},
		{name: "value name with port", in: "a.lab.example=ingress.lab:8443", err: `names are never resolved`},
		{name: "empty value", in: "a.lab.example=", err: `entry "a.lab.example=": empty value`},
		{name: "empty name", in: "=127.0.0.1", err: `entry "=127.0.0.1": empty name`},
		{name: "port 0", in: "a.lab.example=127.0.0.1:0", err: "port 0"},
		{name: "port out of range", in: "a.lab.example=127.0.0.1:70000", err: `value "127.0.0.1:70000"`},
		{name: "ipv6 with port without brackets", in: "a.lab.example=::1:8443:x", err: "not an IP literal"},
		{name: "wildcard inside", in: "a.*.example=127.0.0.1", err: `a wildcard is only allowed as a leading`},
		{name: "bare star", in: "*=127.0.0.1", err: `a wildcard is only allowed`},
		{name: "empty label", in: "a..example=127.0.0.1", err: "empty label"},
		{name: "bad character", in: "a/b.example=127.0.0.1", err: `character '/'`},
		{name: "spaces around equals", in: "a.lab.example = 127.0.0.1", err: `entry "a.lab.example"`},
		{name: "duplicate after normalising", in: "a.lab.example=127.0.0.1 A.lab.example.=127.0.0.2", err: "a.lab.example is already mapped to 127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseNameMap(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrNameMap) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseNameMap(%q) = %v, %v; want an ErrNameMap containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ParseNameMap(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// LoadCAFile trusts the file's certificates on top of the system roots; errors name the file.
func TestLoadCAFile(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	// Other PEM blocks around the certificate (a key, a comment) are skipped.
	good := write("ca.pem", append([]byte("the lab CA\n"+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))), certPEM...))

	cfg, err := LoadCAFile(good)
	if err != nil {
		t.Fatalf("LoadCAFile: %v", err)
	}
	if cfg.RootCAs == nil || cfg.MinVersion < tls.VersionTLS12 {
		t.Fatalf("config: %+v", cfg)
	}
	get := func(cfg *tls.Config) error {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(cfg); err != nil {
		t.Fatalf("a server with the file's certificate: %v", err)
	}
	if err := get(&tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("the test server is trusted without the CA file; the test proves nothing")
	}

	missing := filepath.Join(dir, "missing.pem")
	bad := []struct{ path, want string }{
		{missing, missing},
		{write("empty.pem", nil), "empty.pem holds no PEM certificate"},
		{write("key-only.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})), "key-only.pem holds no PEM certificate"},
		{write("broken.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not der")})), "broken.pem: certificate 1"},
	}
	for _, tc := range bad {
		if cfg, err := LoadCAFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadCAFile(%s) = %v, %v; want an error containing %q", tc.path, cfg, err, tc.want)
		}
	}
}
