package redact_test

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/redact"
)

const pemKey = `-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACBkZXZlbG9wZXJzLWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY3OAAAAJg=
-----END OPENSSH PRIVATE KEY-----`

func TestFormats(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"pem", "key:\n" + pemKey + "\ndone", "key:\n[redacted: private key]\ndone"},
		{"rsa pem", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow==\n-----END RSA PRIVATE KEY-----", "[redacted: private key]"},
		{"pem cut off", "x\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQIBADAN", "x\n[redacted: private key]"},
		{"public key kept", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"},
		{"shadow sha512", "root:$6$Zq3k1Rr8$Gd2m0a5yqQqg9bGZ8f0K1Zp2o0Y5a7k0wC9uQJq8m.:19700:0:99999:7:::",
			"root:[redacted: password hash]:19700:0:99999:7:::"},
		{"shadow yescrypt", "alice:$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7:19000::::::",
			"alice:[redacted: password hash]:19000::::::"},
		{"bcrypt", "hash=$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW", "hash=[redacted: password hash]"},
		{"locked account kept", "daemon:*:19000:0:99999:7:::\nbin:!:19000::::::", "daemon:*:19000:0:99999:7:::\nbin:!:19000::::::"},
		{"shell dollar kept", `echo "$6$x"`, `echo "$6$x"`},
		{"github classic", "token ghp_" + strings.Repeat("a1B2", 9) + " end", "token [redacted: github token] end"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[redacted: github token]"},
		{"aws", "AKIAIOSFODNN7EXAMPLE is the id", "[redacted: aws access key] is the id"},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [redacted: aws secret key]"},
		{"slack", "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "SLACK=[redacted: slack token]"},
		{"openai", `"key":"sk-proj-abcdefghijklmnopqrstuvwxyz012345"`, `"key":"[redacted: api key]"`},
		{"oikos", "OIKOS_OPERATOR_TOKEN=oik_" + strings.Repeat("Ab-_", 10), "OIKOS_OPERATOR_TOKEN=[redacted: oikos token]"},
		{"jwt", "id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U!",
			"id [redacted: jwt]!"},
		{"authorization header", "Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer [redacted: authorization]"},
		{"basic header", "authorization: Basic dXNlcjpwYXNzd29yZA==", "authorization: Basic [redacted: authorization]"},
		{"bearer in text", "curl -H 'X: y' then bearer abcdefghijklmnopqrstuv", "curl -H 'X: y' then bearer [redacted: bearer token]"},
		{"url password", "postgres://oikos:hunter2hunter2@db:5432/oikos", "postgres://oikos:[redacted: url password]db:5432/oikos"},
		{"plain text kept", "load average: 0.10 0.20 0.30; sk-short; oik_x", "load average: 0.10 0.20 0.30; sk-short; oik_x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := redact.Text(c.in)
			if got != c.want {
				t.Fatalf("redact(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	r := redact.New(map[string]string{"grafana_token": "s3cr3t-value/with+chars", "short": "ab", "inner": "s3cr3t"})
	in := `header s3cr3t-value/with+chars, json "s3cr3t-value\/with+chars"? no: s3cr3t-value%2Fwith%2Bchars and s3cr3t alone; ab stays`
	got, found := r.String(in)
	for _, leak := range []string{"s3cr3t-value", "s3cr3t-value%2F"} {
		if strings.Contains(got, leak) {
			t.Fatalf("leaked %q: %s", leak, got)
		}
	}
	if !strings.Contains(got, "[redacted: secret:grafana_token]") || !strings.Contains(got, "[redacted: secret:inner] alone") || !strings.Contains(got, "ab stays") {
		t.Fatalf("got %s", got)
	}
	if len(found) != 2 || found[0].What != "secret:grafana_token" || found[0].Count != 3 || found[1].What != "secret:inner" || found[1].Count != 1 {
		t.Fatalf("findings %+v (text %s)", found, got)
	}
	if _, f := r.String("nothing here"); f != nil {
		t.Fatalf("findings on clean text: %+v", f)
	}
	// The zero Redactor redacts formats only.
	var zero *redact.Redactor
	if got, _ := zero.String("AKIAIOSFODNN7EXAMPLE"); got != "[redacted: aws access key]" {
		t.Fatal(got)
	}
}

// FuzzRedact: redaction never panics, is idempotent, and a planted secret never survives,
// whatever surrounds it.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", pemKey, "root:$6$saltsalt$hashhashhashhash:1::", "Authorization: Bearer abcdefghijklmnopq", "ghp_" + strings.Repeat("x", 36), "\xff\xfe-----BEGIN PRIVATE KEY-----"} {
		f.Add(s)
	}
	const planted = "Planted-Secret-Value-42"
	r := redact.New(map[string]string{"planted": planted})
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<16 {
			return
		}
		once, _ := r.String(s + planted + s)
		if strings.Contains(once, planted) {
			t.Fatalf("planted value survived: %q", once)
		}
		twice, _ := r.String(once)
		if twice != once {
			t.Fatalf("not idempotent:\n%q\n%q", once, twice)
		}
	})
}

// BenchmarkRedact16K: a 16 KiB tool output (http_get's text cap) with ten configured secrets.
func BenchmarkRedact16K(b *testing.B) {
	values := map[string]string{}
	for i := range 10 {
		values[strings.Repeat(string(rune('a'+i)), 3)] = strings.Repeat(string(rune('A'+i)), 24)
	}
	text := strings.Repeat("load average: 0.10 0.20 0.30 Authorization: Bearer abcdefghijklmnopq ghp_x\n", 16<<10/76)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_, _ = redact.New(values).String(text)
	}
}

// BenchmarkRedact16KClean: the usual case, a 16 KiB output holding no credential.
func BenchmarkRedact16KClean(b *testing.B) {
	values := map[string]string{"grafana_token": "glsa_0123456789abcdef0123456789abcdef", "db": "correct-horse-battery"}
	text := strings.Repeat("Dec  7 09:10:27 pve systemd[1]: Started session 42 of user root; load 0.10 0.20\n", 16<<10/80)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_, _ = redact.New(values).String(text)
	}
}
