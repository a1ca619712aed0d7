package checks

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/attr"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// SlugPrefix starts every check entity's slug.
const SlugPrefix = "check:"

// Config keys, per kind; see the package documentation for which kind uses which.
const (
	KeyScript        = "script"
	KeyArgs          = "args"
	KeyOS            = "os"
	KeyURL           = "url"
	KeyExpectStatus  = "expect_status"
	KeyBodyMatch     = "body_match"
	KeyHeaders       = "headers"
	KeyHost          = "host"
	KeyPort          = "port"
	KeyPath          = "path"
	KeyMaxAgeMinutes = "max_age_minutes"
	KeyHolder        = "holder"
	KeyVMID          = "vmid"
	KeyGuestKind     = "guest_kind"
	// KeyExpectedStatus is "stopped" for a guest meant to be stopped (S11); absent otherwise.
	KeyExpectedStatus = "expected_status"
)

// Values of the os and guest_kind config keys.
const (
	OSLinux  = "linux"
	OSDarwin = "darwin"
	GuestLXC = "lxc"
	GuestVM  = "vm"
)

// Defaults for values an entity does not set.
const (
	// DefaultExpectStatus is the HTTP status an http check expects.
	DefaultExpectStatus = 200
	// DefaultMaxAgeMinutes is 26 hours: a daily backup plus two hours of slack, so a
	// backup that runs a little late is not reported as stale.
	DefaultMaxAgeMinutes = 1560
)

// Lifecycle states in which an entity gets no checks: it is gone or on its way out, and
// probing it would only produce downs nobody needs to act on.
const (
	StateDestroyed  = "destroyed"
	StateDeprecated = "deprecated"
	// StatePlanned and StateProvisioning are entities that do not exist on the fleet yet.
	StatePlanned      = "planned"
	StateProvisioning = "provisioning"
)

// Entity attributes derivation reads.
const (
	attrMonitoring    = "monitoring"
	attrCheckInterval = "check_interval"
	attrUnit          = "unit"
	attrOS            = "os"
	attrURL           = "url"
	attrPublicHost    = "public_host"
	attrExpectStatus  = "expect_status"
	attrBodyMatch     = "body_match"
	attrHTTPHeaders   = "http_headers"
	attrHostAddress   = "host_address"
	attrHost          = "host"
	attrPort          = "port"
	attrPath          = "path"
	attrMaxAge        = "max_age_minutes"
	attrVMID          = "vmid"
	attrGuestAgent    = "qemu_guest_agent"
)

// HolderAttributes are the attributes of a backup holder (what Lookup.BackupHolder returned)
// that Derive reads: a change to one of them changes the checks derived for every backup
// target that holder holds, so whoever changes them must re-derive those targets as well.
// Of any other entity a Lookup returns (a guest's Proxmox host), Derive reads the slug
// only, which no attribute change can alter. TestLookedUpEntitiesReadOnly holds Derive to
// this.
var HolderAttributes = []string{attrOS}

// addressAttrs is the machine address preference (S2): public first, so a VPS reachable
// only by its public address is probeable from the scheduler; lan last.
var addressAttrs = []string{"public_ipv4", "mesh_ipv4", "lan_ipv4"}

// Target is the entity checks are derived for.
type Target struct {
	ID, Slug, Type, Name, State string
	// Attributes are the entity's attributes as stored (JSON shapes: float64 numbers and
	// []any lists are accepted as well as Go ints and slices).
	Attributes map[string]any
}

// Lookup answers the graph questions derivation needs. The caller implements it over the
// store; a failed read should be logged by the caller and reported as not found, which
// derivation records as a skip with a reason.
type Lookup interface {
	// HostOf returns the Proxmox host that owns guest t: its `host` attribute (a name or
	// a full slug), else the source of a hosts edge into it.
	HostOf(t Target) (Target, bool)
	// BackupHolder returns the machine holding backup target t: the source of a
	// backs-up-to edge into it.
	BackupHolder(t Target) (Target, bool)
}

// Def is one derived check definition.
type Def struct {
	// Slug is "check:" + Name.
	Slug string
	// Name is the check entity's name, "<target type>.<target name>.<kind>[.<script>]".
	Name string
	// Kind is one of the ontology.Kind* constants.
	Kind string
	// Config is what the runner reads; see the package documentation.
	Config map[string]any
	// Interval between runs and Timeout of one run (never longer than Interval).
	Interval, Timeout time.Duration
}

// Skip is a check the entity would warrant but did not get, and why.
type Skip struct {
	Kind, Script, Reason string
}

// Result is what Derive found for one entity.
type Result struct {
	// Defs are the checks to keep, sorted by slug. Checks of the target not in Defs are
	// to be disabled by the caller.
	Defs []Def
	// Skipped lists every spec not derived, sorted by kind then script.
	Skipped []Skip
	// MonitoringNone is true when the type or the entity declares that it needs no
	// monitoring, so the entity is never a coverage gap.
	MonitoringNone bool
	// Warnings describe malformed monitoring overrides or lookups that were ignored.
	// The caller logs them (S8) so a broken configuration is distinguishable from an
	// entity that legitimately has no checks.
	Warnings []string
}

// Derive computes the check definitions for t (docs/behaviours.md S1). It never fails: anything
// that prevents a check is recorded in Result.Skipped or Result.Warnings. A nil Lookup
// behaves as one that finds nothing.
func Derive(t Target, o *ontology.Ontology, l Lookup) Result {
	p := plan(t, o)
	r := Result{MonitoringNone: p.none, Warnings: p.warnings}
	for _, s := range p.specs {
		if s.skip != "" {
			r.Skipped = append(r.Skipped, Skip{Kind: s.spec.Kind, Script: s.spec.Script, Reason: s.skip})
			continue
		}
		cfg, reason := buildConfig(t, o, l, s.spec)
		if reason != "" {
			r.Skipped = append(r.Skipped, Skip{Kind: s.spec.Kind, Script: s.spec.Script, Reason: reason})
			continue
		}
		name := CheckName(t, s.spec.Kind, s.spec.Script)
		r.Defs = append(r.Defs, Def{
			Slug:     SlugPrefix + name,
			Name:     name,
			Kind:     s.spec.Kind,
			Config:   cfg,
			Interval: s.spec.Interval,
			Timeout:  s.spec.Timeout,
		})
	}
	sort.Slice(r.Defs, func(i, j int) bool { return r.Defs[i].Slug < r.Defs[j].Slug })
	sort.Slice(r.Skipped, func(i, j int) bool {
		if r.Skipped[i].Kind != r.Skipped[j].Kind {
			return r.Skipped[i].Kind < r.Skipped[j].Kind
		}
		return r.Skipped[i].Script < r.Skipped[j].Script
	})
	return r
}

// CheckName is the check entity name for a check of kind (and script) on t. It is the
// whole type and name, never shortened, so distinct targets never share a check.
func CheckName(t Target, kind, script string) string {
	name := t.Type + "." + targetName(t) + "." + kind
	if script != "" {
		name += "." + script
	}
	return name
}

// targetName is t.Name, or the part of its slug after the type when the name is empty.
func targetName(t Target) string {
	if t.Name != "" {
		return t.Name
	}
	if _, n, ok := strings.Cut(t.Slug, ":"); ok {
		return n
	}
	return t.Slug
}

// slugOf is t's slug, built from type and name when the caller left it empty.
func slugOf(t Target) string {
	if t.Slug != "" {
		return t.Slug
	}
	return t.Type + ":" + t.Name
}

func buildConfig(t Target, o *ontology.Ontology, l Lookup, s ontology.MonitoringSpec) (map[string]any, string) {
	switch s.Kind {
	case ontology.KindSSHScript:
		return sshScriptConfig(t, o, l, s)
	case ontology.KindHTTP:
		return httpConfig(t)
	case ontology.KindTCP:
		return tcpConfig(t, o)
	case ontology.KindBackupFreshness:
		return backupConfig(t, l)
	case ontology.KindProxmoxGuest:
		return proxmoxGuestConfig(t, o, l)
	default:
		return nil, fmt.Sprintf("unknown monitoring kind %q", s.Kind)
	}
}

func sshScriptConfig(t Target, o *ontology.Ontology, l Lookup, s ontology.MonitoringSpec) (map[string]any, string) {
	args := append([]string{}, s.Args...)
	if s.Script == ontology.ScriptProcess {
		// The original runner never passed the unit, so every process check ran without
		// its argument and reported unknown. No unit, no check.
		if unit := attrString(t.Attributes[attrUnit]); unit != "" {
			args = []string{unit}
		} else if len(args) == 0 {
			return nil, "process check needs the unit to look for: the entity has no `unit` attribute"
		}
	}
	// A guest is probed through its Proxmox host (S2); without one there is no way in.
	if kind := guestKind(o, t.Type); kind != "" {
		if kind == GuestVM && !attr.True(t.Attributes[attrGuestAgent]) {
			return nil, "vm has no QEMU guest agent (attribute qemu_guest_agent is not true), so qm guest exec cannot run the probe"
		}
		if _, ok := hostOf(t, l); !ok {
			return nil, noHostReason
		}
	}
	osName, reason := osOf(t)
	if reason != "" {
		return nil, reason
	}
	return map[string]any{KeyScript: s.Script, KeyArgs: args, KeyOS: osName}, ""
}

const noHostReason = "no owning Proxmox host: no `host` attribute and no hosts edge from a proxmox-host"

func httpConfig(t Target) (map[string]any, string) {
	var target string
	if u := attrString(t.Attributes[attrURL]); u != "" {
		parsed, err := url.Parse(u)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return nil, fmt.Sprintf("`url` %q is not an absolute http(s) URL", u)
		}
		target = u
	} else if h := attrString(t.Attributes[attrPublicHost]); h != "" {
		if strings.ContainsAny(h, "/ \t:?#@") {
			return nil, fmt.Sprintf("`public_host` %q is not a bare host name", h)
		}
		target = "https://" + h + "/"
	} else {
		return nil, "http check needs a `url` or `public_host` attribute; the entity has neither"
	}
	status := DefaultExpectStatus
	if raw, ok := t.Attributes[attrExpectStatus]; ok && raw != nil {
		n, err := attr.Int(raw)
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Sprintf("`expect_status` %v is not an HTTP status code", raw)
		}
		status = n
	}
	cfg := map[string]any{KeyURL: target, KeyExpectStatus: status}
	if m := attrString(t.Attributes[attrBodyMatch]); m != "" {
		cfg[KeyBodyMatch] = m
	}
	if raw, ok := t.Attributes[attrHTTPHeaders]; ok && raw != nil {
		lines, reason := HeaderLines(raw)
		if reason != "" {
			return nil, reason
		}
		if len(lines) > 0 {
			cfg[KeyHeaders] = lines
		}
	}
	return cfg, ""
}

func tcpConfig(t Target, o *ontology.Ontology) (map[string]any, string) {
	candidates := []string{attrHostAddress}
	// On a guest `host` names its Proxmox host, not an address to connect to.
	if guestKind(o, t.Type) == "" {
		candidates = append(candidates, attrHost)
	}
	candidates = append(candidates, addressAttrs...)
	var host string
	for _, k := range candidates {
		if v := attrString(t.Attributes[k]); v != "" {
			host = v
			break
		}
	}
	if host == "" {
		return nil, "tcp check needs an address: none of " + strings.Join(candidates, ", ") + " is set"
	}
	raw, ok := t.Attributes[attrPort]
	if !ok || raw == nil {
		return nil, "tcp check needs a `port` attribute"
	}
	port, err := attr.Int(raw)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Sprintf("`port` %v is not a port number", raw)
	}
	return map[string]any{KeyHost: host, KeyPort: port}, ""
}

func backupConfig(t Target, l Lookup) (map[string]any, string) {
	path := attrString(t.Attributes[attrPath])
	if path == "" {
		return nil, "backup-freshness check needs a `path` attribute"
	}
	maxAge := DefaultMaxAgeMinutes
	if raw, ok := t.Attributes[attrMaxAge]; ok && raw != nil {
		n, err := attr.Int(raw)
		if err != nil || n <= 0 {
			return nil, fmt.Sprintf("`max_age_minutes` %v is not a positive integer", raw)
		}
		maxAge = n
	}
	if l == nil {
		return nil, noHolderReason
	}
	holder, ok := l.BackupHolder(t)
	if !ok || (holder.Slug == "" && holder.Name == "") {
		return nil, noHolderReason
	}
	osName, reason := osOf(holder)
	if reason != "" {
		return nil, "holder " + slugOf(holder) + ": " + reason
	}
	return map[string]any{KeyPath: path, KeyMaxAgeMinutes: maxAge, KeyHolder: slugOf(holder), KeyOS: osName}, ""
}

const noHolderReason = "no machine holds this backup target: no backs-up-to edge into it"

func proxmoxGuestConfig(t Target, o *ontology.Ontology, l Lookup) (map[string]any, string) {
	kind := guestKind(o, t.Type)
	if kind == "" {
		return nil, fmt.Sprintf("type %q is neither an lxc nor a vm, so Proxmox has no status for it", t.Type)
	}
	raw := t.Attributes[attrVMID]
	vmid, err := attr.Int(raw)
	if raw == nil {
		return nil, "proxmox-guest check needs a `vmid` attribute"
	}
	if err != nil || vmid <= 0 {
		return nil, fmt.Sprintf("`vmid` %v is not a positive integer", raw)
	}
	host, ok := hostOf(t, l)
	if !ok {
		return nil, noHostReason
	}
	cfg := map[string]any{KeyVMID: vmid, KeyGuestKind: kind, KeyHost: slugOf(host)}
	if s, _ := t.Attributes[KeyExpectedStatus].(string); strings.EqualFold(strings.TrimSpace(s), "stopped") {
		cfg[KeyExpectedStatus] = "stopped"
	}
	return cfg, ""
}

func hostOf(t Target, l Lookup) (Target, bool) {
	if l == nil {
		return Target{}, false
	}
	h, ok := l.HostOf(t)
	if !ok || (h.Slug == "" && h.Name == "") {
		return Target{}, false
	}
	return h, true
}

// guestKind is lxc or vm when typ is (a subtype of) one, else "".
func guestKind(o *ontology.Ontology, typ string) string {
	switch {
	case typ == GuestLXC || (o != nil && o.IsA(typ, GuestLXC)):
		return GuestLXC
	case typ == GuestVM || (o != nil && o.IsA(typ, GuestVM)):
		return GuestVM
	default:
		return ""
	}
}

// osOf reads the os attribute; probes branch on it, so an unknown value is refused rather
// than guessed.
func osOf(t Target) (string, string) {
	raw, ok := t.Attributes[attrOS]
	if !ok || raw == nil {
		return OSLinux, ""
	}
	s := strings.ToLower(attrString(raw))
	switch s {
	case "":
		return OSLinux, ""
	case OSLinux, OSDarwin:
		return s, ""
	default:
		return "", fmt.Sprintf("`os` %v is not linux or darwin", raw)
	}
}
