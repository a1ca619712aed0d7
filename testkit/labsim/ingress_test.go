package labsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// httpsClient trusts only the given PEM roots and sends every connection to addr, keeping
// the URL's name for SNI and Host as a name-mapped client does.
func httpsClient(t *testing.T, rootsPEM []byte, addr string) *http.Client {
	t.Helper()
	var roots *x509.CertPool
	if rootsPEM != nil {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(rootsPEM) {
			t.Fatal("CACertPEM holds no certificate")
		}
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func getStatus(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	if resp.TLS == nil || !resp.TLS.HandshakeComplete {
		t.Fatalf("GET %s: not over TLS", url)
	}
	return resp.StatusCode, string(body)
}

// The HTTPS ingress serves the same routes as plain HTTP, verified by a client that trusts
// nothing but the simulator's certificate; a stopped guest's route answers 502.
func TestHTTPSIngress(t *testing.T) {
	t.Parallel()
	fleet := testFleet()
	fleet.Routes["s3.example"] = RouteTarget{Host: "hermes"}
	sim := startSim(t, fleet, nil)
	if sim.HTTPSAddr() == "" || sim.HTTPSAddr() == sim.HTTPAddr() {
		t.Fatalf("https listener %q (http %q)", sim.HTTPSAddr(), sim.HTTPAddr())
	}
	c := httpsClient(t, sim.CACertPEM(), sim.HTTPSAddr())
	tests := []struct {
		url  string
		code int
		body string
	}{
		{"https://web.lab.example/", 200, "ok web.lab.example\n"},
		{"https://WEB.lab.example./health", 200, "ok web.lab.example\n"},
		{"https://s3.example/bucket", 200, "ok s3.example\n"},
		{"https://db.lab.example/", 502, "502 Bad Gateway\n"},
		{"https://unknown.lab.example/", 404, "404 page not found\n"},
	}
	for _, tc := range tests {
		if code, body := getStatus(t, c, tc.url); code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.url, code, body, tc.code, tc.body)
		}
	}
	if err := sim.SetGuestStatus("atlas", 101, false); err != nil {
		t.Fatal(err)
	}
	if code, _ := getStatus(t, c, "https://web.lab.example/"); code != 502 {
		t.Fatalf("route to a stopped guest over https: %d", code)
	}
	if err := sim.SetGuestStatus("atlas", 101, true); err != nil {
		t.Fatal(err)
	}
	if code, _ := getStatus(t, c, "https://web.lab.example/"); code != 200 {
		t.Fatalf("route after restart over https: %d", code)
	}

	// A client with only the system roots refuses the certificate: it is the simulator's own.
	var unknown x509.UnknownAuthorityError
	if _, err := httpsClient(t, nil, sim.HTTPSAddr()).Get("https://web.lab.example/"); !errors.As(err, &unknown) {
		t.Fatalf("a client without the CA file: %v", err)
	}
	// A name the certificate does not cover fails verification even though it is routed.
	var hostErr x509.HostnameError
	if _, err := c.Get("https://a.b.lab.example/"); !errors.As(err, &hostErr) {
		t.Fatalf("a name outside the certificate: %v", err)
	}
	st := sim.Snapshot()
	if st.HTTPSAddr != sim.HTTPSAddr() || st.CAFile != sim.CAFile() {
		t.Fatalf("snapshot: %+v", st)
	}
}

// The certificate is a CA for the ingress names, written as PEM to <StateDir>/http-ca.pem
// with a private key only the owner reads.
func TestIngressCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, err := New(testFleet(), Options{StateDir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "http-ca.pem"); sim.CAFile() != want {
		t.Fatalf("CAFile %q, want %q", sim.CAFile(), want)
	}
	onDisk, err := os.ReadFile(sim.CAFile())
	if err != nil || string(onDisk) != string(sim.CACertPEM()) {
		t.Fatalf("CA file differs from CACertPEM (%v)", err)
	}
	block, rest := pem.Decode(onDisk)
	if block == nil || block.Type != "CERTIFICATE" || strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("CA file is not one PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("not a CA: IsCA=%v usage=%v", cert.IsCA, cert.KeyUsage)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Fatalf("not self-signed: %v", err)
	}
	for _, name := range []string{"jellyfin.lab.example", "lab.example", "s3.example", "127.0.20.1"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("certificate does not cover %s: %v", name, err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "git.lab.example", Roots: roots}); err != nil {
		t.Fatalf("the certificate is not usable as its own root: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, CAKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode().Perm())
	}
}

// A restart serves the same certificate, so a client's CA file stays valid; a damaged or
// expiring one is replaced.
func TestIngressCertificatePersists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	listen := func(string) string { return "127.0.0.1:0" }
	first, err := New(testFleet(), Options{StateDir: dir, Listen: listen, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop) // Stop is safe twice; this covers a failure before the restart
	trusted := first.CACertPEM()
	if code, _ := getStatus(t, httpsClient(t, trusted, first.HTTPSAddr()), "https://web.lab.example/"); code != 200 {
		t.Fatalf("first run: %d", code)
	}
	first.Stop()

	second := startSim(t, testFleet(), func(o *Options) { o.StateDir = dir })
	if string(second.CACertPEM()) != string(trusted) {
		t.Fatal("the certificate changed across a restart")
	}
	if code, _ := getStatus(t, httpsClient(t, trusted, second.HTTPSAddr()), "https://web.lab.example/"); code != 200 {
		t.Fatalf("after restart, with the first run's CA file: %d", code)
	}

	// Ten years and a day later the stored certificate has expired: a new one is made.
	later := func() time.Time { return time.Now().AddDate(10, 0, 1) }
	aged, err := New(testFleet(), Options{StateDir: dir, Logger: zerolog.Nop(), Clock: later})
	if err != nil {
		t.Fatal(err)
	}
	if string(aged.CACertPEM()) == string(trusted) {
		t.Fatal("an expired certificate was kept")
	}
	// A damaged file is replaced rather than failing the start.
	if err := os.WriteFile(filepath.Join(dir, CAFileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixed, err := New(testFleet(), Options{StateDir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("damaged certificate: %v", err)
	}
	if block, _ := pem.Decode(fixed.CACertPEM()); block == nil {
		t.Fatal("no certificate after replacing a damaged one")
	}
}

// routeName takes the Host header, falling back to SNI over TLS when the Host names no host.
func TestRouteName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host, sni, want string
	}{
		{"web.lab.example", "", "web.lab.example"},
		{"Web.Lab.Example:8443", "", "web.lab.example"},
		{"web.lab.example.", "", "web.lab.example"},
		{"web.lab.example", "other.lab.example", "web.lab.example"},
		{"127.0.20.1:8443", "web.lab.example", "web.lab.example"},
		{"[::1]:8443", "WEB.lab.example", "web.lab.example"},
		{"", "web.lab.example", "web.lab.example"},
		{"127.0.20.1", "", "127.0.20.1"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = tc.host
		if tc.sni != "" {
			r.TLS = &tls.ConnectionState{ServerName: tc.sni}
		}
		if got := routeName(r); got != tc.want {
			t.Errorf("Host %q SNI %q: %q, want %q", tc.host, tc.sni, got, tc.want)
		}
	}
}
