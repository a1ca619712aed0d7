// Package e2e holds Oikos's end-to-end tests: real PostgreSQL, the lab simulator speaking
// real SSH, and the daemons' own components wired as their composition roots wire them.
// Subpackages group the tests by path through the system (executor: the scheduler's half
// of gated execution). Nothing here is imported by the daemons.
package e2e
