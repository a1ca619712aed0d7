package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "oikos export: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	path := "/api/v1/export"
	if len(types) > 0 {
		path += "?" + url.Values{"type": types}.Encode()
	}
	body, err := env.getRaw(ctx, path)
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

// getRaw GETs a path of the api with the operator's token and returns the body as it is (the
// export is YAML, not JSON); a non-2xx answer comes back as *apiError.
func (e *cliEnv) getRaw(ctx context.Context, path string) ([]byte, error) {
	base := strings.TrimRight(e.Getenv("OIKOS_API_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	if tok := e.Getenv("OIKOS_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	client := e.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		pe := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(raw, pe) != nil || pe.Title == "" {
			pe.Title = http.StatusText(resp.StatusCode)
			pe.Detail = strings.TrimSpace(string(raw))
		}
		return nil, pe
	}
	return raw, nil
}
