package jobs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// Schedulers lists the schedulers sharing the fleet and the units each holds.
func Schedulers(ctx context.Context, env Env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: oikos schedulers")
		return 2
	}
	type lease struct {
		Unit       string    `json:"unit"`
		Holder     string    `json:"holder"`
		Generation int64     `json:"generation"`
		ExpiresAt  time.Time `json:"expires_at"`
	}
	var ans struct {
		Schedulers []struct {
			ID          string    `json:"id"`
			StartedAt   time.Time `json:"started_at"`
			HeartbeatAt time.Time `json:"heartbeat_at"`
			Live        bool      `json:"live"`
			Leases      []lease   `json:"leases"`
		} `json:"schedulers"`
		Orphaned []lease `json:"orphaned"`
	}
	if err := env.Do(func(c *apiclient.Client) (*http.Response, error) { return c.ListSchedulers(ctx) }, &ans); err != nil {
		fmt.Fprintf(env.Stderr, "oikos schedulers: %v\n", err)
		return 1
	}
	if len(ans.Schedulers) == 0 {
		fmt.Fprintln(env.Stdout, "no scheduler has started")
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULER\tSTATE\tUP\tLAST HEARTBEAT\tUNITS")
	for _, s := range ans.Schedulers {
		state := "live"
		if !s.Live {
			state = "gone"
		}
		units := make([]string, 0, len(s.Leases))
		for _, l := range s.Leases {
			units = append(units, strings.TrimPrefix(l.Unit, "host:"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%d: %s\n", s.ID, state, time.Since(s.StartedAt).Round(time.Second),
			time.Since(s.HeartbeatAt).Round(100*time.Millisecond), len(units), strings.Join(units, " "))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if len(ans.Orphaned) > 0 {
		fmt.Fprintf(env.Stdout, "\n%d unit(s) held by no live scheduler (taken over once their lease expires):\n", len(ans.Orphaned))
		for _, l := range ans.Orphaned {
			fmt.Fprintf(env.Stdout, "  %-40s last held by %s, expires %s\n", l.Unit, l.Holder, l.ExpiresAt.Format(time.RFC3339))
		}
	}
	return 0
}
