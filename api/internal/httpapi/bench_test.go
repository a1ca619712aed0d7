package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// TestHTTPBenchmark measures the api on a generated fleet (issue 4 "Measure"): 10,000
// entities, 30,000 edges and 5,000 knowledge documents, driven by a load generator in this
// process over loopback. It runs only with OIKOS_BENCH=1 (make bench) and writes its figures
// as markdown to OIKOS_BENCH_OUT (default: stdout via the test log).
//
// The fleet is bulk-loaded with COPY: it is test data, and loading 45,000 rows through the
// mutation path would measure the loader, not the reads. PATCH throughput does go through
// the mutation path (graph.Service), as every real write does.
func TestHTTPBenchmark(t *testing.T) {
	if os.Getenv("OIKOS_BENCH") == "" {
		t.Skip("set OIKOS_BENCH=1 to run the HTTP benchmark (make bench)")
	}
	e := newEnv(t, envOptions{buffer: 1024})
	f := generateFleet(t, e)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	get := func(path string) func() error {
		return func() error { return request(hc, "GET", e.ts.URL+path, e.readonly.token, "") }
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	pick := func(s []string) string {
		mu.Lock()
		defer mu.Unlock()
		return s[rng.IntN(len(s))]
	}
	// Each read is measured twice: one client at a time (the latency of the request itself)
	// and four at once (two per core: the CPU is shared with the load generator, so this
	// shows latency under saturation).
	const n, conc = 1000, 4
	var rows []benchRow
	add := func(name, goal string, lat [2][]time.Duration, note string) {
		rows = append(rows, benchRow{name: name, goal: goal, lat: lat, note: note})
	}
	run := func(t *testing.T, n, conc int, fn func() error) [2][]time.Duration {
		return [2][]time.Duration{runLoad(t, n, 1, fn), runLoad(t, n, conc, fn)}
	}
	read := func(name, goal string, n int, fn func() error) {
		if benchWants(name) {
			add(name, goal, run(t, n, conc, fn), "")
		}
	}
	read("entity list page (limit 50, from a random cursor)", "p99 ≤ 20 ms", n, func() error {
		return get("/api/v1/entities?limit=50&cursor=" + url.QueryEscape(cursorOf(pick(f.slugs))))()
	})
	read("entity list page (type=guest incl. subtypes, health=down,up)", "p99 ≤ 20 ms", n, func() error {
		return get("/api/v1/entities?limit=50&type=guest&health=down,up&cursor=" + url.QueryEscape(cursorOf(pick(f.slugs))))()
	})
	read("get entity by slug", "p99 ≤ 20 ms", n, func() error {
		return get("/api/v1/entities/" + pick(f.slugs))()
	})
	// Blast radius: CPU per request (api process, which includes the load generator, and
	// the Postgres server) is reported with the latencies, as it is steadier than wall-clock
	// figures on a shared machine.
	meter := newCPUMeter(t, e.pool)
	blast := func(name string, n int, from []string) {
		if !benchWants(name) {
			return
		}
		fn := func() error { return get("/api/v1/entities/" + pick(from) + "/blast-radius?depth=6")() }
		// Warm-up at full concurrency: the pool's extra connections, their prepared
		// statements and Postgres's caches are set up before measuring.
		runLoad(t, 4*conc, conc, fn)
		a := meter.sample()
		one := runLoad(t, n, 1, fn)
		b := meter.sample()
		four := runLoad(t, n, conc, fn)
		c := meter.sample()
		// How big is a depth-6 radius from the first root on this fleet?
		var out struct {
			Items []any `json:"items"`
		}
		e.readonly.do("GET", "/api/v1/entities/"+from[0]+"/blast-radius?depth=6", nil).expect(t, 200).json(t, &out)
		add(name, "p99 ≤ 20 ms", [2][]time.Duration{one, four}, fmt.Sprintf("%d entities affected from %s; 1 client %s; %d clients %s",
			len(out.Items), from[0], meter.perOp(a, b, n), conc, meter.perOp(b, c, n)))
	}
	blast("blast radius depth 6 (from a Proxmox host)", 300, f.hosts)
	if benchWants("blast radius depth 6 (from a Proxmox host)") {
		rows[len(rows)-1].note += "; " + blastPaths(t, e, meter, f.hosts, 300)
	}
	blast("blast radius depth 6 (from a service)", n, f.services)
	read("knowledge search (2 random words, limit 20)", "p99 ≤ 50 ms", n, func() error {
		q := pick(vocabulary) + " " + pick(vocabulary)
		return get("/api/v1/knowledge/search?limit=20&q=" + url.QueryEscape(q))()
	})
	read("health summary (health=down,stale)", "-", 300, get("/api/v1/health/summary?health=down,stale"))

	if r, ok := benchPatch(t, e, f, hc, meter); ok {
		rows = append(rows, r)
	}

	fan := sseFanOut(t, e, 500, 40)
	add("SSE fan-out, 500 clients (commit → every client received)", "p99 ≤ 100 ms", [2][]time.Duration{nil, fan},
		"40 events × 500 clients")

	var b strings.Builder
	fmt.Fprintf(&b, "# api HTTP benchmark\n\nGenerated fleet: %d entities (+%d knowledge documents), %d edges, %d status rows. "+
		"Load generator in the test process, %d concurrent clients over loopback, keep-alive, bearer token checked on every request. "+
		"Machine: %d cores. `OIKOS_BENCH=1 go test -run TestHTTPBenchmark ./internal/httpapi/` in api/ (no -race).\n\n",
		f.entities, f.docs, f.edges, f.statuses, conc, runtime.NumCPU())
	fmt.Fprintln(&b, "| measurement | n | 1 client p50 / p99 | 4 clients (†) p50 / p99 / max | goal | note |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	for _, r := range rows {
		one := "-"
		if len(r.lat[0]) > 0 {
			p50, p99, _ := percentiles(r.lat[0])
			one = ms(p50) + " / " + ms(p99)
		}
		p50, p99, mx := percentiles(r.lat[1])
		fmt.Fprintf(&b, "| %s | %d | %s | %s / %s / %s | %s | %s |\n", r.name, len(r.lat[1]), one, ms(p50), ms(p99), ms(mx), r.goal, r.note)
	}
	fmt.Fprintln(&b, "\n(†) PATCH: 8 writers; SSE: the 500 stream clients. Load average while measuring: see the run log.")
	t.Log("\n" + b.String())
	if out := os.Getenv("OIKOS_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type benchRow struct {
	name, goal, note string
	lat              [2][]time.Duration // one client, concurrent clients
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func percentiles(lat []time.Duration) (p50, p99, mx time.Duration) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99), s[len(s)-1]
}

func cursorOf(slug string) string {
	// The same encoding the server uses: base64url of the last key.
	return base64.RawURLEncoding.EncodeToString([]byte(slug))
}

// request sends one request and drains the answer; a non-2xx status is an error.
func request(hc *http.Client, method, u, token, body string) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d", method, u, resp.StatusCode)
	}
	return nil
}

// runLoad calls fn n times from conc goroutines and returns the latencies. Any failure
// fails the test: a benchmark of errors measures nothing.
func runLoad(t *testing.T, n, conc int, fn func() error) []time.Duration {
	t.Helper()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := fn(); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return lat
}

// sseFanOut connects clients to the stream, commits events one by one and returns, for
// every (event, client) pair, the time from the commit returning to the client having read
// the event.
func sseFanOut(t *testing.T, e *env, clients, events int) []time.Duration {
	t.Helper()
	type got struct {
		id int64
		at time.Time
	}
	recv := make([][]got, clients)
	ready := make(chan struct{}, clients)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: clients}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/stream?types=bench.fan", nil)
			req.Header.Set("Authorization", "Bearer "+e.readonly.token)
			resp, err := hc.Do(req)
			if err != nil {
				ready <- struct{}{}
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			ready <- struct{}{}
			for len(recv[i]) < events {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
					n, _ := strconv.ParseInt(id, 10, 64)
					recv[i] = append(recv[i], got{id: n, at: time.Now()})
				}
			}
		}()
	}
	for range clients {
		<-ready
	}
	// Wait until every handler has registered with the hub (its first frame is written
	// before that, so a read header is not enough).
	tick := time.NewTicker(5 * time.Millisecond)
	regDeadline := time.After(30 * time.Second)
	for e.health.Metrics.Value("oikos_api_sse_clients") < float64(clients) {
		select {
		case <-tick.C:
		case <-regDeadline:
			t.Fatalf("only %v of %d stream clients registered", e.health.Metrics.Value("oikos_api_sse_clients"), clients)
		}
	}
	tick.Stop()
	committed := map[int64]time.Time{}
	for range events {
		var id int64
		tx, err := e.pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if id, err = eventbus.Append(context.Background(), tx, eventbus.Event{Type: "bench.fan"}, map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		committed[id] = time.Now()
		time.Sleep(25 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cancel()
		<-done
	}
	var lat []time.Duration
	missing := 0
	for i := range clients {
		if len(recv[i]) < events {
			missing += events - len(recv[i])
		}
		for _, g := range recv[i] {
			if c, ok := committed[g.id]; ok {
				lat = append(lat, max(0, g.at.Sub(c)))
			}
		}
	}
	if missing > 0 {
		t.Errorf("SSE fan-out: %d (event, client) deliveries missing", missing)
	}
	return lat
}

type fleet struct {
	slugs, hosts, services []string
	entities, docs, edges  int
	statuses               int
}

// vocabulary feeds generated knowledge bodies and search queries.
var vocabulary = strings.Fields(`backup restore zfs pool scrub snapshot dataset nfs export mount proxmox lxc vm
	guest container docker compose caddy traefik nginx certificate renew dns record resolver pihole unbound
	mesh netbird wireguard tunnel firewall port forward router switch vlan subnet dhcp lease ssh key agent
	monitoring probe check disk memory cpu load latency timeout outage incident upgrade kernel apt package
	postgres database replication vacuum index migration jellyfin transcoding media library plex music
	photos immich nextcloud storage quota retention rclone restic borg offsite encryption secret vault token
	identity oidc authentik login session cookie proxy ingress route tls acme letsencrypt wildcard domain`)

// generateFleet bulk-loads the benchmark fleet.
func generateFleet(t *testing.T, e *env) fleet {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(42, 42))
	type ent struct {
		id, slug, typ, name, state string
		attrs                      map[string]any
	}
	var ents []ent
	mk := func(typ, name string, attrs map[string]any) ent {
		id, err := graph.NewID()
		if err != nil {
			t.Fatal(err)
		}
		x := ent{id: id, slug: typ + ":" + name, typ: typ, name: name, state: "active", attrs: attrs}
		ents = append(ents, x)
		return x
	}
	var f fleet
	var hosts, pools, guests, services, routes []ent
	// 40 Proxmox hosts with 75 guests each (contiguous blocks), 20 storage pools.
	for i := range 40 {
		hosts = append(hosts, mk("proxmox-host", fmt.Sprintf("pve%02d", i), map[string]any{"node": fmt.Sprintf("pve%02d", i)}))
	}
	for i := range 20 {
		pools = append(pools, mk("storage-pool", fmt.Sprintf("pool%02d", i), map[string]any{}))
	}
	for i := range 3000 {
		typ := "lxc"
		if i%4 == 0 {
			typ = "vm"
		}
		h := hosts[i/75]
		guests = append(guests, mk(typ, fmt.Sprintf("guest%04d", i), map[string]any{"vmid": 100 + i, "host": h.name}))
	}
	for i := range 4000 {
		services = append(services, mk("service", fmt.Sprintf("svc%04d", i), map[string]any{"port": 1000 + i, "unit": fmt.Sprintf("svc%04d.service", i)}))
	}
	for i := range 1500 {
		routes = append(routes, mk("ingress-route", fmt.Sprintf("r%04d.lab.example", i), map[string]any{"public_host": fmt.Sprintf("r%04d.lab.example", i)}))
	}
	for i := len(ents); i < 10000; i++ {
		mk("host", fmt.Sprintf("box%04d", i), map[string]any{"role": "misc"})
	}
	nonDocs := append([]ent(nil), ents...)
	type doc struct {
		e           ent
		title, body string
		tags        []string
	}
	var docs []doc
	// Text: mostly a long tail of 30,000 distinct terms (Zipf), with a domain word about
	// every twelfth token, so a domain word appears in roughly one document in eight, as in
	// a real knowledge base, rather than in all of them.
	zipf := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 4, 29999)
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			if r.IntN(12) == 0 {
				w[i] = vocabulary[r.IntN(len(vocabulary))]
			} else {
				w[i] = "t" + strconv.FormatUint(zipf.Uint64(), 36)
			}
		}
		return strings.Join(w, " ")
	}
	for i := range 5000 {
		kind := []string{"document", "investigation", "runbook"}[i%3]
		d := mk(kind, fmt.Sprintf("doc%04d", i), map[string]any{})
		d.state = "published"
		ents[len(ents)-1].state = "published"
		title := vocabulary[r.IntN(len(vocabulary))] + " " + words(4)
		docs = append(docs, doc{e: d, title: title, body: words(200 + r.IntN(200)),
			tags: []string{vocabulary[r.IntN(len(vocabulary))], vocabulary[r.IntN(len(vocabulary))]}})
	}
	type edge struct{ typ, src, dst string }
	var edges []edge
	for i, g := range guests {
		edges = append(edges, edge{"hosts", hosts[i/75].id, g.id})
		edges = append(edges, edge{"stored-on", g.id, pools[i/150].id})
	}
	for i, s := range services {
		edges = append(edges, edge{"runs-on", s.id, guests[i*len(guests)/len(services)].id})
	}
	for i, rt := range routes {
		edges = append(edges, edge{"routes-to", rt.id, services[(i*8/3)%len(services)].id})
	}
	for _, d := range docs {
		edges = append(edges, edge{"about", d.e.id, nonDocs[r.IntN(len(nonDocs))].id})
	}
	seen := map[string]bool{}
	for _, x := range edges {
		seen[x.typ+x.src+x.dst] = true
	}
	// Service dependencies are layered (a service depends on up to a few of the next 30),
	// so the dependency graph is a DAG with local fan-in, like a real stack, rather than
	// one random web in which everything depends on everything.
	for len(edges) < 30000 {
		i := r.IntN(len(services) - 1)
		j := min(len(services)-1, i+1+r.IntN(30))
		a, b := services[i], services[j]
		if seen["depends-on"+a.id+b.id] {
			continue
		}
		seen["depends-on"+a.id+b.id] = true
		edges = append(edges, edge{"depends-on", a.id, b.id})
	}
	copyRows := func(table string, cols []string, rows [][]any) {
		t.Helper()
		if _, err := e.pool.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows)); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	var er [][]any
	for _, x := range ents {
		er = append(er, []any{x.id, x.slug, x.typ, x.name, x.state, x.attrs})
	}
	copyRows("entities", []string{"id", "slug", "type", "name", "state", "attributes"}, er)
	var kr [][]any
	for _, d := range docs {
		kr = append(kr, []any{d.e.id, d.e.typ, d.title, d.body, d.tags})
	}
	copyRows("knowledge_entities", []string{"entity_id", "kind", "title", "body", "tags"}, kr)
	var rr [][]any
	for _, x := range edges {
		id, _ := graph.NewID()
		rr = append(rr, []any{id, x.typ, x.src, x.dst, map[string]any{}})
	}
	copyRows("relationships", []string{"id", "type", "source_id", "target_id", "attributes"}, rr)
	var sr [][]any
	for _, x := range nonDocs {
		h := "up"
		switch v := r.IntN(20); {
		case v == 0:
			h = "down"
		case v == 1:
			h = "stale"
		case v == 2:
			h = "degraded"
		}
		sr = append(sr, []any{x.id, h, time.Now()})
	}
	copyRows("entity_status", []string{"entity_id", "health", "last_check_at"}, sr)
	// A running api's tables are vacuumed; a freshly COPYed one is not, and autovacuum (plus
	// first reads setting hint bits) would otherwise land in whichever measurement runs first.
	if _, err := e.pool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		t.Fatal(err)
	}
	for _, x := range nonDocs {
		f.slugs = append(f.slugs, x.slug)
	}
	for _, h := range hosts {
		f.hosts = append(f.hosts, h.slug)
	}
	for _, s := range services {
		f.services = append(f.services, s.slug)
	}
	f.entities, f.docs, f.edges, f.statuses = len(nonDocs), len(docs), len(edges), len(sr)
	return f
}
