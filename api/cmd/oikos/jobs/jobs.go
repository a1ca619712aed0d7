// Package jobs holds subcommands of the oikos CLI that only talk to the api, so the main
// package stays within the size limit (deploy/layering): each takes an Env, the part of the
// CLI's environment it uses.
package jobs

import (
	"io"
	"net/http"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// Env is what a job may touch: its streams and the CLI's api call (Do decodes a 2xx answer
// into out; ExitOf maps a failure to the exit status).
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Do     func(call func(*apiclient.Client) (*http.Response, error), out any) error
	ExitOf func(error) int
}
