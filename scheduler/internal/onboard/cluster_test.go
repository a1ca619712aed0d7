package onboard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/hostconnect"
)

func authorized(t *testing.T, key []byte) string {
	t.Helper()
	k, err := ssh.ParsePublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func TestParseClusterStatus(t *testing.T) {
	// As pve-manager answers it (numbers as numbers), and an older release's strings.
	out := `[{"id":"cluster","name":"olympus","nodes":3,"quorate":1,"type":"cluster","version":3},
{"id":"node/boreas","ip":"127.0.10.2","level":"","local":0,"name":"boreas","nodeid":2,"online":1,"type":"node"},
{"id":"node/atlas","ip":"127.0.10.1","level":"","local":1,"name":"atlas","nodeid":1,"online":1,"type":"node"},
{"id":"node/ceres","ip":"127.0.10.3","level":"","local":"0","name":"ceres","nodeid":"3","online":"0","type":"node"}]`
	c, err := parseClusterStatus([]byte(out))
	if err != nil || c == nil {
		t.Fatalf("%v %v", c, err)
	}
	if c.Name != "olympus" || !c.Quorate || c.Count != 3 || len(c.Nodes) != 3 {
		t.Fatalf("%+v", c)
	}
	if n := c.Nodes[0]; n.Node != "atlas" || !n.Local || !n.Online || n.NodeID != 1 {
		t.Errorf("first node %+v", n)
	}
	if n := c.Nodes[2]; n.Node != "ceres" || n.Local || n.Online || n.NodeID != 3 || n.IP != "127.0.10.3" {
		t.Errorf("ceres %+v", n)
	}
	// A node in no cluster answers only itself: no cluster.
	if c, err := parseClusterStatus([]byte(`[{"id":"node/solo","ip":"127.0.10.9","level":"","local":1,"name":"solo","nodeid":0,"online":1,"type":"node"}]` + "\n")); c != nil || err != nil {
		t.Errorf("standalone: %+v %v", c, err)
	}
	if _, err := parseClusterStatus([]byte("ipcc_send_rec[1] failed: Connection refused\n")); err == nil {
		t.Error("not JSON: no error")
	}
}

func hashed(host string) string {
	salt := []byte("0123456789abcdefghij")
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// The merged /etc/pve/priv/known_hosts as pvecm leaves it: each member by name and by
// address ([ip]:port off port 22), in any form OpenSSH accepts.
func TestPlaceMember(t *testing.T) {
	a, b, c, d := authorized(t, newKey(t)), authorized(t, newKey(t)), authorized(t, newKey(t)), authorized(t, newKey(t))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPub, _ := ssh.NewPublicKey(&ec.PublicKey)
	ecLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ecPub)))
	file := strings.Join([]string{
		"# comment",
		"boreas " + a,
		"[127.0.10.2]:2222 " + a,
		"ceres,127.0.10.3 " + b,
		"ceres " + ecLine, // two keys: the client asks for ECDSA before Ed25519
		hashed("dione") + " " + c,
		hashed("[127.0.10.4]:2222") + " " + c,
		"@revoked 127.0.10.5 " + d,
		"eos " + d,
		"127.0.10.5 " + d,
		"@cert-authority *.lab " + a,
		"*.lab " + b,
		"fenrir " + a,
		"[127.0.10.6]:2222 " + b,
		"not a line",
	}, "\n")
	entries := parseKnownHosts([]byte(file))
	for _, tc := range []struct {
		node, ip, addr, key, status string
	}{
		{"boreas", "127.0.10.2", "127.0.10.2:2222", a, ""},
		{"ceres", "127.0.10.3", "127.0.10.3:22", ecLine, ""},
		{"dione", "127.0.10.4", "127.0.10.4:2222", c, ""},
		{"eos", "127.0.10.5", "127.0.10.5:22", "", ""},                          // its address's key is revoked
		{"fenrir", "127.0.10.6", "127.0.10.6:2222", "", hostconnect.KeyMissing}, // name and address disagree
		{"gaia", "127.0.10.7", "127.0.10.7:22", "", ""},
	} {
		m := clusterMember{Node: tc.node, IP: tc.ip}
		agreed := placeMember(&m, entries, 2222, mergedKnownHosts)
		got := ""
		if m.Key != nil {
			got = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(m.Key)))
		}
		if m.Addr != tc.addr || got != tc.key || m.Status != tc.status || agreed != (tc.status == "") {
			t.Errorf("%s: addr %s key %.30q status %q agreed %v; want %s %.30q %q", tc.node, m.Addr, got, m.Status, agreed,
				tc.addr, tc.key, tc.status)
		}
	}
	// eos's name lists the key its address revokes: a revoked key is never pinned, under any
	// of the machine's names.
	if ks, _ := keysFor(entries, "eos"); len(ks) != 1 {
		t.Errorf("eos by name: %d keys", len(ks))
	}
}
