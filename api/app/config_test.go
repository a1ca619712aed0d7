package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/app"
)

// OIKOS_AGENT_URL is where the api forwards chat turns and session reads: the agent's
// loopback address by default, and an http(s) URL when set.
func TestLoadConfigAgentURL(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x"}))
	if err != nil || c.AgentURL != "http://127.0.0.1:8092" {
		t.Fatalf("default: %+v, %v", c, err)
	}
	c, err = app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", "OIKOS_AGENT_URL": "http://agent:8092"}))
	if err != nil || c.AgentURL != "http://agent:8092" {
		t.Fatalf("set: %+v, %v", c, err)
	}
	for _, bad := range []string{"agent:8092", "ftp://agent", "http://", "::"} {
		_, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", "OIKOS_AGENT_URL": bad}))
		if err == nil || !strings.Contains(err.Error(), "OIKOS_AGENT_URL") {
			t.Errorf("%q: want an error naming OIKOS_AGENT_URL, got %v", bad, err)
		}
	}
}

// No fleet by default; the demo or an inventory file when asked for, never both.
func TestLoadConfigFleet(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x"}))
	if err != nil || !c.SeedOnStart || c.Demo || c.InventoryFile != "" {
		t.Fatalf("default: seed %v demo %v inventory %q, %v", c.SeedOnStart, c.Demo, c.InventoryFile, err)
	}
	c, err = app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", "OIKOS_DEMO": "true"}))
	if err != nil || !c.Demo {
		t.Fatalf("OIKOS_DEMO=true: %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{
		{"OIKOS_DEMO": "true", "OIKOS_INVENTORY": "/fleet.yaml"},
		{"OIKOS_INVENTORY": "/fleet.yaml", "OIKOS_SEED_ON_START": "false"},
	} {
		bad["OIKOS_DATABASE_URL"] = "postgres://x"
		if _, err := app.LoadConfig(envOf(bad)); err == nil || !strings.Contains(err.Error(), "OIKOS_") {
			t.Errorf("%v: want an error, got %v", bad, err)
		}
	}
}

// OIKOS_TRUSTED_PROXIES names the proxies whose forwarded headers the api believes (none by
// default); OIKOS_SIGNIN_RATE bounds sign-in attempts per address (10/1m by default). Bad
// values stop the api, naming the variable.
func TestLoadConfigBrowserSecurity(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x"}))
	if err != nil || len(c.TrustedProxies) != 0 || c.SignInAttempts != 10 || c.SignInPeriod != time.Minute {
		t.Fatalf("default: proxies %v, sign-in %d/%s, %v", c.TrustedProxies, c.SignInAttempts, c.SignInPeriod, err)
	}
	c, err = app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x",
		"OIKOS_TRUSTED_PROXIES": "172.18.0.0/16, 127.0.0.1", "OIKOS_SIGNIN_RATE": "5/30s"}))
	if err != nil || len(c.TrustedProxies) != 2 || c.TrustedProxies[0].String() != "172.18.0.0/16" ||
		c.TrustedProxies[1].String() != "127.0.0.1/32" || c.SignInAttempts != 5 || c.SignInPeriod != 30*time.Second {
		t.Fatalf("set: proxies %v, sign-in %d/%s, %v", c.TrustedProxies, c.SignInAttempts, c.SignInPeriod, err)
	}
	for k, v := range map[string]string{"OIKOS_TRUSTED_PROXIES": "proxy.lan", "OIKOS_SIGNIN_RATE": "10"} {
		_, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", k: v}))
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%s: want an error naming both, got %v", k, v, err)
		}
	}
}
