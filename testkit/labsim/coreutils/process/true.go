package process

import (
	"context"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

func trueProg(context.Context, *shell.Invocation) int  { return 0 }
func falseProg(context.Context, *shell.Invocation) int { return 1 }

func yes(ctx context.Context, inv *shell.Invocation) int {
	word := "y"
	if len(inv.Args) > 1 {
		word = strings.Join(inv.Args[1:], " ")
	}
	line := []byte(word + "\n")
	for ctx.Err() == nil {
		if _, err := inv.Stdout.Write(line); err != nil {
			return 0
		}
	}
	return 130
}
