// A small history router: the dashboard has a dozen routes and needs no library for them.
// Links are ordinary <a href="/..."> elements; a click on one is handled here (unless it
// opens a new tab), so the back button, bookmarks and middle-click all behave. The api
// answers every non-api path with index.html (SPA fallback), so a reload lands here too.

export interface Route {
  name: string;
  params: Record<string, string>;
}

const table: [RegExp, string, string[]][] = [
  [/^\/$/, 'overview', []],
  [/^\/entities\/?$/, 'entities', []],
  [/^\/entities\/(.+)$/, 'entity', ['ref']],
  [/^\/ops\/?$/, 'ops', []],
  [/^\/chat\/?$/, 'chat', []],
  [/^\/chat\/([^/]+)$/, 'chat', ['session']],
  [/^\/knowledge\/?$/, 'knowledge', []],
  [/^\/knowledge\/(.+)$/, 'doc', ['slug']],
  [/^\/signals\/?$/, 'signals', []],
  [/^\/graph\/?$/, 'graph', []],
  [/^\/settings\/?$/, 'settings', []],
];

function match(path: string): Route {
  for (const [re, name, keys] of table) {
    const m = re.exec(path);
    if (m) {
      const params: Record<string, string> = {};
      keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1] ?? '')));
      return { name, params };
    }
  }
  return { name: 'notfound', params: {} };
}

class Router {
  route = $state<Route>(match(location.pathname));
  /** query is the current URL's search parameters (filters live in the URL, so they link). */
  query = $state(new URLSearchParams(location.search));

  constructor() {
    addEventListener('popstate', () => this.sync());
    document.addEventListener('click', (e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      const a = (e.target as Element | null)?.closest?.('a');
      if (!a || a.target || a.hasAttribute('download') || a.origin !== location.origin) return;
      if (a.pathname.startsWith('/api/')) return;
      e.preventDefault();
      this.go(a.pathname + a.search + a.hash);
    });
  }

  /** go navigates to href, pushing a history entry (replace: no new entry, for filters). */
  go(href: string, replace = false): void {
    if (href === location.pathname + location.search) return;
    if (replace) history.replaceState(null, '', href);
    else history.pushState(null, '', href);
    this.sync();
    if (!replace) scrollTo(0, 0);
  }

  /** setQuery replaces the query parameters given (an empty value removes one). */
  setQuery(values: Record<string, string | number | undefined>): void {
    const q = new URLSearchParams(location.search);
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined || v === '') q.delete(k);
      else q.set(k, String(v));
    }
    const s = q.toString();
    this.go(location.pathname + (s ? `?${s}` : ''), true);
  }

  private sync(): void {
    this.route = match(location.pathname);
    this.query = new URLSearchParams(location.search);
  }
}

export const router = new Router();
