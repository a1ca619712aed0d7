package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/graph"
)

// patchWriters is how many clients PATCH at once (issue 4: PATCH throughput).
const patchWriters = 8

// benchPatch measures PATCH /api/v1/entities/{slug} throughput: patchWriters clients for 10 s,
// each patching a random service through the mutation path (validation, audit, event, check
// re-derivation in one transaction), then the same writes through graph.Service alone for
// 5 s, to separate the mutation path from the HTTP layer. CPU per PATCH is reported for this
// process (api and load generator) and for the Postgres server. ok is false when
// OIKOS_BENCH_ONLY leaves the row out.
//
// Run only this row: OIKOS_BENCH=1 OIKOS_BENCH_ONLY=PATCH bin/oikos-local test -- go test
// -count=1 -run '^TestHTTPBenchmark$' -v ./api/internal/httpapi/
func benchPatch(t *testing.T, e *env, f fleet, hc *http.Client, meter *cpuMeter) (row benchRow, ok bool) {
	t.Helper()
	const name = "PATCH attributes (8 concurrent writers)"
	if !benchWants(name) {
		return benchRow{}, false
	}
	ctx := context.Background()
	// The fleet is bulk-loaded by COPY, so its services have no derived checks yet; in a
	// real graph every entity got them when it was created or seeded. Derive them first, so
	// the benchmark measures a PATCH of an entity in that steady state rather than the
	// one-off creation of its checks on the first PATCH.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.graph.SyncChecksBulk(ctx, tx, graph.Meta{Actor: "bench"}, e.graph.Ontology(), f.services); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	patch := func(r *rand.Rand) error {
		slug := f.services[r.IntN(len(f.services))]
		body := fmt.Sprintf(`{"attributes":{"version":"%d"}}`, r.IntN(1_000_000))
		return request(hc, "PATCH", e.ts.URL+"/api/v1/entities/"+slug, e.operator.token, body)
	}
	// Warm up: open the writers' connections (HTTP and database) and fill statement caches.
	var wg sync.WaitGroup
	for w := range patchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for range 20 {
				if err := patch(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	var patches, failures atomic.Int64
	var lat []time.Duration
	var latMu sync.Mutex
	deadline := time.Now().Add(10 * time.Second)
	before := meter.sample()
	start := time.Now()
	for w := range patchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := patch(r); err != nil {
					failures.Add(1)
					continue
				}
				d := time.Since(t0)
				patches.Add(1)
				latMu.Lock()
				lat = append(lat, d)
				latMu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := meter.sample()
	note := fmt.Sprintf("**%.0f PATCH/s** (%d in %.1fs, %d failed); %s", float64(patches.Load())/elapsed.Seconds(),
		patches.Load(), elapsed.Seconds(), failures.Load(), meter.perOp(before, after, int(patches.Load())))

	// The same writes through graph.Service directly (no HTTP, no token check).
	var direct atomic.Int64
	deadline = time.Now().Add(5 * time.Second)
	before = meter.sample()
	start = time.Now()
	for w := range patchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for time.Now().Before(deadline) {
				slug := f.services[r.IntN(len(f.services))]
				if _, err := e.graph.UpdateAttributes(ctx, graph.Meta{Actor: "bench"}, slug,
					map[string]any{"version": strconv.Itoa(r.IntN(1_000_000))}, nil); err == nil {
					direct.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	after = meter.sample()
	note += fmt.Sprintf("; graph.Service.UpdateAttributes alone: %.0f/s, %s", float64(direct.Load())/elapsed.Seconds(),
		meter.perOp(before, after, int(direct.Load())))
	return benchRow{name: name, goal: "≥ 1,000/s", lat: [2][]time.Duration{nil, lat}, note: note}, true
}
