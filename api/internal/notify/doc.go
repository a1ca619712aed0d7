// Package notify is the core of the api's notification subsystem (N1): operators subscribe
// channels by URL in the shoutrrr convention homelab users know from Watchtower (ntfy,
// Gotify, Discord, Slack, Matrix, Telegram, Pushover, SMTP, generic webhooks), or as a plain
// JSON webhook signed with HMAC-SHA256, and rules choose which notifications go to which
// channel.
//
// The subsystem is split by job, imports pointing down this list:
//
//   - api/internal/notifyapi: the HTTP surface (Routes).
//   - api/internal/notifyworker: the Dispatcher reads the events outbox after a persisted
//     cursor and, in one transaction per batch, inserts a delivery per matching channel (the
//     idempotency key "<event id>:<channel id>" makes a re-read add nothing) and advances
//     the cursor, so a restart loses nothing and duplicates nothing; the Worker claims due
//     deliveries (FOR UPDATE SKIP LOCKED, one per channel at a time), sends them
//     concurrently, records every attempt, retries with back-off, defers a delivery that
//     falls in its channel's quiet hours, suppresses an incident's notification while the
//     incident is muted, and reports a channel whose last attempt failed as a
//     notification_channel_failing signal (resolved by its next success). One channel's slow
//     or dead endpoint never holds up another's.
//   - api/internal/notifyrender: what an outbox event means as a notification (its kind,
//     severity, title, body and link).
//   - this package: the kinds and severities, the rules that match a notification
//     (rules.go), quiet hours, the references a channel's URL and secret are stored by, and
//     the Service that checks and keeps channels and rules, each mutation audited with its
//     event.
//   - api/internal/notifytarget: the two channel kinds' senders, the check of a URL, and
//     the redaction of URLs and secrets.
//   - api/internal/storage/notifystore: all of the subsystem's SQL.
//
// URLs and signing secrets are stored by reference (E5): env:NAME, file:/path, or
// stored:<id> for a value sent inline, kept in a table no endpoint returns. Nothing the
// subsystem logs, stores in a channel, audit row or event, or answers carries a URL's
// userinfo, path or query.
package notify
