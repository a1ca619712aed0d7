package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

const secretUsage = `usage:
  oikos secret set NAME < value-file     (or: printf %s "$VALUE" | oikos secret set NAME)
  oikos secret list
  oikos secret rm NAME
A value is read from stdin, never from the command line (where ps and shell history see it);
one trailing newline is dropped. Reference it as secret:NAME.`

// Secret manages the stored secrets through the api (GET/PUT/DELETE /api/v1/secrets).
func Secret(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		io.WriteString(env.Stderr, secretUsage+"\n")
		return 2
	}
	sub, rest := args[0], args[1:]
	if sub == "list" {
		if len(rest) != 0 {
			fmt.Fprintln(env.Stderr, "usage: oikos secret list")
			return 2
		}
		return secretList(ctx, env)
	}
	if (sub != "set" && sub != "rm") || len(rest) != 1 || strings.HasPrefix(rest[0], "-") {
		if sub == "set" && len(rest) > 1 {
			fmt.Fprintln(env.Stderr, "oikos secret set: give the name only; the value is read from stdin, never from the command line")
		}
		io.WriteString(env.Stderr, secretUsage+"\n")
		return 2
	}
	// A bad name is refused before anything is read or sent.
	name, err := secretbox.Name(rest[0])
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos secret %s: %v; nothing was changed\n", sub, err)
		return 2
	}
	if sub == "rm" {
		if err := env.Do(func(c *apiclient.Client) (*http.Response, error) { return c.RemoveSecret(ctx, name) }, nil); err != nil {
			fmt.Fprintf(env.Stderr, "oikos secret rm: %v\n", err)
			return env.ExitOf(err)
		}
		fmt.Fprintf(env.Stdout, "secret %s removed\n", name)
		return 0
	}
	value, err := readSecretValue(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos secret set: %v; nothing was stored\n", err)
		return 2
	}
	var info apiclient.Secret
	if err := env.Do(func(c *apiclient.Client) (*http.Response, error) {
		return c.SetSecret(ctx, name, apiclient.SetSecret{Value: value})
	}, &info); err != nil {
		fmt.Fprintf(env.Stderr, "oikos secret set: %v\n", err)
		return env.ExitOf(err)
	}
	fmt.Fprintf(env.Stdout, "secret %s set; reference it as secret:%s\n", info.Name, info.Name)
	return 0
}

// readSecretValue reads the value from stdin: from a terminal without echo, else the whole
// input with one trailing newline dropped.
func readSecretValue(env Env) (string, error) {
	var raw []byte
	if f, ok := env.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(env.Stderr, "value (not shown): ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(env.Stderr)
		if err != nil {
			return "", fmt.Errorf("read the value: %w", err)
		}
		raw = b
	} else {
		if env.Stdin == nil {
			return "", fmt.Errorf("no value on stdin")
		}
		b, err := io.ReadAll(io.LimitReader(env.Stdin, secretbox.MaxValueBytes+2))
		if err != nil {
			return "", fmt.Errorf("read the value from stdin: %w", err)
		}
		raw = b
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	switch {
	case len(raw) == 0:
		return "", fmt.Errorf("the value on stdin is empty (pipe it in: printf %%s \"$VALUE\" | oikos secret set NAME)")
	case len(raw) > secretbox.MaxValueBytes:
		return "", fmt.Errorf("the value is longer than %d KiB", secretbox.MaxValueBytes>>10)
	}
	return string(raw), nil
}

func secretList(ctx context.Context, env Env) int {
	var list apiclient.SecretList
	if err := env.Do(func(c *apiclient.Client) (*http.Response, error) { return c.ListSecrets(ctx) }, &list); err != nil {
		fmt.Fprintf(env.Stderr, "oikos secret list: %v\n", err)
		return env.ExitOf(err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(env.Stdout, "no secrets stored (oikos secret set NAME < file)")
		return 0
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSET\tBY")
	for _, s := range list.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, s.SetAt.UTC().Format(time.RFC3339), s.SetBy)
	}
	_ = w.Flush()
	return 0
}
