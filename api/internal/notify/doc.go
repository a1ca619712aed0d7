// Package notify is the api's notification subsystem (N1): operators subscribe channels by
// URL in the shoutrrr convention homelab users know from Watchtower (ntfy, Gotify, Discord,
// Slack, Matrix, Telegram, Pushover, SMTP, generic webhooks), or as a plain JSON webhook
// signed with HMAC-SHA256, and rules choose which notifications go to which channel.
//
// The parts, one file each:
//
//   - kinds.go, render.go: what an outbox event means as a notification (its kind, severity,
//     title, body and link), and the rules that match it (rules.go).
//   - dispatch.go: the Dispatcher reads the events outbox after a persisted cursor and, in
//     one transaction per batch, inserts a delivery per matching channel (the idempotency key
//     "<event id>:<channel id>" makes a re-read add nothing) and advances the cursor. A restart
//     loses nothing and duplicates nothing.
//   - worker.go: the Worker claims due deliveries (FOR UPDATE SKIP LOCKED, one per channel at
//     a time), sends them concurrently, records every attempt, retries with back-off, defers a
//     delivery that falls in its channel's quiet hours, suppresses an incident's notification
//     while the incident is muted, and reports a channel whose last attempt failed as a
//     notification_channel_failing signal (resolved by its next success). One channel's slow
//     or dead endpoint never holds up another's.
//   - send.go, webhook.go: the two channel kinds' senders.
//   - secret.go, redact.go: URLs and signing secrets are stored by reference (E5): env:NAME,
//     file:/path, or stored:<id> for a value sent inline, kept in a table no endpoint returns.
//     Nothing this package logs, stores in a channel, audit row or event, or answers carries
//     a URL's userinfo, path or query.
//   - store.go: channels and rules, each mutation audited with its event.
//   - http.go: the HTTP surface (Routes).
package notify
