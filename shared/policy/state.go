package policy

import (
	"mvdan.cc/sh/v3/syntax"
)

// shellState is what the classifier knows about one shell process while it
// walks the code that process runs: the top-level command, or the code handed
// to a nested shell (bash -c, ssh, sh reading a here-document …). eval, trap
// and alias code runs in the same shell and shares its state.
type shellState struct {
	// funcs are the functions this shell has certainly defined so far: by a
	// definition at the top level of its code, not undone by unset. A call
	// to one runs the function (whose body was classified where it was
	// defined), not the program of that name.
	funcs map[string]bool
	// lits holds the literal values assigned to variables, used only to
	// look for a destructive command behind `$x -rf /`: never to lower a
	// class.
	lits map[string]string
	// files is the code this shell runs; taint is computed over it lazily,
	// the first time an arithmetic context needs it.
	files   []*syntax.File
	scanned int
	tainted map[string]bool
	// codeLits are quoted literals holding "$(" or "`", text an arithmetic
	// double expansion could run.
	codeLits []string
	// integers are variables declared with -i: bash evaluates what is
	// assigned to them as arithmetic.
	integers map[string]bool
	// arithFlagged: the arithmetic double-expansion finding was recorded.
	arithFlagged bool
	// loopVars are variables a for loop sets from literal words only.
	loopVars map[string]bool
	// secrets are variables assigned from a credential store ($(cat
	// /etc/shadow)), with the store: sending one is sending the secret.
	secrets map[string]string
}

func (s *shellState) reset() {
	clear(s.funcs)
	clear(s.lits)
	clear(s.tainted)
	clear(s.integers)
	clear(s.loopVars)
	clear(s.secrets)
	clear(s.files)
	s.files, s.scanned = s.files[:0], 0
	s.codeLits = s.codeLits[:0]
	s.arithFlagged = false
}

func (s *shellState) defineFunc(name string) {
	if s.funcs == nil {
		s.funcs = map[string]bool{}
	}
	s.funcs[name] = true
}

func (s *shellState) setLit(name, value string) {
	if s.lits == nil {
		s.lits = map[string]string{}
	}
	s.lits[name] = value
}

// unset forgets functions (and literal values) a call to unset may remove.
func (s *shellState) unset(args []word) {
	for _, a := range args {
		if a.dyn {
			// unset "$f" may remove any function.
			clear(s.funcs)
			continue
		}
		delete(s.funcs, a.val)
		delete(s.lits, a.val)
	}
}
