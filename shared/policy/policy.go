package policy

import (
	"sync"

	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/syntaxgate"
	"github.com/oikos-hq/oikos/shared/policy/internal/wrappers"
)

// Policy is a compiled rule set and the classifier over it. It is immutable
// once built and safe for concurrent use.
type Policy struct {
	rules *ruleset.Set
	// failed is set only on the stand-in Default returns when the embedded
	// policy does not compile (tests make sure it does): every command is then
	// destructive, so a broken build can never run anything unattended.
	failed error

	classifiers sync.Pool
}

// Default returns the embedded default policy. It never panics: should the
// embedded YAML ever fail to compile (the package tests prevent that), it
// returns a policy that classifies every command as destructive.
func Default() *Policy {
	rs, err := ruleset.Default(wrappers.Names)
	if err != nil {
		return &Policy{failed: err}
	}
	return &Policy{rules: rs}
}

// Load returns the default policy extended by the operator policy file at path
// (OIKOS_POLICY_FILE; "" means none), and verifies every rule's match and
// not_match examples against the merged result. A wrong example is an error
// naming the rule and the example: the caller must refuse to start.
func Load(filePath string) (*Policy, error) {
	rs, err := ruleset.Load(filePath, wrappers.Names)
	if err != nil {
		return nil, err
	}
	p := &Policy{rules: rs}
	if err := p.Verify(); err != nil {
		return nil, err
	}
	return p, nil
}

// Verify classifies every rule's match and not_match examples and reports the
// first one that disagrees with its rule: a match example must be decided by
// the rule's class and the rule must apply to it; a not_match example must not
// be matched by the rule at all.
func (p *Policy) Verify() error {
	if p.failed != nil {
		return p.failed
	}
	return p.rules.Verify(func(command string) (Class, map[string]bool) {
		res, matched := p.classifyTraced(command)
		return res.Class, matched
	})
}

// HostOnly reports whether a program exists only on a Proxmox host (pct, qm,
// pvesh …), as listed by the policy's host_only.
func (p *Policy) HostOnly(program string) bool { return p.rules != nil && p.rules.HostOnly(program) }

// classifyTraced classifies and records every rule that applied anywhere.
func (p *Policy) classifyTraced(command string) (Result, map[string]bool) {
	c := p.getClassifier()
	defer p.putClassifier(c)
	c.trace = map[string]bool{}
	res := c.run(command, "")
	tr := c.trace
	c.trace = nil
	return res, tr
}

func (p *Policy) getClassifier() *classifier {
	if c, ok := p.classifiers.Get().(*classifier); ok {
		return c
	}
	return newClassifier(p)
}

func (p *Policy) putClassifier(c *classifier) {
	clear(c.segs) // drop references to the last command's text
	c.segs = c.segs[:0]
	c.top.Reset()
	c.trace = nil
	p.classifiers.Put(c)
}

// Classify classifies a shell command. The result is never below declared:
// classification only escalates. reversible_low comes out only when declared
// over a read_only command; an unknown declared class is treated as
// destructive.
func (p *Policy) Classify(command string, declared Class) Result {
	c := p.getClassifier()
	defer p.putClassifier(c)
	return c.run(command, declared)
}

// Check classifies a command and runs the syntax gate over it with one
// pooled parser: the gate needs both, for every execution.
func (p *Policy) Check(command string, declared Class) (Result, error) {
	c := p.getClassifier()
	defer p.putClassifier(c)
	return c.run(command, declared), syntaxgate.CheckWith(c.parser, command)
}
