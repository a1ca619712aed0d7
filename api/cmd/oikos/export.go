package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// typeList is a repeatable, comma-separated --type flag.
type typeList []string

func (l *typeList) String() string { return strings.Join(*l, ",") }

func (l *typeList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// runExport writes the fleet as an inventory file (GET /api/v1/export) to stdout, for
// `oikos seed --inventory FILE` to read back. Nothing is written unless the whole answer
// came. Exit status: 0 done, 1 the api refused or failed, 2 usage error.
func runExport(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos export", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var types typeList
	fs.Var(&types, "type", "only this entity type and its subtypes; repeat it or separate types with commas")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos export [--type T]... > fleet.yaml")
		fs.PrintDefaults()
	}
	if status, ok := parseFlagsOnly(fs, args); !ok {
		return status
	}
	var q apiclient.ExportFleetParams
	if len(types) > 0 {
		q.Type = (*[]string)(&types)
	}
	body, err := env.raw(func(c *apiclient.Client) (*http.Response, error) {
		return c.ExportFleet(ctx, &q, apiclient.WithHeader("Accept", "application/yaml"))
	}, 256<<20)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos export: %v\n", err)
		return 1
	}
	if _, err := env.Stdout.Write(body); err != nil {
		fmt.Fprintf(env.Stderr, "oikos export: %v\n", err)
		return 1
	}
	return 0
}

// raw sends one call of the generated client with the operator's token and returns the body
// as it is (the export is YAML, not JSON), at most limit bytes; errors as env.do's.
func (e *cliEnv) raw(call func(*apiclient.Client) (*http.Response, error), limit int64) ([]byte, error) {
	var body []byte
	err := e.send(call, limit, func(raw []byte) error { body = raw; return nil })
	return body, err
}
