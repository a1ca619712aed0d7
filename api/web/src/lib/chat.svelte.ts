// The chat turns this tab is streaming, kept outside the page so a turn survives the page
// being re-created: sending the first message of a new chat navigates from /chat to
// /chat/<id> (the shell re-creates the page on a route change), and an operator may look at
// Operations while the agent works. POST /api/v1/chat answers with the turn as server-sent
// events, read with fetch + ReadableStream (EventSource cannot POST) and parsed by sse.ts.
//
// The store also holds each session's plan and task as the turn changes them (plan, task
// events; update_plan_step results move a step), seeded from GET /sessions/{id}.
import { api, ApiError, message, type Schemas } from './api/client';
import { stream, type StreamEvent } from './stream.svelte';
import { readSSE, parseData } from './sse';

export type Plan = Schemas['SessionPlan'];
export type Task = Schemas['SessionTask'];

export type ToolState = 'running' | 'ok' | 'error';

/** ToolView is one tool call of a turn, streamed or stored. */
export interface ToolView {
  id: string;
  name: string;
  args: unknown;
  result?: string;
  isError?: boolean;
  /** render is the result's renderer hint, if the event carries one (not yet: see ChatResult). */
  render?: string;
  state: ToolState;
  /** The execution a run/request_execution call started, once known. */
  executionId?: string;
  executionStatus?: string;
}

/** ApprovalPreview is what an approval_required event says, shown before the card loads. */
export interface ApprovalPreview {
  approval_id: string;
  execution_id: string;
  risk_class: Schemas['RiskClass'];
  target: string;
  command: string;
}

/** Part is a piece of a turn, in the order it streamed. */
export type Part =
  | { kind: 'text'; text: string }
  | { kind: 'tools'; ids: string[] }
  | { kind: 'approval'; approval: ApprovalPreview };

export interface Turn {
  key: number;
  /** sessionId is '' until the turn's `session` event names a new session. */
  sessionId: string;
  message: string;
  messageId: string;
  parts: Part[];
  tools: Record<string, ToolView>;
  error: string;
  running: boolean;
  finish: string;
  /** baseCount is how many stored messages the session had before this turn. */
  baseCount: number;
}

const EXEC_TOOLS = new Set(['run', 'request_execution']);
const LIVE = new Set(['approved', 'running']);

/** resultJSON is a tool result's JSON object, or null. */
export function resultJSON(s: string | undefined): Record<string, unknown> | null {
  if (!s) return null;
  const t = s.trimStart();
  if (!t.startsWith('{')) return null;
  try {
    const v = JSON.parse(t) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

class ChatStore {
  turns = $state<Turn[]>([]);
  plans = $state<Record<string, Plan>>({});
  tasks = $state<Record<string, Task>>({});
  private next = 1;

  /** running is whether a turn of session id (or of a new chat, for '') is streaming. */
  running(id: string): boolean {
    return this.turns.some((t) => t.running && t.sessionId === id);
  }

  turnsOf(id: string): Turn[] {
    return this.turns.filter((t) => t.sessionId === id);
  }

  /**
   * open is called when a page loads session id from the api: turns that finished are in
   * that record now, so they are dropped; a running one stays (the record has only part of
   * it). The stored plan and task seed the session's unless a running turn knows better.
   */
  open(id: string, plan: Plan, task: Task): void {
    this.turns = this.turns.filter((t) => t.running || (t.sessionId !== id && t.sessionId !== ''));
    if (!this.running(id)) {
      this.plans[id] = plan;
      this.tasks[id] = task;
    }
  }

  /**
   * send posts a message and streams the turn. onSession hears the session id as soon as
   * the first event names it (a new chat navigates to it).
   */
  async send(sessionId: string, text: string, baseCount: number, onSession?: (id: string, isNew: boolean) => void): Promise<void> {
    this.turns.push({
      key: this.next++,
      sessionId,
      message: text,
      messageId: '',
      parts: [],
      tools: {},
      error: '',
      running: true,
      finish: '',
      baseCount,
    });
    // The proxied turn: mutations through it are seen by the page.
    const t = this.turns[this.turns.length - 1];
    const off = stream.on(['execution.'], (e) => this.onExecution(t, e));
    let done = false;
    try {
      const r = await api.POST('/api/v1/chat', {
        body: sessionId ? { session_id: sessionId, message: text } : { message: text },
        parseAs: 'stream',
      });
      if (!r.response.ok || !r.data) {
        throw new ApiError(r.response.status, (r.error ?? {}) as Partial<Schemas['Problem']>);
      }
      for await (const f of readSSE(r.data as ReadableStream<Uint8Array>)) {
        const d = parseData<Record<string, unknown>>(f) ?? {};
        switch (f.event) {
          case 'session': {
            const id = String(d.session_id ?? '');
            const isNew = !t.sessionId;
            t.sessionId = id;
            t.messageId = String(d.message_id ?? '');
            onSession?.(id, isNew);
            break;
          }
          case 'delta':
            this.text(t, String(d.text ?? ''));
            break;
          case 'tool_use':
            this.toolUse(t, d);
            break;
          case 'tool_result':
            this.toolResult(t, d);
            break;
          case 'approval_required':
            t.parts.push({ kind: 'approval', approval: d as unknown as ApprovalPreview });
            break;
          case 'plan':
            if (t.sessionId) this.plans[t.sessionId] = d as unknown as Plan;
            break;
          case 'task':
            if (t.sessionId) this.tasks[t.sessionId] = { ...(this.tasks[t.sessionId] ?? {}), ...(d as unknown as Task) };
            break;
          case 'error':
            t.error = t.error ? `${t.error}\n${String(d.message ?? '')}` : String(d.message ?? 'The turn failed.');
            break;
          case 'done':
            t.finish = String(d.finish_reason ?? '');
            done = true;
            break;
        }
      }
      if (!done && !t.error) t.error = 'The answer broke off before the agent finished. Reload the session to see what it stored.';
    } catch (e) {
      t.error = message(e);
    } finally {
      // Whatever happened, nothing is left spinning: the turn and its tool calls stop.
      t.running = false;
      for (const v of Object.values(t.tools)) if (v.state === 'running') v.state = t.error ? 'error' : 'ok';
      off();
    }
  }

  private text(t: Turn, s: string) {
    if (!s) return;
    const last = t.parts[t.parts.length - 1];
    if (last && last.kind === 'text') last.text += s;
    else t.parts.push({ kind: 'text', text: s });
  }

  private toolUse(t: Turn, d: Record<string, unknown>) {
    const id = String(d.id ?? `tool-${Object.keys(t.tools).length}`);
    t.tools[id] = { id, name: String(d.name ?? 'tool'), args: d.arguments ?? {}, state: 'running' };
    const last = t.parts[t.parts.length - 1];
    if (last && last.kind === 'tools') last.ids.push(id);
    else t.parts.push({ kind: 'tools', ids: [id] });
  }

  private toolResult(t: Turn, d: Record<string, unknown>) {
    const id = String(d.id ?? '');
    const v = t.tools[id];
    if (!v) return;
    v.result = typeof d.content === 'string' ? d.content : JSON.stringify(d.content);
    v.isError = d.is_error === true;
    if (typeof d.render === 'string') v.render = d.render;
    v.state = v.isError ? 'error' : 'ok';
    const j = resultJSON(v.result);
    if (EXEC_TOOLS.has(v.name) && j) {
      const eid = (j.execution_id ?? j.id) as string | undefined;
      if (eid) v.executionId = eid;
      if (typeof j.status === 'string') v.executionStatus = j.status;
    }
    // update_plan_step moves a step; the agent sends no plan event for it.
    if (v.name === 'update_plan_step' && !v.isError && j && t.sessionId) {
      const plan = this.plans[t.sessionId];
      const step = plan?.steps.find((s) => s.index === Number(j.step));
      if (step && typeof j.status === 'string') step.status = j.status as typeof step.status;
    }
  }

  // The execution a running run call started arrives on the tab's stream (correlated by
  // the session) long before the call answers: attach it, so its output shows live.
  private onExecution(t: Turn, e: StreamEvent) {
    if (!t.sessionId || e.correlation_id !== t.sessionId) return;
    const p = (e.payload ?? {}) as Record<string, unknown>;
    const eid = typeof p.execution_id === 'string' ? p.execution_id : '';
    const status = typeof p.status === 'string' ? p.status : '';
    if (!eid || !status) return;
    const calls = Object.values(t.tools).filter((v) => EXEC_TOOLS.has(v.name));
    const known = calls.find((v) => v.executionId === eid);
    if (known) {
      known.executionStatus = status;
      return;
    }
    if (!LIVE.has(status) && e.type !== 'execution.requested') return;
    const target = typeof p.target === 'string' ? p.target : '';
    const waiting = calls.filter((v) => v.state === 'running' && !v.executionId);
    const match =
      waiting.find((v) => (v.args as Record<string, unknown> | null)?.target === target) ?? (waiting.length === 1 ? waiting[0] : undefined);
    if (match) {
      match.executionId = eid;
      match.executionStatus = status;
    }
  }
}

export const chat = new ChatStore();
