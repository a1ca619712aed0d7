// Package metricstest reads a /metrics endpoint in tests: Scrape fetches and parses the
// text exposition format into series and values.
package metricstest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Series are the samples of one scrape by series name: the metric name followed by its
// labels exactly as exposed (`go_goroutines`,
// `oikos_http_request_duration_seconds_count{code="200",method="GET",route="/healthz"}`;
// client_golang writes labels sorted by name).
type Series map[string]float64

// Scrape GETs url (a /metrics endpoint) and parses the answer; a transport error or a status
// other than 200 fails the test.
func Scrape(tb testing.TB, url string) Series {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("scrape %s: %s\n%s", url, resp.Status, b)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		tb.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// Parse reads the text exposition format. Comment lines are skipped; a malformed line is an
// error.
func Parse(r io.Reader) (Series, error) {
	out := Series{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := seriesEnd(line)
		if end <= 0 || end >= len(line) {
			return nil, &lineError{line}
		}
		fields := strings.Fields(line[end:])
		if len(fields) == 0 {
			return nil, &lineError{line}
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, &lineError{line}
		}
		out[line[:end]] = v
	}
	return out, sc.Err()
}

// seriesEnd is the index just past the series name and labels: past the closing brace,
// skipping quoted label values (which may hold braces, spaces and escapes).
func seriesEnd(line string) int {
	i := strings.IndexAny(line, "{ \t")
	if i < 0 || line[i] != '{' {
		return i
	}
	quoted := false
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case quoted && c == '\\':
			j++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return j + 1
		}
	}
	return -1
}

type lineError struct{ line string }

func (e *lineError) Error() string { return "malformed exposition line: " + e.line }

// Names returns the series whose name (before the labels) is name.
func (s Series) Names(name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}
