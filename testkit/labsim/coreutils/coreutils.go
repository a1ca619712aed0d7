// Package coreutils holds the simulated file and text utilities of lab machines: a subset of
// GNU coreutils, findutils, grep and sed, written in Go against the machine's sandbox.FS.
// They behave like the real tools for the options Oikos and its tests use (message formats,
// exit statuses), and nothing in them can reach a file outside the machine's directory.
//
// One package per family, each with its own Register: coreutils/files (files and
// directories, find), coreutils/text (filters: grep, sed, sort, cut, …) and
// coreutils/process (running other commands: env, xargs, sh, timeout, …); coreutils/cli is
// what they share (options, usage messages, reading operands). A new utility goes into its
// family's Register; a new family is a package beside them and a line below.
package coreutils

import (
	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/files"
	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/process"
	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/text"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Register adds every utility of every family to reg.
// The GNU utilities listed in cli.GNU refuse an option they do not have as getopt does.
func Register(reg shell.Registry) {
	files.Register(reg)
	text.Register(reg)
	process.Register(reg)
	for name, p := range reg {
		reg[name] = cli.Guard(name, p)
	}
}
