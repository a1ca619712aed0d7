package storage

import (
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// opts is a command line parsed getopt_long-style.
type opts struct {
	flags map[string]bool
	vals  map[string]string
	args  []string
}

func (o opts) has(names ...string) bool {
	for _, n := range names {
		if o.flags[n] {
			return true
		}
		if _, ok := o.vals[n]; ok {
			return true
		}
	}
	return false
}

// getopt parses args against long options: name → short letter ("" for none), a trailing
// "=" on the letter (or a value of "=") meaning the option takes a value. A refused option
// answers as util-linux does: the message, "Try 'NAME --help' for more information." and 1.
func getopt(inv *shell.Invocation, args []string, long map[string]string) (opts, bool) {
	o := opts{flags: map[string]bool{}, vals: map[string]string{}}
	short := map[byte]string{}
	takes := map[string]bool{}
	for name, s := range long {
		v := strings.HasSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
		takes[name] = v
		if s != "" {
			short[s[0]] = name
		}
	}
	fail := func(format string, a ...any) (opts, bool) {
		fmt.Fprintf(inv.Stderr, "%s: %s\nTry '%s --help' for more information.\n", inv.Name(), fmt.Sprintf(format, a...), inv.Name())
		return o, false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.args = append(o.args, args[i+1:]...)
			return o, true
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			t, ok := takes[name]
			if !ok {
				return fail("unrecognized option '--%s'", name)
			}
			if t && !hasV {
				if i+1 >= len(args) {
					return fail("option '--%s' requires an argument", name)
				}
				i++
				v = args[i]
			}
			if t {
				o.vals[name] = v
			} else {
				o.flags[name] = true
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				name, ok := short[a[j]]
				if !ok {
					return fail("invalid option -- '%c'", a[j])
				}
				if takes[name] {
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							return fail("option requires an argument -- '%c'", a[j])
						}
						i++
						v = args[i]
					}
					o.vals[name] = v
					break
				}
				o.flags[name] = true
			}
		default:
			o.args = append(o.args, a)
		}
	}
	return o, true
}
