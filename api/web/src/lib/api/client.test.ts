import { beforeEach, describe, expect, it, vi } from 'vitest';

// The client is created at import with the fetch and Request of that moment, so each test
// stubs them first and imports a fresh copy. Request resolves the client's relative URLs
// against a test origin, as the browser does against the page's.
const ORIGIN = 'http://oikos.test';
class PageRequest extends Request {
  constructor(input: RequestInfo | URL, init?: RequestInit) {
    super(typeof input === 'string' && input.startsWith('/') ? ORIGIN + input : input, init);
  }
}

async function client(answer: (req: Request) => Promise<Response> | Response) {
  vi.resetModules();
  const fetch = vi.fn(answer);
  vi.stubGlobal('Request', PageRequest);
  vi.stubGlobal('fetch', fetch);
  const mod = await import('./client');
  const { session } = await import('../session.svelte');
  return { ...mod, session, fetch };
}

const json = (status: number, body: unknown, type = 'application/json') =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': type } });

const problem = {
  type: 'urn:oikos:problem:invalid',
  title: 'Invalid request',
  status: 422,
  detail: 'limit: must be between 1 and 500',
  field: 'limit',
  errors: [{ field: 'limit', reason: 'must be between 1 and 500' }],
};

describe('ok', () => {
  beforeEach(() => {
    vi.unstubAllGlobals();
  });

  it('returns the data of a successful call, sent to the api path', async () => {
    const c = await client(() => json(200, { items: [], next_cursor: null }));
    const page = await c.ok(c.api.GET('/api/v1/entities', { params: { query: { limit: 5, q: 'jelly' } } }));
    expect(page).toEqual({ items: [], next_cursor: null });
    expect(c.fetch).toHaveBeenCalledTimes(1);
    const req = c.fetch.mock.calls[0][0];
    expect(req.method).toBe('GET');
    expect(req.url).toBe(`${ORIGIN}/api/v1/entities?limit=5&q=jelly`);
    expect(req.credentials).toBe('same-origin');
  });

  it('turns a problem document into an ApiError naming the field at fault', async () => {
    const c = await client(() => json(422, problem, 'application/problem+json'));
    const err = await c.ok(c.api.GET('/api/v1/entities', { params: { query: { limit: 9999 } } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(c.ApiError);
    const e = err as InstanceType<typeof c.ApiError>;
    expect(e.status).toBe(422);
    expect(e.message).toBe('limit: must be between 1 and 500');
    expect(e.field).toBe('limit');
    expect(e.problem.errors).toEqual([{ field: 'limit', reason: 'must be between 1 and 500' }]);
    expect(c.message(e)).toBe('limit: must be between 1 and 500');
  });

  it('uses the title when the problem has no detail, and no field when none is named', async () => {
    const c = await client(() => json(404, { type: 'urn:oikos:problem:not-found', title: 'Not found', status: 404 }));
    const e = (await c.ok(c.api.GET('/api/v1/ontology/types')).catch((x: unknown) => x)) as InstanceType<typeof c.ApiError>;
    expect(e).toBeInstanceOf(c.ApiError);
    expect([e.status, e.message, e.field]).toEqual([404, 'Not found', undefined]);
  });

  it('handles an error body that is not JSON (a proxy page)', async () => {
    const c = await client(() => new Response('<html><body>502 Bad Gateway</body></html>', { status: 502, headers: { 'Content-Type': 'text/html' } }));
    const e = (await c.ok(c.api.GET('/api/v1/ontology/types')).catch((x: unknown) => x)) as InstanceType<typeof c.ApiError>;
    expect(e).toBeInstanceOf(c.ApiError);
    expect(e.status).toBe(502);
    expect(e.message).toBe('request failed (502)');
    expect(e.field).toBeUndefined();
    expect(e.problem).toEqual({});
  });

  it('handles an error with an empty body', async () => {
    const c = await client(() => new Response(null, { status: 503, headers: { 'Content-Length': '0' } }));
    const e = (await c.ok(c.api.GET('/api/v1/ontology/types')).catch((x: unknown) => x)) as InstanceType<typeof c.ApiError>;
    expect(e).toBeInstanceOf(c.ApiError);
    expect([e.status, e.message]).toEqual([503, 'request failed (503)']);
  });

  it('turns a network failure into an ApiError of status 0 a person can act on', async () => {
    const c = await client(() => Promise.reject(new TypeError('Failed to fetch')));
    const e = (await c.ok(c.api.GET('/api/v1/ontology/types')).catch((x: unknown) => x)) as InstanceType<typeof c.ApiError>;
    expect(e).toBeInstanceOf(c.ApiError);
    expect(e.status).toBe(0);
    expect(e.problem.title).toBe('The api cannot be reached');
    expect(e.message).toBe('The api cannot be reached (Failed to fetch). It may be restarting; this page retries when it is back.');
    expect(e.field).toBeUndefined();
  });

  it('ends the session on a 401 from any call but the session itself', async () => {
    const c = await client(() => json(401, { type: 'urn:oikos:problem:unauthenticated', title: 'Unauthenticated', status: 401, detail: 'session expired' }));
    c.session.status = 'signed-in';
    c.session.who = { role: 'operator' } as typeof c.session.who;
    const e = (await c.ok(c.api.GET('/api/v1/ontology/types')).catch((x: unknown) => x)) as InstanceType<typeof c.ApiError>;
    expect([e.status, e.message]).toEqual([401, 'session expired']);
    expect(c.session.status).toBe('signed-out');
    expect(c.session.who).toBeNull();
    expect(c.session.notice).toBe('Your session has ended; sign in again.');
  });

  it('leaves the session alone on a 401 from the session endpoint (a wrong token at sign-in)', async () => {
    const c = await client(() => json(401, { title: 'Unauthenticated', status: 401 }));
    c.session.status = 'signed-in';
    await c.ok(c.api.GET('/api/v1/session')).catch(() => undefined);
    expect(c.session.status).toBe('signed-in');
  });
});

describe('message', () => {
  it('reads any failure', async () => {
    const { ApiError, message } = await import('./client');
    expect(message(new ApiError(409, { title: 'Conflict', detail: 'the slug is taken' }))).toBe('the slug is taken');
    expect(message(new ApiError(500, {}))).toBe('request failed (500)');
    expect(message(new Error('boom'))).toBe('boom');
    expect(message('plain')).toBe('plain');
    expect(message(42)).toBe('42');
  });
});
