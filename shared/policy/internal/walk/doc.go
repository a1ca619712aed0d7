// Package walk holds what one classification records and hands around while
// it walks a command: the segments found and the result, the frame a piece of
// code runs in (wrapper chain, transport, floor), the state of the shell that
// runs it, what a command reads on its standard input, and the limits that
// keep an adversarial command from making the gate slow. [Classifier] is what
// the principles (exfil, lookalike, wrappers) call back through; the
// classifier of shared/policy implements it.
package walk
