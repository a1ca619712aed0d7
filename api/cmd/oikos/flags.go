package main

import (
	"errors"
	"flag"
	"fmt"
)

// parseFlagsOnly parses args into fs for a command that takes flags and no argument. It
// returns ok when the command should go on; otherwise the exit status to end with: 0 after
// -h (fs has printed its usage), 2 for a bad flag or an argument (the usage follows its
// complaint).
func parseFlagsOnly(fs *flag.FlagSet, args []string) (status int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	return 0, true
}
