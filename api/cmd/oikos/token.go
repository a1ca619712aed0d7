package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

const tokenUsage = `usage:
  oikos token create --role operator|agent|readonly --name NAME   print a new token (shown once)
  oikos token revoke --name NAME                                  disable a token for good
  oikos token list                                                names, roles, last use (never the tokens)`

// runToken manages api tokens directly in the database (OIKOS_DATABASE_URL): the api is not
// needed, so the first operator token can be made before anything else runs. Exit status:
// 0 done, 1 failure, 2 usage error.
func runToken(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, tokenUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("oikos token "+sub, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() { fmt.Fprintln(env.Stderr, tokenUsage) }
	var role, name *string
	switch sub {
	case "create":
		role = fs.String("role", "", "operator, agent or readonly")
		name = fs.String("name", "", "a unique name; audit rows and events name the token's actor by it")
	case "revoke":
		name = fs.String("name", "", "the token's name")
	case "list":
	case "-h", "--help", "help":
		fmt.Fprintln(env.Stdout, tokenUsage)
		return 0
	default:
		fmt.Fprintf(env.Stderr, "oikos token: unknown subcommand %q\n%s\n", sub, tokenUsage)
		return 2
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "oikos token %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	if name != nil && *name == "" {
		fmt.Fprintf(env.Stderr, "oikos token %s: --name is required\n", sub)
		return 2
	}
	var r auth.Role
	if role != nil {
		var err error
		if r, err = auth.ParseRole(*role); err != nil {
			fmt.Fprintf(env.Stderr, "oikos token create: --role: %v\n", err)
			return 2
		}
	}

	pool, err := env.db(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos token %s: %v\n", sub, err)
		return 1
	}
	defer pool.Close()
	store := auth.NewStore(pool)
	switch sub {
	case "create":
		tok, err := store.Create(ctx, *name, r)
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos token create: %v\n", err)
			return 1
		}
		// The token alone on stdout, so `TOKEN=$(oikos token create ...)` works; the note
		// goes to stderr.
		fmt.Fprintln(env.Stdout, tok)
		fmt.Fprintf(env.Stderr, "created %s token %q; it is shown only this once: store it now (use it as Authorization: Bearer <token>)\n",
			r, *name)
	case "revoke":
		if err := store.Revoke(ctx, *name); err != nil {
			fmt.Fprintf(env.Stderr, "oikos token revoke: %v\n", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "revoked token %q\n", *name)
	case "list":
		infos, err := store.List(ctx)
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos token list: %v\n", err)
			return 1
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tLAST USED\tREVOKED")
		for _, i := range infos {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.Name, i.Role, i.CreatedAt.UTC().Format(time.RFC3339), when(i.LastUsedAt), when(i.RevokedAt))
		}
		_ = tw.Flush()
	}
	return 0
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
