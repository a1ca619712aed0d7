// The dashboard's measurements in Chromium (issue 14, Measure; docs/benchmarks.md "Dashboard
// in Chromium"), run by the Go test TestDashboardBenchmark (OIKOS_BENCH=1) against a stack
// holding a 10,000-entity fleet. It prints the figures as markdown (and JSON to
// DASH_BENCH_OUT when set). Times are read inside the page: performance.now() counts from
// the navigation's start, and waits poll on animation frames, so a figure is at most one
// frame (~16 ms) late.
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { launch, env, signIn, ctl } from '../tests/lib.mjs';

const RUNS = 5;
const b = await launch();
const figures = {};
const median = (xs) => [...xs].sort((a, c) => a - c)[Math.floor(xs.length / 2)];
const round = (x) => Math.round(x);

try {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.operator);

  // 1. Initial route JS: every script the first load of / fetches until the overview shows
  // its counts, each gzip-compressed (level 9, what a gzip-serving proxy would send).
  {
    const p = await ctx.newPage();
    const scripts = new Map();
    p.on('response', async (r) => {
      if (r.request().resourceType() === 'script') scripts.set(r.url(), r);
    });
    await p.goto('/');
    await p.waitForFunction(() => /\d/.test(document.querySelector('[data-testid=count-up]')?.textContent ?? ''), null, { polling: 'raf' });
    let raw = 0,
      gz = 0;
    const files = [];
    for (const [url, r] of scripts) {
      const body = await r.body();
      const z = gzipSync(body, { level: 9 }).length;
      raw += body.length;
      gz += z;
      files.push(`${new URL(url).pathname.split('/').pop()} ${(z / 1024).toFixed(1)} KB`);
    }
    figures.initialJS = { files: scripts.size, raw, gzip: gz, list: files };
    await p.close();
  }

  // 2. First render: navigation start to the test id visible with data, on a fresh page
  // each run (the JS comes from the browser's cache after the first).
  async function firstRender(path, ready) {
    const xs = [];
    for (let i = 0; i < RUNS; i++) {
      const p = await ctx.newPage();
      await p.goto(path, { waitUntil: 'commit' });
      const h = await p.waitForFunction(ready, null, { polling: 'raf', timeout: 20_000 });
      xs.push(await h.jsonValue());
      await p.close();
    }
    return { runs: xs.map(round), median: round(median(xs)), max: round(Math.max(...xs)) };
  }
  figures.overview = await firstRender('/', () => {
    const el = document.querySelector('[data-testid=count-up]');
    return el && /\d/.test(el.textContent) ? performance.now() : false;
  });
  figures.entities = await firstRender('/entities', () =>
    document.querySelectorAll('[data-testid=entity-row]').length > 0 ? performance.now() : false,
  );

  // 3. A filter change: from the input event to the table showing only matching rows.
  {
    await page.goto('/entities');
    await page.getByTestId('entity-row').first().waitFor();
    const xs = [];
    const queries = ['guest00', 'svc01', 'box02', 'pve1', 'guest29', 'svc3', 'r000'];
    for (const q of queries) {
      const ms = await page.evaluate(async (q) => {
        const input = document.querySelector('[data-testid=filter-q]');
        const t0 = performance.now();
        input.value = q;
        input.dispatchEvent(new Event('input', { bubbles: true }));
        return await new Promise((resolve, reject) => {
          const end = t0 + 10_000;
          const tick = () => {
            const rows = [...document.querySelectorAll('[data-testid=entity-row]')];
            if (rows.length > 0 && rows.every((r) => r.dataset.slug.includes(q))) return resolve(performance.now() - t0);
            if (performance.now() > end) return reject(new Error(`filter ${q}: rows never matched`));
            requestAnimationFrame(tick);
          };
          requestAnimationFrame(tick);
        });
      }, q);
      xs.push(ms);
    }
    figures.filter = { queries, runs: xs.map(round), median: round(median(xs)), max: round(Math.max(...xs)) };

    // The health select has no debounce: from its change event to rows of that health only.
    const ys = [];
    const healths = ['down', 'degraded', 'stale', 'up', 'down', 'degraded', 'stale'];
    await page.evaluate(() => {
      const input = document.querySelector('[data-testid=filter-q]');
      input.value = '';
      input.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.waitForTimeout(600);
    for (const h of healths) {
      ys.push(
        await page.evaluate(async (h) => {
          const sel = document.querySelector('[data-testid=filter-health]');
          const t0 = performance.now();
          sel.value = h;
          sel.dispatchEvent(new Event('change', { bubbles: true }));
          return await new Promise((resolve, reject) => {
            const end = t0 + 10_000;
            const tick = () => {
              const rows = [...document.querySelectorAll('[data-testid=entity-row]')];
              if (rows.length > 0 && rows.every((r) => r.querySelector('[data-health]')?.dataset.health === h)) return resolve(performance.now() - t0);
              if (performance.now() > end) return reject(new Error(`health ${h}: rows never matched`));
              requestAnimationFrame(tick);
            };
            requestAnimationFrame(tick);
          });
        }, h),
      );
    }
    figures.healthFilter = { healths, runs: ys.map(round), median: round(median(ys)), max: round(Math.max(...ys)) };
  }

  // 4. 200 health.changed events per second for 30 s, on the overview (every event moves
  // its counts) and on the entities table (the events aimed at the 50 rows it shows):
  // long tasks from a PerformanceObserver, the JS heap (after a forced GC) before and after,
  // and the events the page's EventSource received.
  async function storm(path, slugsOf) {
    const p = await ctx.newPage();
    const cdp = await ctx.newCDPSession(p);
    await cdp.send('Performance.enable');
    await cdp.send('Network.enable');
    let received = 0;
    cdp.on('Network.eventSourceMessageReceived', () => received++);
    await p.addInitScript(() => {
      window.__long = [];
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) window.__long.push(e.duration);
      }).observe({ type: 'longtask', buffered: true });
    });
    await p.goto(path);
    await p.waitForSelector('[data-testid=stream-status][data-status=live]');
    await p.waitForTimeout(1000);
    const slugs = slugsOf ? await slugsOf(p) : undefined;
    await p.evaluate(() => (window.__long = []));
    const heap = async () => {
      await cdp.send('HeapProfiler.collectGarbage');
      const m = await cdp.send('Performance.getMetrics');
      return m.metrics.find((x) => x.name === 'JSHeapUsedSize').value;
    };
    const before = await heap();
    received = 0;
    const res = await ctl('POST', '/health-events', { rate: 200, seconds: 30, ...(slugs ? { slugs } : {}) });
    await p.waitForTimeout(1000); // the last events land
    const after = await heap();
    const long = await p.evaluate(() => window.__long);
    const nodes = await p.evaluate(() => document.getElementsByTagName('*').length);
    await p.close();
    return {
      emitted: res.emitted,
      seconds: Math.round(res.seconds * 10) / 10,
      received,
      longTasks: long.length,
      maxLongTask: round(Math.max(0, ...long)),
      long: long.map(round),
      heapBeforeMB: +(before / 1048576).toFixed(1),
      heapAfterMB: +(after / 1048576).toFixed(1),
      domNodes: nodes,
    };
  }
  figures.stormOverview = await storm('/');
  figures.stormEntities = await storm('/entities', (p) =>
    p.getByTestId('entity-row').evaluateAll((rs) => rs.map((r) => r.dataset.slug)),
  );

  // 5. The graph (/graph). graphDrawn is true once the canvas (cytoscape, reached through
  // the registry it keeps on its container) holds exactly the nodes the list beside it
  // names and no "Drawing…" overlay is up; the figure is taken one frame later, when that
  // set has been painted. A type filter change is timed from a family checkbox's change
  // event; the storms run with the page drawn, once aimed at the drawn nodes (every event
  // recolours one) and once at the whole fleet.
  const graphDrawn = () => {
    const box = document.querySelector('[data-testid=graph-canvas]');
    const cy = box?._cyreg?.cy;
    if (!cy || box.parentElement.querySelector('[aria-busy=true]')) return false;
    const want = new Set([...document.querySelectorAll('[data-testid=graph-list] li[data-slug]')].map((li) => li.dataset.slug));
    const have = cy.nodes();
    return want.size > 0 && have.length === want.size && have.every((n) => want.has(n.id()));
  };
  const waitGraph = (p) => p.waitForFunction(graphDrawn, null, { polling: 'raf', timeout: 20_000 });
  // DASH_BENCH_PROFILE=dir writes CPU profiles of the graph's filter changes and storms there.
  const profileDir = process.env.DASH_BENCH_PROFILE;
  const profile = async (p, name, fn) => {
    if (!profileDir) return fn();
    const cdp = await ctx.newCDPSession(p);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
    await cdp.send('Profiler.start');
    try {
      return await fn();
    } finally {
      const { profile: prof } = await cdp.send('Profiler.stop');
      writeFileSync(`${profileDir}/${name}.cpuprofile`, JSON.stringify(prof));
      await cdp.detach();
    }
  };
  {
    await page.goto('/graph');
    await waitGraph(page);
    await page.locator('details.types summary').click();
    await page.waitForTimeout(500);
    const steps = [['machine', false], ['guest', false], ['service', false], ['machine', true], ['guest', true], ['service', true], ['machine', false], ['machine', true]];
    const xs = [];
    await profile(page, 'graph-filter', async () => {
    for (const [fam, on] of steps) {
      xs.push(
        await page.evaluate(
          async ({ fam, on, drawn }) => {
            const ok = new Function(`return (${drawn})()`);
            const box = [...document.querySelectorAll('details.types fieldset legend label')].find((l) => l.textContent.trim() === fam);
            const input = box?.querySelector('input');
            if (!input) throw new Error(`no type family ${fam} on /graph`);
            const before = document.querySelector('[data-testid=graph-showing]')?.textContent;
            const t0 = performance.now();
            input.checked = on;
            input.dispatchEvent(new Event('change', { bubbles: true }));
            return await new Promise((resolve, reject) => {
              const end = t0 + 15_000;
              const tick = () => {
                const now = document.querySelector('[data-testid=graph-showing]')?.textContent;
                if (now !== before && ok()) return requestAnimationFrame(() => resolve(performance.now() - t0));
                if (performance.now() > end) return reject(new Error(`graph type filter ${fam}=${on}: the canvas never showed the new set`));
                requestAnimationFrame(tick);
              };
              requestAnimationFrame(tick);
            });
          },
          { fam, on, drawn: graphDrawn.toString() },
        ),
      );
      await page.waitForTimeout(300);
    }
    });
    figures.graphFilter = { steps: steps.map(([f, on]) => `${on ? '+' : '-'}${f}`), runs: xs.map(round), median: round(median(xs)), max: round(Math.max(...xs)) };
  }
  const graphSlugs = async (p) => {
    await waitGraph(p);
    await p.waitForTimeout(1000);
    return p.getByTestId('graph-list').locator('li[data-slug]').evaluateAll((ls) => ls.map((l) => l.dataset.slug));
  };
  // The storms above with a CPU profile around the events when DASH_BENCH_PROFILE is set:
  // storm() itself unchanged, its slugsOf starts the profiler and its page's close stops it.
  const profiled = (name, slugsOf) => async (p) => {
    const slugs = await slugsOf(p);
    if (profileDir) {
      const cdp = await ctx.newCDPSession(p);
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
      await cdp.send('Profiler.start');
      // Stopped by time: the 30 s of events end, and storm waits 1 s more before it closes.
      setTimeout(async () => {
        const { profile: prof } = await cdp.send('Profiler.stop');
        writeFileSync(`${profileDir}/${name}.cpuprofile`, JSON.stringify(prof));
      }, 30_500);
    }
    return slugs;
  };
  figures.stormGraphDrawn = await storm('/graph', profiled('graph-storm-drawn', graphSlugs));
  figures.stormGraphFleet = await storm(
    '/graph',
    profiled('graph-storm-fleet', async (p) => {
      await graphSlugs(p);
      return undefined;
    }),
  );
} finally {
  await b.close();
}

const f = figures;
const md = [
  `Fleet: ${process.env.DASH_BENCH_ENTITIES ?? '?'} entities. Headless Chromium, one tab; the host's CPUs: ${(await import('node:os')).cpus().length}, load average ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')} at the end.`,
  '',
  '| Measure | Result | Goal |',
  '|---|---|---|',
  `| Initial route JS (/, gzip -9, ${f.initialJS.files} files) | ${(f.initialJS.gzip / 1024).toFixed(1)} KB (${(f.initialJS.raw / 1024).toFixed(1)} KB raw) | ≤ 250 KB |`,
  `| Overview first render (nav start → counts shown), median / max of ${RUNS} | ${f.overview.median} / ${f.overview.max} ms | ≤ 1 s |`,
  `| Entities first render (nav start → rows shown), median / max of ${RUNS} | ${f.entities.median} / ${f.entities.max} ms | ≤ 1 s |`,
  `| Filter change (input → only matching rows), median / max of ${f.filter.runs.length} | ${f.filter.median} / ${f.filter.max} ms | ≤ 200 ms |`,
  `| Health filter change (select → only rows of that health), median / max of ${f.healthFilter.runs.length} | ${f.healthFilter.median} / ${f.healthFilter.max} ms | ≤ 200 ms |`,
  `| 200 health.changed/s × 30 s on the overview: long tasks, longest | ${f.stormOverview.longTasks}, ${f.stormOverview.maxLongTask} ms (${f.stormOverview.received} of ${f.stormOverview.emitted} events received) | every task < 50 ms |`,
  `| … JS heap before → after (after GC) | ${f.stormOverview.heapBeforeMB} → ${f.stormOverview.heapAfterMB} MB | flat |`,
  `| 200 health.changed/s × 30 s on the entities table (its 50 rows): long tasks, longest | ${f.stormEntities.longTasks}, ${f.stormEntities.maxLongTask} ms (${f.stormEntities.received} of ${f.stormEntities.emitted} received) | every task < 50 ms |`,
  `| … JS heap before → after (after GC) | ${f.stormEntities.heapBeforeMB} → ${f.stormEntities.heapAfterMB} MB | flat |`,
  `| Graph type filter change (family checkbox → canvas shows the new set), median / max of ${f.graphFilter.runs.length} | ${f.graphFilter.median} / ${f.graphFilter.max} ms | ≤ 200 ms |`,
  `| 200 health.changed/s × 30 s on the graph (its drawn nodes): long tasks, longest | ${f.stormGraphDrawn.longTasks}, ${f.stormGraphDrawn.maxLongTask} ms (${f.stormGraphDrawn.received} of ${f.stormGraphDrawn.emitted} received) | every task < 50 ms |`,
  `| 200 health.changed/s × 30 s on the graph (the whole fleet): long tasks, longest | ${f.stormGraphFleet.longTasks}, ${f.stormGraphFleet.maxLongTask} ms (${f.stormGraphFleet.received} of ${f.stormGraphFleet.emitted} received) | every task < 50 ms |`,
  `| … JS heap before → after (after GC), drawn / fleet | ${f.stormGraphDrawn.heapBeforeMB} → ${f.stormGraphDrawn.heapAfterMB} / ${f.stormGraphFleet.heapBeforeMB} → ${f.stormGraphFleet.heapAfterMB} MB | flat |`,
  '',
  `Initial route scripts: ${f.initialJS.list.join(', ')}.`,
  `Runs (ms): overview ${f.overview.runs.join(', ')}; entities ${f.entities.runs.join(', ')}; text filter ${f.filter.runs.join(', ')}; health filter ${f.healthFilter.runs.join(', ')}.`,
  `Long tasks (ms): overview ${f.stormOverview.long.join(', ') || 'none'}; entities ${f.stormEntities.long.join(', ') || 'none'}.`,
  `Graph type filter runs (ms, ${f.graphFilter.steps.join(' ')}): ${f.graphFilter.runs.join(', ')}. Graph long tasks (ms): drawn ${f.stormGraphDrawn.long.join(', ') || 'none'}; fleet ${f.stormGraphFleet.long.join(', ') || 'none'}.`,
].join('\n');
console.log(md);
console.log(JSON.stringify(figures));
if (process.env.DASH_BENCH_OUT) writeFileSync(process.env.DASH_BENCH_OUT, JSON.stringify(figures, null, 2));
