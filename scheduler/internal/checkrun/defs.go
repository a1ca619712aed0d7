package checkrun

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// checkDef is one enabled row of check_defs with what the runner needs of its target.
type checkDef struct {
	ID         string
	Slug       string
	TargetID   string
	TargetSlug string
	TargetType string
	Kind       string
	Config     map[string]any
	Interval   time.Duration
	Timeout    time.Duration
	// Unit is the lease unit whose holder runs the check ("host:<slug>" or "net").
	Unit string
	// version changes whenever the row does, so a reload can tell what to refresh.
	version string

	spec    any   // probeparse.Spec, probeparse.Guest or one of the *Spec types below, parsed once at load
	specErr error // why the config is unusable (reported as ClassConfig on every run)
}

// Parsed configs of the other kinds (shared/checks documents the keys); ssh-script parses
// into probeparse.Spec and proxmox-guest into probeparse.Guest.
type (
	httpSpec struct {
		URL          string
		ExpectStatus int
		BodyMatch    string
		// Headers are "Name: value" lines; a value may still be `secret:NAME`.
		Headers []string
	}
	tcpSpec struct {
		Host string
		Port int
	}
	backupSpec struct {
		Path          string
		MaxAgeMinutes int
		Holder        string
		OS            string
	}
)

// loadDefs reads every enabled check whose target still exists and is not destroyed.
func loadDefs(ctx context.Context, st *storage.Store) ([]*checkDef, error) {
	rows, err := st.CheckDefs(ctx)
	if err != nil {
		return nil, fmt.Errorf("load check definitions: %w", err)
	}
	defs := make([]*checkDef, 0, len(rows))
	for _, row := range rows {
		d := checkDef{ID: row.ID, Slug: row.Slug, TargetID: row.TargetID, TargetSlug: row.TargetSlug, TargetType: row.TargetType,
			Kind: row.Kind, Unit: row.Unit}
		raw, interval, timeout, updated := row.Config, row.Interval, row.Timeout, row.Updated
		d.Interval = time.Duration(interval) * time.Second
		d.Timeout = time.Duration(timeout) * time.Second
		if d.Timeout > d.Interval {
			d.Timeout = d.Interval
		}
		d.version = fmt.Sprintf("%d/%d/%d/%s/%s", updated.UnixNano(), interval, timeout, d.Unit, raw)
		d.Config = map[string]any{}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&d.Config); err != nil {
			d.specErr = fmt.Errorf("config is not a JSON object: %w", err)
			defs = append(defs, &d)
			continue
		}
		d.spec, d.specErr = parseSpec(d.Kind, d.Config)
		defs = append(defs, &d)
	}
	return defs, nil
}

// parseSpec turns a config into the kind's spec. A missing or malformed key is an error the
// check reports on every run (ClassConfig), never a silent default.
func parseSpec(kind string, c map[string]any) (any, error) {
	switch kind {
	case ontology.KindSSHScript:
		s := probeparse.Spec{Script: str(c, checks.KeyScript), OS: strings.ToLower(str(c, checks.KeyOS))}
		if s.OS == "" {
			s.OS = checks.OSLinux
		}
		if s.OS != checks.OSLinux && s.OS != checks.OSDarwin {
			return nil, fmt.Errorf("config os %q is not linux or darwin", s.OS)
		}
		args, err := checks.StringList(c[checks.KeyArgs])
		if err != nil {
			return nil, fmt.Errorf("config args: %w", err)
		}
		s.Args = args
		if _, ok := probeparse.Lookup(s.Script); !ok {
			return nil, fmt.Errorf("config script %q is not one of cpu, memory, disk, load, process", s.Script)
		}
		if s.Script == ontology.ScriptProcess {
			if len(s.Args) == 0 || strings.TrimSpace(s.Args[0]) == "" {
				return nil, fmt.Errorf("process check has no unit to look for (config args is empty)")
			}
			if strings.HasPrefix(s.Args[0], "-") {
				return nil, fmt.Errorf("process check unit %q starts with '-'", s.Args[0])
			}
		}
		return s, nil
	case ontology.KindHTTP:
		s := httpSpec{URL: str(c, checks.KeyURL), BodyMatch: str(c, checks.KeyBodyMatch), ExpectStatus: checks.DefaultExpectStatus}
		if s.URL == "" {
			return nil, fmt.Errorf("http check has no url")
		}
		if raw, ok := c[checks.KeyHeaders]; ok && raw != nil {
			lines, err := checks.StringList(raw)
			if err != nil {
				return nil, fmt.Errorf("config headers: %w", err)
			}
			for _, l := range lines {
				if _, _, ok := checks.SplitHeader(l); !ok {
					return nil, fmt.Errorf("config headers: %q is not a \"Name: value\" line", l)
				}
			}
			s.Headers = lines
		}
		if v, ok := c[checks.KeyExpectStatus]; ok && v != nil {
			n, err := num(v)
			if err != nil || n < 100 || n > 599 {
				return nil, fmt.Errorf("config expect_status %v is not an HTTP status", v)
			}
			s.ExpectStatus = n
		}
		return s, nil
	case ontology.KindTCP:
		s := tcpSpec{Host: str(c, checks.KeyHost)}
		n, err := num(c[checks.KeyPort])
		if err != nil || n < 1 || n > 65535 || s.Host == "" {
			return nil, fmt.Errorf("tcp check needs host and port (host %q, port %v)", s.Host, c[checks.KeyPort])
		}
		s.Port = n
		return s, nil
	case ontology.KindBackupFreshness:
		s := backupSpec{Path: str(c, checks.KeyPath), Holder: str(c, checks.KeyHolder), OS: str(c, checks.KeyOS)}
		n, err := num(c[checks.KeyMaxAgeMinutes])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("config max_age_minutes %v is not a positive integer", c[checks.KeyMaxAgeMinutes])
		}
		s.MaxAgeMinutes = n
		if s.Path == "" || s.Holder == "" {
			return nil, fmt.Errorf("backup-freshness check needs path and holder (path %q, holder %q)", s.Path, s.Holder)
		}
		return s, nil
	case ontology.KindProxmoxGuest:
		s := probeparse.Guest{Kind: str(c, checks.KeyGuestKind), Host: str(c, checks.KeyHost),
			StoppedOnPurpose: str(c, checks.KeyExpectedStatus) == "stopped"}
		n, err := num(c[checks.KeyVMID])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("config vmid %v is not a positive integer", c[checks.KeyVMID])
		}
		s.VMID = n
		if s.Kind != checks.GuestLXC && s.Kind != checks.GuestVM {
			return nil, fmt.Errorf("config guest_kind %q is not lxc or vm", s.Kind)
		}
		if s.Host == "" {
			return nil, fmt.Errorf("proxmox-guest check has no owning host")
		}
		return s, nil
	default:
		return nil, fmt.Errorf("unknown check kind %q", kind)
	}
}

func str(c map[string]any, k string) string {
	s, _ := c[k].(string)
	return strings.TrimSpace(s)
}

func num(v any) (int, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(x.String(), 10, 32)
		return int(n), err
	case float64:
		if x != math.Trunc(x) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int(x), nil
	case int:
		return x, nil
	case string:
		return strconv.Atoi(strings.TrimSpace(x))
	default:
		return 0, fmt.Errorf("%v is not an integer", v)
	}
}
