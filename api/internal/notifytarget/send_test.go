package notifytarget_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/api/internal/notifytarget"
)

// A generic shoutrrr webhook (generic://host:port/path?disabletls=yes) gets the title and the
// message as JSON; the URL is checked without sending.
func TestGenericShoutrrrURL(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	url := fmt.Sprintf("generic://%s/hook?disabletls=yes", r.Srv.Listener.Addr())
	if err := notifytarget.ValidateURL(notifytarget.ChannelShoutrrr, url); err != nil {
		t.Fatal(err)
	}
	if r.Count.Load() != 0 {
		t.Fatal("validating a URL sent something")
	}
	tr := &notifytarget.Transport{}
	m := notifytarget.Message{Title: "Incident: atlas is down", Body: "Root cause: proxmox-host:atlas"}
	if _, err := tr.Send(context.Background(), notifytarget.Target{Kind: notifytarget.ChannelShoutrrr, URL: url}, m); err != nil {
		t.Fatal(err)
	}
	if got := r.Next(t); got.Path != "/hook" || string(got.Body) != "Incident: atlas is down\n\nRoot cause: proxmox-host:atlas" {
		t.Errorf("plain: got %s %q", got.Path, got.Body)
	}
	if _, err := tr.Send(context.Background(), notifytarget.Target{Kind: notifytarget.ChannelShoutrrr, URL: url + "&template=json"}, m); err != nil {
		t.Fatal(err)
	}
	got := r.Next(t)
	var body map[string]string
	decode(t, got.Body, &body)
	if body["title"] != "Incident: atlas is down" || body["message"] != "Root cause: proxmox-host:atlas" {
		t.Errorf("json: got %v", body)
	}
}

func TestValidateURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind, url string
		ok        bool
		says      string
	}{
		{notifytarget.ChannelShoutrrr, "ntfy://ntfy.sh/alerts", true, ""},
		{notifytarget.ChannelShoutrrr, "gotify://gotify.lan/AbCdEfGhIjKlMnO", true, ""},
		{notifytarget.ChannelShoutrrr, "discord://token@123456789", true, ""},
		{notifytarget.ChannelShoutrrr, "pushover://shoutrrr:apptoken@userkey/", true, ""},
		{notifytarget.ChannelShoutrrr, "generic+https://hooks.example/in?token=abc", true, ""},
		{notifytarget.ChannelShoutrrr, "ntfyy://ntfy.sh/alerts", false, "not a shoutrrr service"},
		{notifytarget.ChannelShoutrrr, "ntfy://ntfy.sh/", false, "topic"},
		{notifytarget.ChannelShoutrrr, "ntfy://ntfy.sh/a?priority=loudest-secret", false, "not a valid ntfy URL"},
		{notifytarget.ChannelShoutrrr, "plain words", false, "not a URL"},
		{notifytarget.ChannelShoutrrr, "", false, "empty"},
		{notifytarget.ChannelWebhook, "https://hooks.example/in", true, ""},
		{notifytarget.ChannelWebhook, "ntfy://ntfy.sh/alerts", false, "http"},
		{notifytarget.ChannelWebhook, "https:///nohost", false, "host"},
	} {
		err := notifytarget.ValidateURL(c.kind, c.url)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.says)) {
			t.Errorf("%s %q: %v", c.kind, c.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "loudest-secret") {
			t.Errorf("the error quotes the URL: %v", err)
		}
	}
}
