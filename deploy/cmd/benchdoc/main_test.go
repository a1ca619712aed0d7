package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/oikos-hq/oikos/shared/policy
cpu: AMD EPYC
BenchmarkClassifyCorpus 	  157590	      7288 ns/op	    136010 classifications/cpu-s	    4356 B/op	      29 allocs/op
BenchmarkClassifySimple-2 	  253498	      4768 ns/op	    3496 B/op	      20 allocs/op
PASS
ok  	github.com/oikos-hq/oikos/shared/policy	5.685s
pkg: github.com/oikos-hq/oikos/shared/eventbus
BenchmarkDelivery 	 20000	     51234 ns/op
Benchmark lines that are not results are ignored
--- BENCH: BenchmarkX
ok  	github.com/oikos-hq/oikos/shared/eventbus	2.1s
`

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("parsed %d results, want 3: %+v", len(got), got)
	}
	if got[0].pkg != "github.com/oikos-hq/oikos/shared/policy" || got[0].name != "BenchmarkClassifyCorpus" || got[0].iterations != "157590" {
		t.Errorf("first result = %+v", got[0])
	}
	if len(got[0].metrics) != 4 || got[0].metrics[1] != [2]string{"136010", "classifications/cpu-s"} {
		t.Errorf("metrics = %v", got[0].metrics)
	}
	if got[2].pkg != "github.com/oikos-hq/oikos/shared/eventbus" || got[2].metrics[0] != [2]string{"51234", "ns/op"} {
		t.Errorf("third result = %+v", got[2])
	}
}

func TestRunSplicesTheTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := filepath.Join(dir, "b.md")
	before := "# Benchmarks\n\nprose stays\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\nmore prose\n"
	if err := os.WriteFile(doc, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-doc", doc}, strings.NewReader(sample), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, _ := os.ReadFile(doc)
	out := string(data)
	for _, want := range []string{"prose stays", "more prose", "| `shared/policy` | ClassifyCorpus | 157590 | 7288 ns/op, 136010 classifications/cpu-s, 4356 B/op, 29 allocs/op |", "| `shared/eventbus` | Delivery | 20000 | 51234 ns/op |"} {
		if !strings.Contains(out, want) {
			t.Errorf("document lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "old table") {
		t.Errorf("the old table stayed:\n%s", out)
	}
}

func TestRunRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := filepath.Join(dir, "b.md")
	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-doc", doc}, strings.NewReader(sample), &stderr); code != 1 || !strings.Contains(stderr.String(), "no <!-- benchdoc:begin -->") {
		t.Errorf("no markers: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-doc", doc}, strings.NewReader("PASS\n"), &stderr); code != 1 || !strings.Contains(stderr.String(), "no benchmark lines") {
		t.Errorf("no benchmarks: exit %d, %q", code, stderr.String())
	}
	if data, _ := os.ReadFile(doc); string(data) != "no markers\n" {
		t.Errorf("a refusal changed the document: %q", data)
	}
	_ = table(nil, time.Now(), "x")
}
