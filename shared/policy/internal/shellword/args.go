package shellword

import "strings"

// Grammar describes how one program lays out its command line: which options
// take the next word as their value, at which subcommand level. It is what lets
// the classifier tell `docker compose -f x.yml ps` (ps is the subcommand) from
// `docker logs -f web` (-f takes no value). A value option the grammar does not
// know makes its value look like a positional word; every rule treats an
// unexpected positional word conservatively, so a gap in a grammar costs
// precision, never safety.
type Grammar struct {
	// words: options are whole words (find -name, ip -br, openssl -in) rather
	// than clusters of single letters.
	Words bool
	// levels maps a subcommand path ("" for the program itself, "compose",
	// "compose logs") to the options that take a value at that level.
	Levels map[string]map[string]bool
}

// Option is one parsed option. Long options keep their "--" prefix and short
// ones their "-", so rules name options exactly as a person types them.
type Option struct {
	Name     string
	Value    string
	HasValue bool
	ValueDyn bool
}

// Cmdline is a command's arguments after the program, split into options and
// positional words by the program's grammar.
type Cmdline struct {
	Opts []Option
	Pos  []Word
	// dyn: some argument is only known at run time (an expansion). It may
	// become any number of words, options included.
	Dyn bool
	// FlagLike: some argument that could turn out to be an option is only known
	// at run time (an expansion, or a glob with no literal prefix).
	FlagLike bool
	// EndOpts: the line holds `--`, which ends the options.
	EndOpts bool
}

func (c *Cmdline) reset() {
	c.Opts = c.Opts[:0]
	c.Pos = c.Pos[:0]
	c.Dyn, c.FlagLike, c.EndOpts = false, false, false
}

// Parse splits args (the words after the program name) by the grammar g,
// which may be nil (GNU-style options, none taking a value).
func (g *Grammar) Parse(args []Word, c *Cmdline) {
	c.reset()
	level := ""
	var values map[string]bool
	if g != nil {
		values = g.Levels[""]
	}
	endOpts := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.Dyn {
			// `--post-data="$(env)"`: one word (its expansion is quoted)
			// whose known part names a long option: that option, with a
			// value only known at run time. Anything else may be any
			// number of words, options included.
			if !endOpts && !w.Split && strings.HasPrefix(w.Val, "--") {
				if name, _, ok := strings.Cut(w.Val[:w.Fixed], "="); ok {
					c.Opts = append(c.Opts, Option{Name: name, Value: w.Val[len(name)+1:], HasValue: true, ValueDyn: true})
					continue
				}
			}
			c.Dyn, c.FlagLike = true, true
			c.Pos = append(c.Pos, w)
			continue
		}
		if w.FlagLike {
			c.FlagLike = true
		}
		s := w.Val
		if !endOpts && s == "--" {
			endOpts, c.EndOpts = true, true
			continue
		}
		if endOpts || len(s) < 2 || s[0] != '-' {
			c.Pos = append(c.Pos, w)
			if g != nil && !w.Glob {
				next := s
				if level != "" {
					next = level + " " + s
				}
				if v, ok := g.Levels[next]; ok {
					level, values = next, v
				}
			}
			continue
		}
		// An option.
		if strings.HasPrefix(s, "--") || (g != nil && g.Words) {
			name, val, has := s, "", false
			if strings.HasPrefix(s, "--") {
				name, val, has = strings.Cut(s, "=")
			}
			o := Option{Name: name, Value: val, HasValue: has}
			if !has && values[name] && i+1 < len(args) {
				i++
				o.Value, o.HasValue, o.ValueDyn = args[i].Val, true, args[i].Dyn
				c.noteValue(args[i])
			}
			c.Opts = append(c.Opts, o)
			continue
		}
		if s[1] >= '0' && s[1] <= '9' {
			// -20 (head -20, nice -10): one numeric option, not a cluster.
			c.Opts = append(c.Opts, Option{Name: s})
			continue
		}
		for j := 1; j < len(s); j++ {
			name := ShortOpts[s[j]]
			if values[name] {
				o := Option{Name: name, HasValue: true}
				switch {
				case j+1 < len(s):
					o.Value = s[j+1:]
				case i+1 < len(args):
					i++
					o.Value, o.ValueDyn = args[i].Val, args[i].Dyn
					c.noteValue(args[i])
				default:
					o.HasValue = false
				}
				c.Opts = append(c.Opts, o)
				break
			}
			c.Opts = append(c.Opts, Option{Name: name})
		}
	}
}

// noteValue records that an option's value was only known at run time: an
// unquoted expansion may split into several words, so the whole line is
// uncertain; a quoted one stays the option's value.
func (c *Cmdline) noteValue(w Word) {
	if w.Dyn && w.Split {
		c.Dyn, c.FlagLike = true, true
	}
}

// OptionMatches reports whether a parsed option name means the listed option
// want. GNU getopt_long accepts any unambiguous prefix of a long option, down
// to one letter (`rm --r` is `rm --recursive` and `sort --o=F` is
// `sort --output=F`, because no other option of theirs starts that way), so
// any prefix of want counts as want: an ambiguous prefix only makes the
// program refuse to run. A want containing '*' is a glob over option names
// (`--*command*`, `-ba*`), for programs that accept families of options.
func OptionMatches(have, want string) bool {
	if have == want {
		return true
	}
	if strings.IndexByte(want, '*') >= 0 {
		return glob(want, have)
	}
	return len(have) >= 3 && strings.HasPrefix(have, "--") && strings.HasPrefix(want, have)
}

// ShortOpts holds "-a", "-b", ... for every byte, so splitting an option
// cluster does not allocate. It is an immutable table, not state.
var ShortOpts = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{'-', byte(i)})
	}
	return t
}()
