package app

import (
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/chatapi"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/websession"
	"github.com/oikos-hq/oikos/shared/config"
	"github.com/oikos-hq/oikos/shared/duration"
)

// Config is the api's configuration, read from OIKOS_* variables (README table).
type Config struct {
	DatabaseURL string // OIKOS_DATABASE_URL
	Addr        string // OIKOS_API_ADDR
	SeedOnStart bool   // OIKOS_SEED_ON_START: ingest the ontology and the knowledge base at start (idempotent)
	// Demo is OIKOS_DEMO: seed the demo fleet (the lab simulator's inventory) too. Off by
	// default, so a real install starts with an empty fleet instead of machines it lacks.
	Demo bool
	// InventoryFile is OIKOS_INVENTORY: an inventory file (the format `oikos export`
	// writes) to seed at every start, for a fleet kept in git. Exclusive with Demo.
	InventoryFile string
	OperatorToken string // OIKOS_OPERATOR_TOKEN: make sure this operator token exists
	PolicyFile    string // OIKOS_POLICY_FILE: operator extensions of the command policy
	// AgentToken is OIKOS_AGENT_TOKEN, the token the agent calls the api with: when set, the
	// api makes sure it exists as the agent token auth.AgentTokenName ("nomos"), so compose
	// and `make up` give the api and the agent one value and nothing else to do.
	AgentToken string
	// AgentURL is OIKOS_AGENT_URL, where the api reaches the agent to forward chat turns and
	// session reads (default http://127.0.0.1:8092).
	AgentURL string
	// SessionTTL is OIKOS_SESSION_TTL, how long a dashboard sign-in lasts (default 12h).
	SessionTTL time.Duration
	// PublicURL is OIKOS_PUBLIC_URL, where people reach the dashboard: the links in
	// notifications point there (default http://127.0.0.1:8080).
	PublicURL string
	// NotifyEnabled is OIKOS_NOTIFY_ENABLED: deliver notifications (default true). Off, the
	// channels and rules can still be managed; nothing is read from the outbox or sent.
	NotifyEnabled bool
	// NotifyRetry is OIKOS_NOTIFY_RETRY, an explicit schedule of waits between a delivery's
	// attempts, comma-separated (len+1 attempts); unset (the default), NotifyBackoff decides.
	NotifyRetry []time.Duration
	// NotifyBackoff is OIKOS_NOTIFY_BACKOFF_INITIAL (5s), OIKOS_NOTIFY_BACKOFF_MAX (5m) and
	// OIKOS_NOTIFY_GIVE_UP_AFTER (24h): the capped exponential back-off (with ±20% jitter).
	NotifyBackoff notifyworker.Backoff
	// NotifyFailingAfter is OIKOS_NOTIFY_FAILING_AFTER, the consecutive failed attempts that
	// make a channel failing (default 5).
	NotifyFailingAfter int
	// NotifyTimeout is OIKOS_NOTIFY_TIMEOUT, the bound of one attempt (default 10s).
	NotifyTimeout time.Duration
	// TrustedProxies is OIKOS_TRUSTED_PROXIES: the reverse proxies in front of the api whose
	// X-Forwarded-For and X-Forwarded-Host it believes (request.Site). None by default: the
	// client is the connection's peer.
	TrustedProxies []netip.Prefix
	// SignInAttempts per SignInPeriod is OIKOS_SIGNIN_RATE (N/DURATION), the dashboard
	// sign-in attempts allowed per client address: a burst of N, refilled evenly over the
	// period (default websession.DefaultSignInRate, 10/1m; zero values mean it too).
	SignInAttempts int
	SignInPeriod   time.Duration
}

// DefaultPublicURL is OIKOS_PUBLIC_URL's default.
const DefaultPublicURL = "http://127.0.0.1:8080"

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		DatabaseURL:   r.String("OIKOS_DATABASE_URL", ""),
		Addr:          r.String("OIKOS_API_ADDR", ":8080"),
		SeedOnStart:   r.Bool("OIKOS_SEED_ON_START", true),
		Demo:          r.Bool("OIKOS_DEMO", false),
		InventoryFile: r.String("OIKOS_INVENTORY", ""),
		OperatorToken: r.String("OIKOS_OPERATOR_TOKEN", ""),
		AgentToken:    r.String("OIKOS_AGENT_TOKEN", ""),
		PolicyFile:    r.String("OIKOS_POLICY_FILE", ""),
		AgentURL:      r.String("OIKOS_AGENT_URL", chatapi.DefaultAgentURL),
		SessionTTL:    r.Duration("OIKOS_SESSION_TTL", websession.DefaultTTL),
		PublicURL:     strings.TrimRight(r.String("OIKOS_PUBLIC_URL", DefaultPublicURL), "/"),
		NotifyEnabled: r.Bool("OIKOS_NOTIFY_ENABLED", true),
		NotifyBackoff: notifyworker.Backoff{
			Initial:     r.Duration("OIKOS_NOTIFY_BACKOFF_INITIAL", notifyworker.DefaultBackoff.Initial),
			Max:         r.Duration("OIKOS_NOTIFY_BACKOFF_MAX", notifyworker.DefaultBackoff.Max),
			Jitter:      notifyworker.DefaultBackoff.Jitter,
			GiveUpAfter: r.Duration("OIKOS_NOTIFY_GIVE_UP_AFTER", notifyworker.DefaultBackoff.GiveUpAfter),
		},
		NotifyFailingAfter: r.Int("OIKOS_NOTIFY_FAILING_AFTER", notifyworker.DefaultFailingAfter),
		NotifyTimeout:      r.Duration("OIKOS_NOTIFY_TIMEOUT", notifytarget.SendTimeout),
		// The default said in the README's table, so a Config read from the environment
		// shows the limit in force.
		SignInAttempts: websession.DefaultSignInRate.N,
		SignInPeriod:   websession.DefaultSignInRate.Per,
	}
	if v := r.String("OIKOS_NOTIFY_RETRY", ""); v != "" {
		c.NotifyRetry = nil
		for _, part := range strings.Split(v, ",") {
			d, err := duration.Parse(part)
			if err != nil {
				r.Fail("OIKOS_NOTIFY_RETRY: %v (a comma-separated list such as 10s,1m,5m)", err)
				break
			}
			c.NotifyRetry = append(c.NotifyRetry, d)
		}
	}
	if b := c.NotifyBackoff; b.Initial <= 0 || b.Max < b.Initial || b.GiveUpAfter <= 0 {
		r.Fail("OIKOS_NOTIFY_BACKOFF_INITIAL, OIKOS_NOTIFY_BACKOFF_MAX, OIKOS_NOTIFY_GIVE_UP_AFTER: want 0 < initial <= max and a positive give-up age, got %s, %s, %s",
			b.Initial, b.Max, b.GiveUpAfter)
	}
	if c.NotifyFailingAfter < 1 {
		r.Fail("OIKOS_NOTIFY_FAILING_AFTER: %d is not a positive count of attempts", c.NotifyFailingAfter)
	}
	if c.NotifyTimeout <= 0 {
		r.Fail("OIKOS_NOTIFY_TIMEOUT: %s is not a positive duration", c.NotifyTimeout)
	}
	if v := r.String("OIKOS_TRUSTED_PROXIES", ""); v != "" {
		p, err := request.ParseProxies(v)
		if err != nil {
			r.Fail("OIKOS_TRUSTED_PROXIES: %v (addresses or CIDR prefixes, comma-separated)", err)
		}
		c.TrustedProxies = p
	}
	if v := r.String("OIKOS_SIGNIN_RATE", ""); v != "" {
		rate, err := ratelimit.ParseRate(v)
		if err != nil {
			r.Fail("OIKOS_SIGNIN_RATE: %v", err)
		}
		c.SignInAttempts, c.SignInPeriod = rate.N, rate.Per
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Fail("OIKOS_PUBLIC_URL: %q is not an http(s):// URL of the dashboard", c.PublicURL)
	}
	if c.SessionTTL < time.Minute {
		r.Fail("OIKOS_SESSION_TTL: %s is too short for a sign-in (at least 1m)", c.SessionTTL)
	}
	if u, err := url.Parse(c.AgentURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Fail("OIKOS_AGENT_URL: %q is not an http(s)://host:port URL", c.AgentURL)
	}
	if c.Demo && c.InventoryFile != "" {
		r.Fail("OIKOS_DEMO and OIKOS_INVENTORY: set one of them (the demo fleet or your own inventory), not both")
	}
	if (c.Demo || c.InventoryFile != "") && !c.SeedOnStart {
		r.Fail("OIKOS_SEED_ON_START=false: OIKOS_DEMO and OIKOS_INVENTORY are seeded at start; unset them or seed on start")
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	if c.AgentToken != "" {
		if err := auth.CheckIssued(c.AgentToken); err != nil {
			r.Fail("OIKOS_AGENT_TOKEN: %v", err)
		} else if c.AgentToken == c.OperatorToken {
			r.Fail("OIKOS_AGENT_TOKEN: must differ from OIKOS_OPERATOR_TOKEN (the agent may never hold an operator's token)")
		}
	}
	return c, r.Err()
}
