package policy

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"github.com/oikos-hq/oikos/shared/policy/internal/wrappers"
)

// Tests for the mechanisms added by the security review: option
// abbreviations, the guesses that may only escalate, per-shell function and
// variable tracking, and the small parsers of wrappers. The corpus holds the
// end-to-end cases; these pin down the parts whose reasons matter.

func TestRuleKnowsItsOwnOptionNames(t *testing.T) {
	t.Parallel()
	// --list is tar's own option, not an abbreviation of the denied
	// --listed-incremental; --listed is.
	p := Default()
	for cmd, want := range map[string]Class{
		"tar --list -f backup.tar":                 ReadOnly,
		"tar --list --listed=snap -f backup.tar":   ConfigMutation,
		"tar --list --listed-incremental=s -f b.t": ConfigMutation,
	} {
		if got := p.Classify(cmd, "").Class; got != want {
			t.Errorf("Classify(%q) = %s, want %s", cmd, got, want)
		}
	}
}

func TestGuessesOnlyEscalate(t *testing.T) {
	t.Parallel()
	p := Default()
	tests := []struct {
		cmd    string
		class  Class
		reason string
	}{
		// A guess that finds a destructive command keeps it …
		{`python3 -c 'import shutil, os; os.system("rm -rf /srv")'`, Destructive, "inside `python3` argument"},
		{`/???/rm -rf /srv`, Destructive, "inside the glob /???/rm"},
		{`x=rm; $x -rf /srv`, Destructive, "inside the expansion $x"},
		// … but a guess that does not parse, or finds nothing destructive,
		// adds nothing: the command keeps the class its rules give.
		{`python3 -c 'print("it is rm -rf (not really")'`, ConfigMutation, "no rule makes `python3` read-only"},
		{`git commit -m 'tidy up the cron job'`, ConfigMutation, "no rule makes `git` read-only"},
		{`x=ls; $x /srv`, ConfigMutation, "only known at run time"},
		{`/bin/c?t /etc/hosts`, ConfigMutation, "only known at run time"},
	}
	for _, tt := range tests {
		r := p.Classify(tt.cmd, "")
		if r.Class != tt.class || !strings.Contains(strings.Join(r.Reasons, "|"), tt.reason) {
			t.Errorf("Classify(%q) = %s %q, want %s with %q", tt.cmd, r.Class, r.Reasons, tt.class, tt.reason)
		}
	}
}

func TestUnverifiedFindingsAreNotKeptByGuesses(t *testing.T) {
	t.Parallel()
	p := Default()
	c := p.getClassifier()
	defer p.putClassifier(c)
	c.segs = c.segs[:0]
	c.top.Reset()
	f := &walk.Frame{Src: "", Sh: &c.top}
	// Text that does not parse yields an unverified destructive segment;
	// KeepDestructive must drop it.
	kept := c.KeepDestructive(func() { c.NestedCode(shellword.Word{Val: "echo 'unterminated", Dyn: true}, f, walk.Stdin{}, "test") })
	if kept || len(c.segs) != 0 {
		t.Fatalf("keepDestructive kept an unverified finding: %+v", c.segs)
	}
	kept = c.KeepDestructive(func() { c.NestedCode(shellword.Word{Val: "rm -rf /srv", Dyn: true}, f, walk.Stdin{}, "test") })
	if !kept || len(c.segs) == 0 {
		t.Fatalf("keepDestructive dropped a verified destructive finding")
	}
}

func TestFunctionsShadowProgramsOnlyWhenCertainlyDefined(t *testing.T) {
	t.Parallel()
	p := Default()
	tests := []struct {
		cmd   string
		class Class
	}{
		{"reboot() { uptime; }; reboot", ReadOnly},
		{"if false; then reboot() { :; }; fi; reboot", Destructive},
		{"false && reboot() { :; }; reboot", Destructive},
		{"reboot() { :; } & reboot", Destructive},
		{"(reboot() { :; }); reboot", Destructive},
		{"bash -c 'reboot() { :; }'; reboot", Destructive},
		{"reboot() { :; }; unset -f reboot; reboot", Destructive},
		{"reboot() { :; }; unset reboot; reboot", Destructive},
		{`reboot() { :; }; unset "$f"; reboot`, Destructive},
		{"reboot; reboot() { :; }", Destructive},
		{"reboot() { :; }; sudo reboot", Destructive},
		{"reboot() { :; }; eval reboot", Destructive},
	}
	for _, tt := range tests {
		if got := p.Classify(tt.cmd, "").Class; got != tt.class {
			t.Errorf("Classify(%q) = %s, want %s", tt.cmd, got, tt.class)
		}
	}
}

func TestArithmeticOnValuesTheCommandSets(t *testing.T) {
	t.Parallel()
	// bash evaluates a subscript found in a variable's value when the
	// variable is used in arithmetic, so text the command chose can run.
	p := Default()
	tests := []struct {
		cmd   string
		class Class
	}{
		{"x=$(cat /tmp/v); echo $((x))", ConfigMutation},
		{"x=$(cat /tmp/v); [[ $x -eq 1 ]]", ConfigMutation},
		{"x=$(cat /tmp/v); [[ x -lt 1 ]]", ConfigMutation},
		{"x=$(cat /tmp/v); echo ${!x}", ConfigMutation},
		{"x=$(cat /tmp/v); declare -n r=$x; echo $r", ConfigMutation},
		{"x=$(cat /tmp/v); declare -i y; y=x", ConfigMutation},
		{`x=$(cat /tmp/v); test -v "a[$x]"`, ConfigMutation},
		{`x=$(cat /tmp/v); printf -v "a[$x]" %s 1`, ConfigMutation},
		{"read -r n < /tmp/n; echo $((n+1))", ConfigMutation},
		{"bash -c 'echo $(($1))' _ 'a[0]'", ConfigMutation},
		{"a='$('; b='id)'; (( c[$a$b] ))", ConfigMutation},
		{"x=$(printf 'a[$(rm -rf /srv)]'); echo $((x))", Destructive},
		// Literals, numbers and counts are fine.
		{"x=5; echo $((x*2))", ReadOnly},
		{"x=$((3+4)); echo $((x*2))", ReadOnly},
		{"n=$(wc -l < /etc/hosts); echo $((n+1))", ReadOnly},
		{"for i in 1 2 3; do echo $((i*2)); done", ReadOnly},
		{"for i in $(seq 1 3); do echo $((i*2)); done", ReadOnly},
		{"echo $((RANDOM % 6))", ReadOnly},
		{"x=$(cat /tmp/v); echo $x", ReadOnly},
	}
	for _, tt := range tests {
		if got := p.Classify(tt.cmd, "").Class; got != tt.class {
			t.Errorf("Classify(%q) = %s, want %s", tt.cmd, got, tt.class)
		}
	}
}

func TestSubstituteKnown(t *testing.T) {
	t.Parallel()
	sh := &walk.Shell{}
	sh.SetLit("x", "rm")
	tests := []struct{ in, out string }{
		{"$x -rf /srv", "rm -rf /srv"},
		{"${x} -rf /srv", "rm -rf /srv"},
		{"rm${IFS}-rf${IFS}/srv", "rm -rf /srv"},
		{"$0 -c 'id'", "sh -c 'id'"},
		{"$(echo rm) -rf /srv", "rm -rf /srv"},
		{"`printf rm` -rf /srv", "rm -rf /srv"},
		{"$y -rf /srv", "$y -rf /srv"},
		{"${y:-rm} -rf /srv", "rm -rf /srv"},
		{"${x:-ls} -rf /srv", "rm -rf /srv"},
		{"plain text", "plain text"},
	}
	for _, tt := range tests {
		if got := substituteKnown(tt.in, sh); got != tt.out {
			t.Errorf("substituteKnown(%q) = %q, want %q", tt.in, got, tt.out)
		}
	}
}

func TestWrapperNamesAreWrappers(t *testing.T) {
	t.Parallel()
	for _, n := range wrappers.Names {
		if !wrappers.IsWrapper(n) {
			t.Errorf("%q is listed in wrapperNames but isWrapper says no", n)
		}
	}
	if !Default().rules.IsTrigger("rm") || Default().rules.HintRE == nil {
		t.Fatal("the default policy builds no hints")
	}
}
