package policy

import (
	"testing"

	"github.com/oikos-hq/oikos/shared/policy/internal/policytest"
	"mvdan.cc/sh/v3/syntax"
)

// The principle (docs/policy.md): destructive is what the operator cannot
// take back. These properties hold for every case of the corpora, not only
// the examples written next to the rules.

// wrapCommand returns the ways a command can be run through a wrapper or a
// transport. Each must be classified at least as high as the command itself.
func wrapCommand(t *testing.T, cmd string) []string {
	t.Helper()
	q, err := syntax.Quote(cmd, syntax.LangBash)
	if err != nil {
		t.Fatalf("quote %q: %v", cmd, err)
	}
	// ssh joins its arguments with spaces for the remote shell, so the
	// remote command is quoted once more.
	quote := func(s string) string {
		out, err := syntax.Quote(s, syntax.LangBash)
		if err != nil {
			t.Fatalf("quote %q: %v", s, err)
		}
		return out
	}
	var out []string
	if policytest.SimpleCommand(cmd) {
		// A prefix wrapper runs one program: only a simple command (no
		// list, pipe, assignment or here-document) means the same behind it.
		out = append(out, "sudo "+cmd, "sudo -u root "+cmd, "env LC_ALL=C "+cmd, "timeout 30 "+cmd,
			"nice -n 10 "+cmd, "nohup "+cmd, "sudo -u root env X=1 nice -n 5 "+cmd)
	}
	return append(out,
		"bash -c "+q,
		"sh -c "+q,
		"sudo bash -c "+q,
		"eval "+q,
		"echo "+q+" | sh",
		"bash <<< "+q,
		"ssh atlas "+q,
		"ssh -p 2222 root@atlas "+q,
		"pct exec 101 -- bash -c "+q,
		"qm guest exec 200 -- sh -c "+q,
		"docker exec web sh -c "+q,
		"ssh atlas "+quote("sh -c "+q),
		"ssh atlas "+quote("pct exec 101 -- sh -c "+q),
	)
}

// TestDestructiveSurvivesWrappers: for every destructive case, each wrapper
// and transport keeps it destructive.
func TestDestructiveSurvivesWrappers(t *testing.T) {
	t.Parallel()
	p := Default()
	n := 0
	for _, tc := range loadCorpus(t) {
		if tc.Class != Destructive || tc.Declared != "" {
			continue
		}
		if got := p.Classify(tc.Command, "").Class; got != Destructive {
			continue // TestCorpus reports it
		}
		for _, w := range wrapCommand(t, tc.Command) {
			n++
			if got := p.Classify(w, ""); got.Class != Destructive {
				t.Errorf("Classify(%q) = %s, want destructive (the unwrapped command is)\n  reasons: %q", w, got.Class, got.Reasons)
			}
		}
	}
	t.Logf("%d wrapped destructive commands", n)
}

// dryRuns pairs each dry run with the same command without its dry-run flag:
// the dry run is read_only, and taking the flag away raises it.
var dryRuns = []struct{ dry, wet string }{
	{"rsync -n --delete a/ b/", "rsync --delete a/ b/"},
	{"rsync --dry-run -a --delete a/ b/", "rsync -a --delete a/ b/"},
	{"rsync -avn --delete src/ dst/", "rsync -av --delete src/ dst/"},
	{"zfs destroy -n tank/x", "zfs destroy tank/x"},
	{"zfs destroy -rnv tank/old", "zfs destroy -rv tank/old"},
	{"mkfs.ext4 -n /dev/sdb1", "mkfs.ext4 /dev/sdb1"},
	{"mke2fs -n /dev/sdb1", "mke2fs /dev/sdb1"},
	{"mkfs -t ext4 -n /dev/sdb1", "mkfs -t ext4 /dev/sdb1"},
	{"mkfs.xfs -N /dev/sdb1", "mkfs.xfs /dev/sdb1"},
	{"wipefs -n -a /dev/sdb", "wipefs -a /dev/sdb"},
	{"wipefs --no-act --all /dev/sdc", "wipefs --all /dev/sdc"},
	{"apt-get -s purge nginx", "apt-get purge nginx"},
	{"apt-get --dry-run remove openssh-server", "apt-get remove openssh-server"},
	{"kubectl delete pod x --dry-run=client", "kubectl delete pod x"},
	{"kubectl delete --dry-run=server ns staging", "kubectl delete ns staging"},
	{"helm uninstall web --dry-run", "helm uninstall web"},
	{"terraform plan -destroy", "terraform apply -destroy"},
	{"git clean -n -d", "git clean -f -d"},
	{"git clean -nfdx", "git clean -fdx"},
	{"git push --dry-run --force origin main", "git push --force origin main"},
	{"git push -n origin +main", "git push origin +main"},
	{"restic forget --dry-run --keep-last 3", "restic forget --keep-last 3"},
	{"pvesm prune-backups local --dry-run --keep-last 3", "pvesm prune-backups local --keep-last 3"},
	{"lvremove --test pve/vm-101-disk-0", "lvremove pve/vm-101-disk-0"},
	{"zpool upgrade", "zpool upgrade tank"},
	{"psql -c 'SELECT count(*) FROM sessions'", "psql -c 'DELETE FROM sessions'"},
	{"rm --help", "rm /srv/x"},
	{"git reset --help", "git reset --hard"},
	{"qm stop --help", "qm stop 100"},
}

func TestDryRunsAreReadOnlyAndTheirFlagsMatter(t *testing.T) {
	t.Parallel()
	p := Default()
	for _, d := range dryRuns {
		if got := p.Classify(d.dry, ""); got.Class != ReadOnly {
			t.Errorf("Classify(%q) = %s, want read_only\n  reasons: %q", d.dry, got.Class, got.Reasons)
		}
		if got := p.Classify(d.wet, ""); got.Class != Destructive {
			t.Errorf("without its dry-run flag, Classify(%q) = %s, want destructive\n  reasons: %q", d.wet, got.Class, got.Reasons)
		}
		for _, w := range wrapCommand(t, d.dry) {
			if got := p.Classify(w, ""); got.Class.Rank() > ConfigMutation.Rank() {
				t.Errorf("Classify(%q) = %s: a wrapped dry run must not be destructive", w, got.Class)
			}
		}
	}
}
