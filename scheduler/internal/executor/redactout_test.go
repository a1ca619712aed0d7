package executor

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/redact"
)

// Output arrives in chunks that may split a secret or a private key block anywhere: the
// redactor stores a line only once it is complete (a key block once it has ended), so each
// is redacted whole, whatever the chunking; what is left at the end is redacted too, and the
// note counts what was taken.
func TestOutRedactorChunks(t *testing.T) {
	t.Parallel()
	const value = "planted-0123456789abcdef"
	text := "TOKEN=" + value + "\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUA\n" +
		"-----END OPENSSH PRIVATE KEY-----\nroot:$6$Zq3k1Rr8$Gd2m0a5yqQqg9bGZ8f0K1Zp2o0Y5a7k0wC9uQJq8m.:19700::\nlast " + value
	for _, size := range []int{1, 3, 7, 16, 64, len(text)} {
		o := newOutRedactor(redact.New(map[string]string{"tok": value}))
		var out strings.Builder
		for i := 0; i < len(text); i += size {
			out.Write(o.take(streamOutput, []byte(text[i:min(i+size, len(text))])))
		}
		out.Write(o.rest(streamOutput))
		got := out.String()
		for _, leak := range []string{value, "b3BlbnNzaC1rZXkt", "Gd2m0a5yqQqg9b"} {
			if strings.Contains(got, leak) {
				t.Fatalf("chunks of %d: %q leaks %q", size, got, leak)
			}
		}
		if !strings.Contains(got, "TOKEN=[redacted: secret:tok]\n[redacted: private key]\nroot:[redacted: password hash]") ||
			!strings.HasSuffix(got, "last [redacted: secret:tok]") {
			t.Fatalf("chunks of %d: %q", size, got)
		}
		if n := o.note(); n != "1 × password hash, 1 × private key, 2 × secret:tok" {
			t.Errorf("chunks of %d: note %q", size, n)
		}
	}
	// A result keeps its JSON form; the error is redacted as text.
	o := newOutRedactor(redact.New(map[string]string{"tok": value}))
	raw := o.result(map[string]string{"line": "x " + value})
	if s, _ := raw.(interface{ MarshalJSON() ([]byte, error) }); s == nil {
		t.Fatalf("result %T", raw)
	} else if b, _ := s.MarshalJSON(); string(b) != `{"line":"x [redacted: secret:tok]"}` {
		t.Errorf("result %s", b)
	}
}

// BenchmarkOutRedactor: 1 MiB of ordinary command output (log-like lines), in 4 KiB chunks,
// through the line-at-a-time redactor with three stored secrets.
func BenchmarkOutRedactor(b *testing.B) {
	line := "2026-12-07T10:00:00Z info service started worker=12 path=/var/lib/app/data status=ok\n"
	text := []byte(strings.Repeat(line, (1<<20)/len(line)))
	r := redact.New(map[string]string{"a": "planted-0123456789abcdef", "b": "another-secret-value", "c": "hunter2-but-longer"})
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		o := newOutRedactor(r)
		for i := 0; i < len(text); i += 4096 {
			_ = o.take(streamOutput, text[i:min(i+4096, len(text))])
		}
		_ = o.rest(streamOutput)
	}
}
