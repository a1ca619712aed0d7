package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy"
)

// maxClassifyLine bounds one input line of `oikos classify --stdin`.
const maxClassifyLine = 1 << 20

// runClassify is `oikos classify` as the dispatcher calls it.
func runClassify(_ context.Context, env *cliEnv, args []string) int {
	return classifyMain(args, env.Stdin, env.Stdout, env.Stderr, env.Getenv)
}

// classifyOutput is one classification as the CLI prints it in JSON.
type classifyOutput struct {
	Command string       `json:"command"`
	Class   policy.Class `json:"class"`
	// Explanation names the principle or rule that raised the class.
	Explanation string           `json:"explanation,omitempty"`
	Reasons     []string         `json:"reasons"`
	Segments    []policy.Segment `json:"segments"`
	// Syntax is the syntax gate's refusal, when the gate would refuse the
	// command whatever its class.
	Syntax string `json:"syntax,omitempty"`
}

func newClassifyOutput(p *policy.Policy, command string, declared policy.Class) classifyOutput {
	r := p.Classify(command, declared)
	out := classifyOutput{Command: command, Class: r.Class, Explanation: r.Explanation, Reasons: r.Reasons, Segments: r.Segments}
	if err := policy.CheckSyntax(command); err != nil {
		out.Syntax = err.Error()
	}
	return out
}

// classifyInput is one line of --stdin when it is a JSON object.
type classifyInput struct {
	Command  *string      `json:"command"`
	Declared policy.Class `json:"declared"`
}

// classifyMain implements
//
//	oikos classify [--declared CLASS] [--json] [--policy FILE] -- COMMAND…
//	oikos classify [--declared CLASS] [--policy FILE] --stdin
//
// The first form classifies one command (the words after -- joined by spaces,
// as a shell would see them; quote the whole command to keep its own quoting)
// and prints the class, the reasons and the segments, or one JSON object with
// --json. The second reads one command per
// line — a raw command, or a JSON object {"command": …, "declared": …} — and
// writes one JSON object per line: {"command", "class", "reasons",
// "segments", and "syntax" when the syntax gate would refuse it}. The policy is the default extended by --policy, else by
// OIKOS_POLICY_FILE. Exit status: 0, also for destructive commands (the class
// is the answer); 1 when the input cannot be read or the policy cannot be
// loaded; 2 for a usage error.
func classifyMain(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("oikos classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	declaredFlag := fs.String("declared", "", "declared risk: read_only, reversible_low, config_mutation or destructive")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	fromStdin := fs.Bool("stdin", false, "classify one command per input line, one JSON object per output line")
	policyFile := fs.String("policy", getenv("OIKOS_POLICY_FILE"), "operator policy file (default $OIKOS_POLICY_FILE)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: oikos classify [--declared CLASS] [--json] [--policy FILE] -- COMMAND…")
		fmt.Fprintln(stderr, "       oikos classify [--declared CLASS] [--policy FILE] --stdin")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var declared policy.Class
	if *declaredFlag != "" {
		c, err := policy.ParseClass(*declaredFlag)
		if err != nil {
			fmt.Fprintf(stderr, "oikos classify: --declared: %v\n", err)
			return 2
		}
		declared = c
	}
	rest := fs.Args()
	if *fromStdin == (len(rest) > 0) {
		if *fromStdin {
			fmt.Fprintln(stderr, "oikos classify: give either --stdin or a command after --, not both")
		} else {
			fmt.Fprintln(stderr, "oikos classify: no command given")
		}
		fs.Usage()
		return 2
	}
	p, err := policy.Load(*policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "oikos classify: %v\n", err)
		return 1
	}
	if *fromStdin {
		return classifyLines(p, declared, stdin, stdout, stderr)
	}
	out := newClassifyOutput(p, strings.Join(rest, " "), declared)
	if *asJSON {
		if err := writeJSONLine(stdout, out); err != nil {
			fmt.Fprintf(stderr, "oikos classify: %v\n", err)
			return 1
		}
		return 0
	}
	printClassification(stdout, out)
	return 0
}

func classifyLines(p *policy.Policy, declared policy.Class, stdin io.Reader, stdout, stderr io.Writer) int {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), maxClassifyLine)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		command, lineDeclared := line, declared
		if strings.HasPrefix(strings.TrimSpace(line), "{") {
			var in classifyInput
			dec := json.NewDecoder(bytes.NewReader([]byte(line)))
			dec.DisallowUnknownFields()
			if dec.Decode(&in) == nil && in.Command != nil {
				command = *in.Command
				if in.Declared != "" {
					lineDeclared = in.Declared
				}
			}
		}
		if err := writeJSONLine(stdout, newClassifyOutput(p, command, lineDeclared)); err != nil {
			fmt.Fprintf(stderr, "oikos classify: %v\n", err)
			return 1
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "oikos classify: read input: %v\n", err)
		return 1
	}
	return 0
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

func printClassification(w io.Writer, out classifyOutput) {
	fmt.Fprintln(w, out.Class)
	if out.Explanation != "" {
		fmt.Fprintf(w, "  raised by %s\n", out.Explanation)
	}
	for _, r := range out.Reasons {
		fmt.Fprintf(w, "  because %s\n", r)
	}
	if out.Syntax != "" {
		fmt.Fprintf(w, "  the gate refuses it: %s\n", out.Syntax)
	}
	if len(out.Segments) == 0 {
		return
	}
	fmt.Fprintln(w, "segments:")
	for _, s := range out.Segments {
		where := ""
		if s.Via != "" {
			where = " (via " + s.Via + ")"
		}
		prog := s.Program
		if prog == "" {
			prog = "-"
		}
		fmt.Fprintf(w, "  %-15s %-12s %s%s\n", s.Class, prog, strings.ReplaceAll(s.Command, "\n", "⏎"), where)
	}
}
