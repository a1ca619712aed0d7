// A small server-sent-events frame parser over a fetch body. EventSource cannot POST (the
// chat turn) and cannot be told to stop reconnecting on a closed stream (an execution's log
// ends with `event: end`), so those two streams are read with fetch + ReadableStream and
// parsed here, by the text/event-stream rules: lines end in \n, \r\n or \r; `field: value`
// (one optional space after the colon); a line starting with ":" is a comment (the api's
// heartbeats and pings); a blank line dispatches the frame.

/** SSEFrame is one dispatched event: its name ("message" without an event: line), data, id. */
export interface SSEFrame {
  event: string;
  data: string;
  /** id is the frame's `id:` value, or '' when it had none. */
  id: string;
}

/**
 * readSSE yields the frames of body as they arrive and returns when the body ends. It does
 * not swallow errors: an aborted or broken read throws, so the caller can tell "the server
 * closed the stream" (return) from "the connection broke" (throw).
 */
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEFrame> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let event = '';
  let data: string[] = [];
  let id = '';
  let hasData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      // Split off whole lines; keep a trailing partial line (and a lone \r that may be the
      // first half of \r\n) in buf for the next read.
      let start = 0;
      for (let i = 0; i < buf.length; i++) {
        const c = buf[i];
        if (c !== '\n' && c !== '\r') continue;
        if (c === '\r' && i === buf.length - 1) break;
        const line = buf.slice(start, i);
        if (c === '\r' && buf[i + 1] === '\n') i++;
        start = i + 1;
        if (line === '') {
          if (hasData) yield { event: event || 'message', data: data.join('\n'), id };
          event = '';
          data = [];
          hasData = false;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') event = val;
        else if (field === 'data') {
          data.push(val);
          hasData = true;
        } else if (field === 'id' && !val.includes('\0')) id = val;
      }
      buf = buf.slice(start);
    }
  } finally {
    reader.releaseLock();
  }
}

/** parseData is a frame's JSON data, or null when it is not JSON. */
export function parseData<T>(f: SSEFrame): T | null {
  try {
    return JSON.parse(f.data) as T;
  } catch {
    return null;
  }
}
