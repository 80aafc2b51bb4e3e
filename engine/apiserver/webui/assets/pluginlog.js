// pluginlog.js: follows a Plugin's log subresource
// (GET /apis/setpoint.dev/v1alpha1/plugins/NAME/log?follow=true), plain text
// lines, over fetch: browsers stream a response body, and fetch carries the
// bearer token in a header. It reconnects after a dropped stream, asking for
// the lines since the last one it saw.

const LOG_BASE = '/apis/setpoint.dev/v1alpha1/plugins/';

/**
 * followLog calls onLines with each batch of lines of the plugin's log, the
 * last tailLines first, until stop() is called. object ("Kind/name" or
 * "Kind/namespace/name") keeps the lines about one object. onState gets
 * 'live', 'reconnecting' or an error message.
 */
export function followLog(client, name, { tailLines = 200, object = '', onLines, onState = () => {} }) {
  const ctl = new AbortController();
  let since = '';
  let last = '';
  let delay = 500;
  (async () => {
    while (!ctl.signal.aborted) {
      const query = { follow: 'true', object };
      if (since) query.sinceTime = since; else query.tailLines = tailLines;
      try {
        const headers = { Accept: 'text/plain' };
        if (client.token) headers.Authorization = 'Bearer ' + client.token;
        const resp = await fetch(client.url(LOG_BASE + encodeURIComponent(name) + '/log', query), { headers, signal: ctl.signal, cache: 'no-store' });
        if (!resp.ok) {
          let msg = `${resp.status}`;
          try { msg = (await resp.json()).message || msg; } catch { /* not a Status */ }
          onState(msg);
          if (resp.status === 404 || resp.status === 401 || resp.status === 403) return;
        } else {
          onState('live');
          delay = 500;
          const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
          let rest = '';
          let resumed = !!since;
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            const parts = (rest + value).split('\n');
            rest = parts.pop();
            // sinceTime keeps the lines at or after it: the first line
            // after a reconnect may be the last one already shown.
            if (resumed && parts.length && parts[0] === last) parts.shift();
            if (parts.length) resumed = false;
            if (parts.length) {
              // Resume after the last line: its first field is its time
              // (RFC 3339 with nanoseconds).
              last = parts[parts.length - 1];
              since = last.split(' ', 1)[0];
              onLines(parts);
            }
          }
        }
      } catch (err) {
        if (ctl.signal.aborted) return;
      }
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  })();
  return { stop: () => ctl.abort() };
}
