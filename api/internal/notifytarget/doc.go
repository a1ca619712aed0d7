// Package notifytarget holds the delivery targets of notifications: the senders of the two
// channel kinds (a shoutrrr URL, in the convention homelab users know from Watchtower: ntfy,
// Gotify, Discord, Slack, Matrix, Telegram, Pushover, SMTP, generic webhooks; and a plain
// JSON webhook signed with HMAC-SHA256), the check of a channel's URL against its kind, and
// the redaction that keeps a URL's secret parts out of every log line, row and answer. It
// knows nothing of events, rules or the database.
package notifytarget
