package walk

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"mvdan.cc/sh/v3/syntax"
)

// Shell is what the classifier knows about one shell process while it
// walks the code that process runs: the top-level command, or the code handed
// to a nested shell (bash -c, ssh, sh reading a here-document …). eval, trap
// and alias code runs in the same shell and shares its state.
type Shell struct {
	// funcs are the functions this shell has certainly defined so far: by a
	// definition at the top level of its code, not undone by unset. A call
	// to one runs the function (whose body was classified where it was
	// defined), not the program of that name.
	Funcs map[string]bool
	// lits holds the literal values assigned to variables, used only to
	// look for a destructive command behind `$x -rf /`: never to lower a
	// class.
	Lits map[string]string
	// files is the code this shell runs; taint is computed over it lazily,
	// the first time an arithmetic context needs it.
	Files   []*syntax.File
	Scanned int
	Tainted map[string]bool
	// CodeLits are quoted literals holding "$(" or "`", text an arithmetic
	// double expansion could run.
	CodeLits []string
	// integers are variables declared with -i: bash evaluates what is
	// assigned to them as arithmetic.
	Integers map[string]bool
	// ArithFlagged: the arithmetic double-expansion finding was recorded.
	ArithFlagged bool
	// LoopVars are variables a for loop sets from literal words only.
	LoopVars map[string]bool
	// secrets are variables assigned from a credential store ($(cat
	// /etc/shadow)), with the store: sending one is sending the secret.
	Secrets map[string]string
}

// Reset forgets everything, for the next command.
func (s *Shell) Reset() {
	clear(s.Funcs)
	clear(s.Lits)
	clear(s.Tainted)
	clear(s.Integers)
	clear(s.LoopVars)
	clear(s.Secrets)
	clear(s.Files)
	s.Files, s.Scanned = s.Files[:0], 0
	s.CodeLits = s.CodeLits[:0]
	s.ArithFlagged = false
}

// DefineFunc records that the shell has certainly defined the function name.
func (s *Shell) DefineFunc(name string) {
	if s.Funcs == nil {
		s.Funcs = map[string]bool{}
	}
	s.Funcs[name] = true
}

// SetLit records the literal value assigned to a variable.
func (s *Shell) SetLit(name, value string) {
	if s.Lits == nil {
		s.Lits = map[string]string{}
	}
	s.Lits[name] = value
}

// Unset forgets functions (and literal values) a call to unset may remove.
func (s *Shell) Unset(args []shellword.Word) {
	for _, a := range args {
		if a.Dyn {
			// unset "$f" may remove any function.
			clear(s.Funcs)
			continue
		}
		delete(s.Funcs, a.Val)
		delete(s.Lits, a.Val)
	}
}
