package notifytarget_test

import (
	"errors"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/notifytarget"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ntfy://ntfy.sh/alerts":                           "ntfy://ntfy.sh/…",
		"ntfy://user:tk_secret@ntfy.example:8443/alerts":  "ntfy://ntfy.example:8443/…",
		"gotify://gotify.lan/AbCdEf123":                   "gotify://gotify.lan/…",
		"discord://webhooktoken@123456789":                "discord://123456789/…",
		"telegram://110201543:AAHdqTcv@telegram?chats=@x": "telegram://telegram/…",
		"generic+https://hooks.example/in?token=abc":      "generic+https://hooks.example/…",
		"https://hooks.example/":                          "https://hooks.example",
		"https://hooks.example":                           "https://hooks.example",
		"https://hooks.example#frag":                      "https://hooks.example/…",
		"smtp://user:pw@mail.lan:587/?from=a@b&to=c@d":    "smtp://mail.lan:587/…",
		"mailto:ops@example.org":                          "mailto:…",
		"::not a url":                                     "(unparsable URL)",
		"":                                                "(unparsable URL)",
	} {
		if got := notifytarget.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	raw := "ntfy://bob:hunter2-pass@ntfy.example/private-topic?token=tk_0123456789&scheme=http"
	for _, c := range []struct{ msg, want string }{
		{`Post "http://ntfy.example/private-topic?token=tk_0123456789": dial tcp: connection refused`,
			`Post "http://ntfy.example/…": dial tcp: connection refused`},
		{`setting query parameter "token" to "tk_0123456789": not a valid config key`,
			`setting query parameter "token" to "…": not a valid config key`},
		{`server response: unknown topic private-topic (40401)`, `server response: unknown topic … (40401)`},
		{`auth failed for bob with hunter2-pass`, `auth failed for … with …`},
		{`see https://docs.ntfy.sh/publish/#x.`, `see https://docs.ntfy.sh/….`},
		{`got unexpected HTTP status: 500 Internal Server Error`, `got unexpected HTTP status: 500 Internal Server Error`},
	} {
		if got := notifytarget.Redact(c.msg, raw, "webhook-secret-0123456789"); got != c.want {
			t.Errorf("Redact(%q)\n  = %q\nwant %q", c.msg, got, c.want)
		}
	}
	if got := notifytarget.RedactError(errors.New("key webhook-secret-0123456789 refused"), raw, "webhook-secret-0123456789"); got != "key … refused" {
		t.Errorf("the signing secret survives: %q", got)
	}
	if notifytarget.RedactError(nil) != "" {
		t.Error("nil error")
	}
}
