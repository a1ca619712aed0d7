package policy

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. The benchmark reports it
// beside wall time because a loaded machine stretches wall time while the
// classifier's own cost stays put.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClassifyCorpus classifies the corpus round-robin: one op is one
// classification. Run with `go test -bench . -benchmem -cpu 1`.
func BenchmarkClassifyCorpus(b *testing.B) {
	cases := loadCorpus(b)
	p := Default()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		tc := cases[i%len(cases)]
		p.Classify(tc.Command, tc.Declared)
	}
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "classifications/s")
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "classifications/cpu-s")
	}
}

// BenchmarkClassifySimple is the common case: one short read-only command.
func BenchmarkClassifySimple(b *testing.B) {
	p := Default()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Classify("systemctl status caddy", "")
	}
}
