// Package notifyrender says what an outbox event means as a notification: its kind and
// severity, and the plain-text title, body and link every channel shows (FromEvent), and
// the message of a channel test. It reads no database and sends nothing.
package notifyrender
