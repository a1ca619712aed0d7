package notifytarget

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Webhook headers.
const (
	HeaderEvent     = "X-Oikos-Event"
	HeaderDelivery  = "X-Oikos-Delivery"
	HeaderTimestamp = "X-Oikos-Timestamp"
	HeaderSignature = "X-Oikos-Signature"
	// HeaderIdempotencyKey carries the delivery's key too, under the name receivers and
	// proxies commonly dedupe by: an attempt that timed out after the receiver got it is
	// retried with the same key, so the receiver can drop the repeat.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// WebhookBody is the JSON a webhook channel receives.
type WebhookBody struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind"`
	Severity string          `json:"severity"`
	Title    string          `json:"title"`
	Body     string          `json:"body"`
	Link     string          `json:"link"`
	Event    EventRef        `json:"event"`
	Payload  json.RawMessage `json:"payload"`
}

// Sign is the signature of a webhook body: "sha256=" and the hex HMAC-SHA256, keyed with
// the channel's secret, of "<timestamp>.<raw body>". Signing the timestamp with the body
// lets a receiver refuse a replayed request by its age.
func Sign(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature is Sign's for the timestamp and body, in constant time:
// what a receiver written in Go checks.
func Verify(secret []byte, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}

func (t *Transport) sendWebhook(ctx context.Context, target Target, m Message) (int, error) {
	payload := m.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	body, err := json.Marshal(WebhookBody{ID: m.ID, Kind: m.Kind, Severity: m.Severity, Title: m.Title, Body: m.Body,
		Link: m.Link, Event: m.Event, Payload: payload})
	if err != nil {
		return 0, fmt.Errorf("marshal webhook body: %w", err)
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oikos-notify")
	req.Header.Set(HeaderEvent, m.Kind)
	req.Header.Set(HeaderDelivery, m.ID)
	req.Header.Set(HeaderIdempotencyKey, m.ID)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign([]byte(target.Secret), ts, body))
	resp, err := t.client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read a little of the answer so the connection can be reused; its content is not kept
	// (a receiver's error page may echo what it was sent).
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
