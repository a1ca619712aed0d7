package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

type incidentItem struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	Severity      string     `json:"severity"`
	Root          string     `json:"root"`
	AffectedCount int        `json:"affected_count"`
	Summary       string     `json:"summary"`
	OpenedAt      time.Time  `json:"opened_at"`
	ResolvedAt    *time.Time `json:"resolved_at"`
}

// runIncidents lists incidents, one per root cause, unresolved first.
func runIncidents(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos incidents", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	status := fs.String("status", "open", "open, resolved or all")
	entity := fs.String("entity", "", "only incidents this entity roots or is affected by (slug or id)")
	limit := fs.Int("limit", 50, "how many (1-500)")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *limit < 1 || *limit > 500 || (*status != "open" && *status != "resolved" && *status != "all") {
		fmt.Fprintln(env.Stderr, "usage: oikos incidents [--status open|resolved|all] [--entity SLUG] [--limit 1-500] [--json]")
		return 2
	}
	q := apiclient.ListIncidentsParams{Status: apiclient.Ptr(apiclient.ListIncidentsParamsStatus(*status)), Entity: apiclient.Opt(*entity),
		Limit: limit}
	p, code, done := fetchPage[incidentItem](env, "oikos incidents", func(c *apiclient.Client) (*http.Response, error) {
		return c.ListIncidents(ctx, &q)
	}, *asJSON)
	if done {
		return code
	}
	if len(p.Items) == 0 {
		fmt.Fprintf(env.Stdout, "no %s incidents\n", map[string]string{"all": "", "open": "open", "resolved": "resolved"}[*status])
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSEVERITY\tROOT\tAFFECTED\tOPENED\tSUMMARY")
	for _, in := range p.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s ago\t%s\n", in.ID, in.Status, in.Severity, in.Root, in.AffectedCount,
			time.Since(in.OpenedAt).Round(time.Second), shorten(oneLine(in.Summary), 80))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}
