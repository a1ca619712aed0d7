package httpprobe

import (
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
