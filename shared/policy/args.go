package policy

import "strings"

// grammar describes how one program lays out its command line: which options
// take the next word as their value, at which subcommand level. It is what lets
// the classifier tell `docker compose -f x.yml ps` (ps is the subcommand) from
// `docker logs -f web` (-f takes no value). A value option the grammar does not
// know makes its value look like a positional word; every rule treats an
// unexpected positional word conservatively, so a gap in a grammar costs
// precision, never safety.
type grammar struct {
	// words: options are whole words (find -name, ip -br, openssl -in) rather
	// than clusters of single letters.
	words bool
	// levels maps a subcommand path ("" for the program itself, "compose",
	// "compose logs") to the options that take a value at that level.
	levels map[string]map[string]bool
}

// option is one parsed option. Long options keep their "--" prefix and short
// ones their "-", so rules name options exactly as a person types them.
type option struct {
	name     string
	value    string
	hasValue bool
	valueDyn bool
}

// cmdline is a command's arguments after the program, split into options and
// positional words by the program's grammar.
type cmdline struct {
	opts []option
	pos  []word
	// dyn: some argument is only known at run time (an expansion). It may
	// become any number of words, options included.
	dyn bool
	// flagLike: some argument that could turn out to be an option is only known
	// at run time (an expansion, or a glob with no literal prefix).
	flagLike bool
	// endOpts: the line holds `--`, which ends the options.
	endOpts bool
}

func (c *cmdline) reset() {
	c.opts = c.opts[:0]
	c.pos = c.pos[:0]
	c.dyn, c.flagLike, c.endOpts = false, false, false
}

// parse splits args (the words after the program name) by the grammar g,
// which may be nil (GNU-style options, none taking a value).
func (g *grammar) parse(args []word, c *cmdline) {
	c.reset()
	level := ""
	var values map[string]bool
	if g != nil {
		values = g.levels[""]
	}
	endOpts := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.dyn {
			// `--post-data="$(env)"`: one word (its expansion is quoted)
			// whose known part names a long option: that option, with a
			// value only known at run time. Anything else may be any
			// number of words, options included.
			if !endOpts && !w.split && strings.HasPrefix(w.val, "--") {
				if name, _, ok := strings.Cut(w.val[:w.fixed], "="); ok {
					c.opts = append(c.opts, option{name: name, value: w.val[len(name)+1:], hasValue: true, valueDyn: true})
					continue
				}
			}
			c.dyn, c.flagLike = true, true
			c.pos = append(c.pos, w)
			continue
		}
		if w.flagLike {
			c.flagLike = true
		}
		s := w.val
		if !endOpts && s == "--" {
			endOpts, c.endOpts = true, true
			continue
		}
		if endOpts || len(s) < 2 || s[0] != '-' {
			c.pos = append(c.pos, w)
			if g != nil && !w.glob {
				next := s
				if level != "" {
					next = level + " " + s
				}
				if v, ok := g.levels[next]; ok {
					level, values = next, v
				}
			}
			continue
		}
		// An option.
		if strings.HasPrefix(s, "--") || (g != nil && g.words) {
			name, val, has := s, "", false
			if strings.HasPrefix(s, "--") {
				name, val, has = strings.Cut(s, "=")
			}
			o := option{name: name, value: val, hasValue: has}
			if !has && values[name] && i+1 < len(args) {
				i++
				o.value, o.hasValue, o.valueDyn = args[i].val, true, args[i].dyn
				c.noteValue(args[i])
			}
			c.opts = append(c.opts, o)
			continue
		}
		if s[1] >= '0' && s[1] <= '9' {
			// -20 (head -20, nice -10): one numeric option, not a cluster.
			c.opts = append(c.opts, option{name: s})
			continue
		}
		for j := 1; j < len(s); j++ {
			name := shortOpts[s[j]]
			if values[name] {
				o := option{name: name, hasValue: true}
				switch {
				case j+1 < len(s):
					o.value = s[j+1:]
				case i+1 < len(args):
					i++
					o.value, o.valueDyn = args[i].val, args[i].dyn
					c.noteValue(args[i])
				default:
					o.hasValue = false
				}
				c.opts = append(c.opts, o)
				break
			}
			c.opts = append(c.opts, option{name: name})
		}
	}
}

// noteValue records that an option's value was only known at run time: an
// unquoted expansion may split into several words, so the whole line is
// uncertain; a quoted one stays the option's value.
func (c *cmdline) noteValue(w word) {
	if w.dyn && w.split {
		c.dyn, c.flagLike = true, true
	}
}

// optionMatches reports whether a parsed option name means the listed option
// want. GNU getopt_long accepts any unambiguous prefix of a long option, down
// to one letter (`rm --r` is `rm --recursive` and `sort --o=F` is
// `sort --output=F`, because no other option of theirs starts that way), so
// any prefix of want counts as want: an ambiguous prefix only makes the
// program refuse to run. A want containing '*' is a glob over option names
// (`--*command*`, `-ba*`), for programs that accept families of options.
func optionMatches(have, want string) bool {
	if have == want {
		return true
	}
	if strings.IndexByte(want, '*') >= 0 {
		return glob(want, have)
	}
	return len(have) >= 3 && strings.HasPrefix(have, "--") && strings.HasPrefix(want, have)
}

// shortOpts holds "-a", "-b", ... for every byte, so splitting an option
// cluster does not allocate. It is an immutable table, not state.
var shortOpts = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{'-', byte(i)})
	}
	return t
}()
