package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// The notify command manages notification channels through the api: the api holds them
// (their URLs stored by reference, never shown), matches the rules and sends. A URL given
// with --url travels to the api once and is never printed again; --url-env and --url-file
// name a variable or a file of the api's own environment, read at every send.

const notifyUsage = `usage:
  oikos notify test [--webhook --secret-env VAR | --secret-file PATH] URL
  oikos notify test NAME
  oikos notify add NAME (--url URL | --url-env VAR | --url-file PATH) [--webhook (--secret-env VAR | --secret-file PATH)]
                   [--on KIND,...] [--min-severity info|warning|critical] [--type T]... [--tag T]...
                   [--quiet HH:MM-HH:MM [--tz ZONE]] [--disabled]
  oikos notify list [--json]
  oikos notify deliveries [--channel NAME] [--status S] [--limit N] [--json]
  oikos notify rm NAME`

func runNotify(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, notifyUsage)
		return 2
	}
	switch args[0] {
	case "test":
		return notifyTest(ctx, env, args[1:])
	case "add":
		return notifyAdd(ctx, env, args[1:])
	case "list", "ls":
		return notifyList(ctx, env, args[1:])
	case "deliveries":
		return notifyDeliveries(ctx, env, args[1:])
	case "rm", "remove":
		return notifyRm(ctx, env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(env.Stdout, notifyUsage)
		return 0
	}
	fmt.Fprintf(env.Stderr, "oikos notify: unknown subcommand %q\n%s\n", args[0], notifyUsage)
	return 2
}

// listFlag is a flag that may be repeated and may hold comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// parseWith parses args that may start with one positional argument (NAME, URL) followed by
// flags, or put it after them; it returns that argument ("" when absent).
func parseWith(fs *flag.FlagSet, args []string) (string, error) {
	pos := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	switch {
	case fs.NArg() == 0:
	case pos == "" && fs.NArg() == 1:
		pos = fs.Arg(0)
	default:
		return "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return pos, nil
}

// exitOf is the exit status of a failed call: 2 when the api refused the input (nothing was
// changed), 1 otherwise.
func exitOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity) {
		return 2
	}
	return 1
}

// secretRef reads --secret-env / --secret-file.
func secretRef(env, file string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", errors.New("give --secret-env or --secret-file, not both")
	case env != "":
		return "env:" + env, nil
	case file != "":
		return "file:" + file, nil
	}
	return "", nil
}

func notifyTest(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos notify test", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	webhook := fs.Bool("webhook", false, "URL is a plain JSON webhook, signed with the secret")
	secretEnv := fs.String("secret-env", "", "with --webhook: the api's environment variable holding the signing secret")
	secretFile := fs.String("secret-file", "", "with --webhook: a file on the api's host holding the signing secret")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos notify test [--webhook --secret-env VAR | --secret-file PATH] URL | oikos notify test NAME")
	}
	raw, err := parseWith(fs, args)
	if err != nil || raw == "" {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(env.Stderr, "oikos notify test: %v\n", err)
		}
		fs.Usage()
		return 2
	}
	if !strings.Contains(raw, ":") {
		// A name (names hold no colon): the channel's own test, through its stored URL.
		if *webhook || *secretEnv != "" || *secretFile != "" {
			fmt.Fprintln(env.Stderr, "oikos notify test: a channel is tested as it is configured; --webhook and --secret-* go with a URL")
			return 2
		}
		var res notifyapi.TestResult
		if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.TestNotificationChannel(ctx, raw) }, &res); err != nil {
			fmt.Fprintf(env.Stderr, "oikos notify test: not sent to channel %s: %v\n", raw, err)
			return exitOf(err)
		}
		fmt.Fprintf(env.Stdout, "sent to channel %s\n", raw)
		return 0
	}
	body := apiclient.NotificationTest{Url: &raw}
	ref, err := secretRef(*secretEnv, *secretFile)
	switch {
	case err != nil:
		fmt.Fprintf(env.Stderr, "oikos notify test: %v\n", err)
		return 2
	case *webhook && ref == "":
		fmt.Fprintln(env.Stderr, "oikos notify test: a webhook is signed: give --secret-env VAR or --secret-file PATH")
		return 2
	case !*webhook && ref != "":
		fmt.Fprintln(env.Stderr, "oikos notify test: --secret-env and --secret-file go with --webhook")
		return 2
	case *webhook:
		body.Kind, body.SecretRef = apiclient.Ptr(apiclient.NotificationTestKind(notifytarget.ChannelWebhook)), &ref
	}
	var res notifyapi.TestResult
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.TestNotification(ctx, body) }, &res); err != nil {
		fmt.Fprintf(env.Stderr, "oikos notify test: not sent to %s: %v\n", notifytarget.RedactURL(raw), err)
		return exitOf(err)
	}
	fmt.Fprintf(env.Stdout, "sent to %s\n", notifytarget.RedactURL(raw))
	return 0
}

func notifyAdd(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos notify add", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	rawURL := fs.String("url", "", "the channel's URL (a shoutrrr URL such as ntfy://ntfy.sh/topic, or the webhook's), stored by the api and never shown again; or secret:NAME (oikos secret set)")
	urlEnv := fs.String("url-env", "", "instead of --url: the api's environment variable holding the URL (read at every send)")
	urlFile := fs.String("url-file", "", "instead of --url: a file on the api's host holding the URL (read at every send)")
	webhook := fs.Bool("webhook", false, "a plain JSON webhook signed with HMAC-SHA256 (needs --secret-env or --secret-file)")
	secretEnv := fs.String("secret-env", "", "with --webhook: the api's environment variable holding the signing secret")
	secretFile := fs.String("secret-file", "", "with --webhook: a file on the api's host holding the signing secret")
	var on, types, tags listFlag
	fs.Var(&on, "on", "what to notify, comma-separated: "+strings.Join(notify.Kinds, ", ")+
		" (default "+strings.Join(notify.DefaultKinds, ",")+")")
	minSeverity := fs.String("min-severity", "info", "the least severity notified: info, warning or critical")
	fs.Var(&types, "type", "only about entities of this type or its subtypes (repeatable)")
	fs.Var(&tags, "tag", "only about incidents whose root has this tag (repeatable)")
	quiet := fs.String("quiet", "", "quiet hours, HH:MM-HH:MM (22:00-07:00): what falls due inside is sent when they end")
	tz := fs.String("tz", "UTC", "the time zone of the quiet hours (Europe/Berlin)")
	disabled := fs.Bool("disabled", false, "add the channel disabled")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos notify add NAME (--url URL | --url-env VAR | --url-file PATH) [flags]")
		fs.PrintDefaults()
	}
	name, err := parseWith(fs, args)
	if err != nil || name == "" {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(env.Stderr, "oikos notify add: %v\n", err)
		}
		fs.Usage()
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "oikos notify add: "+format+"; nothing was added\n", a...)
		return 2
	}
	in := map[string]any{"name": name}
	sources := 0
	for _, s := range []struct{ key, value, prefix string }{{"url", *rawURL, ""}, {"url_ref", *urlEnv, "env:"}, {"url_ref", *urlFile, "file:"}} {
		if s.value != "" {
			sources++
			in[s.key] = s.prefix + s.value
		}
	}
	if sources != 1 {
		return bad("give exactly one of --url, --url-env and --url-file")
	}
	if u, _ := in["url"].(string); strings.HasPrefix(u, secretbox.RefPrefix) {
		delete(in, "url") // a stored secret, by name: the api reads it at every send
		in["url_ref"] = u
	}
	ref, err := secretRef(*secretEnv, *secretFile)
	switch {
	case err != nil:
		return bad("%v", err)
	case *webhook && ref == "":
		return bad("a webhook is signed: give --secret-env VAR or --secret-file PATH")
	case !*webhook && ref != "":
		return bad("--secret-env and --secret-file go with --webhook (a shoutrrr URL carries its own credentials)")
	case *webhook:
		in["kind"], in["secret_ref"] = notifytarget.ChannelWebhook, ref
	}
	if len(on) == 0 {
		on = notify.DefaultKinds
	}
	for _, k := range on {
		if !slices.Contains(notify.Kinds, k) {
			return bad("--on %q is not one of %s", k, strings.Join(notify.Kinds, ", "))
		}
	}
	if !slices.Contains(notify.Severities, *minSeverity) {
		return bad("--min-severity %q is not one of %s", *minSeverity, strings.Join(notify.Severities, ", "))
	}
	if *quiet != "" {
		start, end, ok := strings.Cut(*quiet, "-")
		if !ok {
			return bad("--quiet %q: use HH:MM-HH:MM, such as 22:00-07:00", *quiet)
		}
		if _, err := notify.ParseQuiet(start, end, *tz); err != nil {
			return bad("--quiet %s --tz %s: %v", *quiet, *tz, err)
		}
		in["quiet_start"], in["quiet_end"] = strings.TrimSpace(start), strings.TrimSpace(end)
	} else if *tz != "UTC" {
		return bad("--tz goes with --quiet")
	}
	in["timezone"] = *tz
	if *disabled {
		in["enabled"] = false
	}
	in["rules"] = []map[string]any{{"kinds": []string(on), "min_severity": *minSeverity, "entity_types": nonNil(types),
		"tags": nonNil(tags)}}
	var ch notify.Channel
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) {
		return c.CreateNotificationChannelWithBody(ctx, apiclient.ContentJSON, apiclient.JSONBody(in))
	}, &ch); err != nil {
		fmt.Fprintf(env.Stderr, "oikos notify add: %v\n", err)
		return exitOf(err)
	}
	fmt.Fprintf(env.Stdout, "channel %s added (%s %s): %s\n", ch.Name, ch.Kind, ch.URL, describeRules(ch.Rules))
	fmt.Fprintf(env.Stdout, "try it: oikos notify test %s\n", ch.Name)
	return 0
}

func nonNil(l listFlag) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// describeRules says in one line what a channel is sent.
func describeRules(rules []notify.Rule) string {
	if len(rules) == 0 {
		return "no rule, so nothing is sent"
	}
	parts := make([]string, 0, len(rules))
	for _, r := range rules {
		s := strings.Join(r.Kinds, ",")
		if r.MinSeverity != "" && r.MinSeverity != notify.SeverityInfo {
			s += " ≥" + r.MinSeverity
		}
		if len(r.EntityTypes) > 0 {
			s += " type " + strings.Join(r.EntityTypes, "|")
		}
		if len(r.Tags) > 0 {
			s += " tag " + strings.Join(r.Tags, "|")
		}
		if !r.Enabled {
			s += " (disabled)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func notifyList(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos notify list", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(env.Stderr, "usage: oikos notify list [--json]")
		return 2
	}
	p, code, done := fetchPage[notify.Channel](env, "oikos notify list", func(c *apiclient.Client) (*http.Response, error) {
		return c.ListNotificationChannels(ctx)
	}, *asJSON)
	if done {
		return code
	}
	if len(p.Items) == 0 {
		fmt.Fprintln(env.Stdout, "no notification channels; add one with: oikos notify add NAME --url URL")
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tURL\tFROM\tQUIET\tRULES\tSTATE")
	for _, c := range p.Items {
		quiet := "-"
		if c.QuietStart != nil && c.QuietEnd != nil {
			quiet = *c.QuietStart + "-" + *c.QuietEnd + " " + c.Timezone
		}
		from := c.URLRef
		if strings.HasPrefix(from, "stored:") {
			from = "stored"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Kind, c.URL, from, quiet, describeRules(c.Rules), channelState(c))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

func channelState(c notify.Channel) string {
	switch {
	case !c.Enabled:
		return "disabled"
	case c.LastError != nil:
		return "failing: " + shorten(oneLine(*c.LastError), 80)
	case c.LastOKAt != nil:
		return "ok " + c.LastOKAt.Local().Format("2006-01-02 15:04")
	}
	return "nothing sent yet"
}

func notifyDeliveries(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos notify deliveries", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	channel := fs.String("channel", "", "only this channel's (its name)")
	status := fs.String("status", "", "pending, sent, failed, suppressed (comma-separated)")
	limit := fs.Int("limit", 50, "how many, newest first (1-500)")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *limit < 1 || *limit > 500 {
		fmt.Fprintln(env.Stderr, "usage: oikos notify deliveries [--channel NAME] [--status S] [--limit 1-500] [--json]")
		return 2
	}
	q := apiclient.ListNotificationDeliveriesParams{Channel: apiclient.Opt(*channel), Limit: limit}
	if *status != "" {
		for _, st := range strings.Split(*status, ",") {
			if !slices.Contains(notify.Statuses, strings.TrimSpace(st)) {
				fmt.Fprintf(env.Stderr, "oikos notify deliveries: --status %q is not one of %s\n", st, strings.Join(notify.Statuses, ", "))
				return 2
			}
		}
		q.Status = status
	}
	p, code, done := fetchPage[notify.Delivery](env, "oikos notify deliveries", func(c *apiclient.Client) (*http.Response, error) {
		return c.ListNotificationDeliveries(ctx, &q)
	}, *asJSON)
	if done {
		return code
	}
	printDeliveries(env.Stdout, p.Items)
	return 0
}

func printDeliveries(w io.Writer, items []notify.Delivery) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no deliveries")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tCHANNEL\tKIND\tSEVERITY\tSTATUS\tATTEMPTS\tTITLE\tNOTE")
	for _, d := range items {
		note := ""
		switch {
		case d.Status == notify.StatusPending && d.NextAttemptAt != nil:
			note = "next attempt " + d.NextAttemptAt.Local().Format("15:04:05")
			if d.LastError != nil {
				note += " after: " + *d.LastError
			}
		case d.LastError != nil:
			note = *d.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.CreatedAt.Local().Format(time.DateTime), d.Channel, d.Kind,
			d.Severity, d.Status, d.AttemptCount, shorten(oneLine(d.Title), 60), shorten(oneLine(note), 80))
	}
	_ = tw.Flush()
}

func notifyRm(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(env.Stderr, "usage: oikos notify rm NAME")
		return 2
	}
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.DeleteNotificationChannel(ctx, args[0]) }, nil); err != nil {
		fmt.Fprintf(env.Stderr, "oikos notify rm: %v\n", err)
		return exitOf(err)
	}
	fmt.Fprintf(env.Stdout, "channel %s removed, with its rules and deliveries\n", args[0])
	return 0
}
