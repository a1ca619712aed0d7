// Package actions holds what the api and the scheduler must agree on about typed actions:
// the api validates and classifies an action's params, the scheduler runs it, and a verb one
// accepts and the other refuses would pass the gate and then fail at run time.
package actions

import "slices"

// systemctlVerbs are the verbs the systemctl action takes; the classifier decides each one's
// class (status is read-only, restart a config mutation, stop of sshd destructive …).
var systemctlVerbs = []string{
	"cat", "disable", "enable", "is-active", "is-enabled", "is-failed", "mask", "reload",
	"reload-or-restart", "restart", "show", "start", "status", "stop", "try-restart", "unmask",
}

// SystemctlVerb reports whether verb is one the systemctl action takes.
func SystemctlVerb(verb string) bool { return slices.Contains(systemctlVerbs, verb) }

// SystemctlVerbs returns the verbs the systemctl action takes, sorted (for error messages).
func SystemctlVerbs() []string { return slices.Clone(systemctlVerbs) }
