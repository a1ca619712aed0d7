package notifytarget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nicholas-fedor/shoutrrr/pkg/format"
	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/safego"
)

// Channel kinds.
const (
	ChannelShoutrrr = "shoutrrr"
	ChannelWebhook  = "webhook"
)

// ChannelKinds lists them.
var ChannelKinds = []string{ChannelShoutrrr, ChannelWebhook}

// severityCritical is notify.SeverityCritical (the severity vocabulary is shared/signals'),
// the one an ntfy message goes out at high priority for.
const severityCritical = "critical"

// SendTimeout bounds one attempt.
const SendTimeout = 10 * time.Second

// Target is a channel resolved for one send: its kind, its URL and (a webhook's) signing
// secret, in the clear. It lives only as long as the send.
type Target struct {
	Kind   string
	URL    string
	Secret string
}

// EventRef names the event a message is about.
type EventRef struct {
	ID       int64     `json:"id"`
	Type     string    `json:"type"`
	At       time.Time `json:"at"`
	EntityID string    `json:"entity_id,omitempty"`
}

// Message is one notification as a channel receives it.
type Message struct {
	// ID is the delivery's idempotency key ("<event id>:<channel id>"): a receiver that sees
	// it twice (delivery is at least once) drops the repeat.
	ID       string
	Kind     string
	Severity string
	Title    string
	Body     string
	Link     string
	Event    EventRef
	Payload  json.RawMessage
}

// Sender delivers a message to a target. statusCode is the HTTP status the endpoint
// answered when the sender knows it (a webhook), else 0. The error may quote the target's
// URL: the caller redacts it.
type Sender interface {
	Send(ctx context.Context, t Target, m Message) (statusCode int, err error)
}

// Transport is the Sender of both channel kinds.
type Transport struct {
	// HTTP is the webhook client (and the one handed to shoutrrr services that accept one);
	// nil: a client with SendTimeout that follows no redirect.
	HTTP *http.Client
	// Timeout bounds one attempt (default SendTimeout).
	Timeout time.Duration
	// Now stamps webhook signatures (time.Now when nil).
	Now    func() time.Time
	Logger zerolog.Logger
}

func (t *Transport) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return SendTimeout
}

func (t *Transport) client() *http.Client {
	if t.HTTP != nil {
		return t.HTTP
	}
	return defaultClient
}

// defaultClient never follows a redirect: a webhook that answers 3xx has moved, and a POST
// silently turned into a GET elsewhere is not a delivery.
var defaultClient = &http.Client{
	Timeout:       SendTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// serviceClient is what a shoutrrr service that takes a client gets: bounded like the
// webhook's, but following redirects as the service's own client would.
var serviceClient = &http.Client{Timeout: SendTimeout}

// Send implements Sender.
func (t *Transport) Send(ctx context.Context, target Target, m Message) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()
	switch target.Kind {
	case ChannelWebhook:
		return t.sendWebhook(ctx, target, m)
	case ChannelShoutrrr:
		return 0, t.sendShoutrrr(ctx, target.URL, m)
	}
	return 0, fmt.Errorf("unknown channel kind %q", target.Kind)
}

// sendShoutrrr sends through the shoutrrr fork. Its services take no context and some use
// http.DefaultClient without a timeout, so the send runs on a goroutine of its own that the
// attempt stops waiting for at the deadline; the goroutine ends when the service's own
// request does. A panic in a service is recovered and is a failed attempt.
func (t *Transport) sendShoutrrr(ctx context.Context, raw string, m Message) error {
	done := make(chan error, 1)
	safego.Go(t.Logger, "notify-shoutrrr-send", func() {
		done <- safego.Call(func() error { return t.shoutrrrOnce(raw, m) })
	})
	select {
	case err := <-done:
		if err != nil && strings.HasPrefix(err.Error(), "panic: ") {
			// The stack is for the log; the attempt records one line.
			t.Logger.Error().Str("panic", Redact(err.Error(), raw)).Msg("a shoutrrr service panicked while sending")
			return errors.New("the service failed: " + firstLine(err.Error()))
		}
		return err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", t.timeout())
		}
		return ctx.Err()
	}
}

func (t *Transport) shoutrrrOnce(raw string, m Message) error {
	// A service is built per send: services keep the parameters of a send in their config,
	// and a channel's URL is resolved anew each time (a rotated env or file is picked up).
	var r router.ServiceRouter
	svc, err := r.Locate(raw)
	if err != nil {
		return err
	}
	keys := configKeys(svc)
	params := types.Params{}
	body := m.Body
	q := queryOf(raw)
	// A generic webhook without a template posts the message alone, title or not.
	titled := keys["title"] && (svc.GetID() != "generic" || q.Get("template") != "")
	if titled {
		params.SetTitle(m.Title)
	} else if m.Title != "" {
		body = m.Title + "\n\n" + body
	}
	if keys["click"] && m.Link != "" && !q.Has("click") {
		params["click"] = m.Link
	}
	if strings.HasPrefix(strings.ToLower(raw), "ntfy:") && m.Severity == severityCritical && !q.Has("priority") {
		params["priority"] = "high"
	}
	// A service that accepts a client gets ours (bounded, connections reused) unless its URL
	// asks for unverified TLS, which only its own client does.
	if hc, ok := svc.(interface{ SetHTTPClient(*http.Client) }); ok && !truthy(q.Get("disabletlsverification")) {
		c := serviceClient
		if t.HTTP != nil {
			c = t.HTTP
		}
		hc.SetHTTPClient(c)
	}
	return svc.Send(body, &params)
}

// configKeys lists the query keys of a service's configuration (lower case).
func configKeys(svc types.Service) (keys map[string]bool) {
	keys = map[string]bool{}
	// format.GetServiceConfig panics on a service without a Config; such a service simply
	// has no keys we use.
	_ = safego.Call(func() error {
		pkr := format.NewPropKeyResolver(format.GetServiceConfig(svc))
		for _, k := range pkr.QueryFields() {
			keys[strings.ToLower(k)] = true
		}
		return nil
	})
	return keys
}

func queryOf(raw string) url.Values {
	u, err := url.Parse(raw)
	if err != nil {
		return url.Values{}
	}
	q := url.Values{}
	for k, v := range u.Query() {
		q[strings.ToLower(k)] = v
	}
	return q
}

func truthy(s string) bool {
	switch strings.ToLower(s) {
	case "yes", "true", "1", "on":
		return true
	}
	return false
}

// Services lists the shoutrrr services a URL may name.
func Services() []string {
	var r router.ServiceRouter
	s := r.ListServices()
	slices.Sort(s)
	return s
}

// ValidateURL checks a channel's URL without sending anything or dialling anywhere (a
// Matrix service logs in when it is built, so it is not built here): a webhook needs an
// http(s) URL with a host; a shoutrrr URL must name a known service and parse as that
// service's configuration. The error never quotes the URL's secret parts.
func ValidateURL(kind, raw string) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return errors.New("is empty")
	}
	switch kind {
	case ChannelWebhook:
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("a webhook needs an http:// or https:// URL with a host")
		}
		return nil
	case ChannelShoutrrr:
		return validateShoutrrr(raw)
	}
	return fmt.Errorf("unknown channel kind %q", kind)
}

func validateShoutrrr(raw string) error {
	var r router.ServiceRouter
	scheme, u, err := r.ExtractServiceName(raw)
	if err != nil || scheme == "" {
		return errors.New("is not a URL (a shoutrrr URL looks like ntfy://ntfy.sh/topic)")
	}
	svc, err := r.NewService(scheme)
	if err != nil {
		return fmt.Errorf("%q is not a shoutrrr service (one of %s)", scheme, strings.Join(Services(), ", "))
	}
	err = safego.Call(func() error {
		if u.Scheme != scheme {
			cs, ok := svc.(types.CustomURLService)
			if !ok {
				return fmt.Errorf("the %s service takes no custom URL (%s+…)", scheme, scheme)
			}
			if u, err = cs.GetConfigURLFromCustom(u); err != nil {
				return err
			}
		}
		return format.GetServiceConfig(svc).SetURL(u)
	})
	if err != nil {
		return fmt.Errorf("is not a valid %s URL: %s", scheme, Redact(firstLine(err.Error()), raw))
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
