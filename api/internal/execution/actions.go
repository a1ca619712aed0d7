package execution

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/shared/actions"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/remote"
)

// The actions an execution may carry. "run" is a free-form shell command; the others are the
// typed actions of docs/behaviours.md X9. Every one of them goes through the same gate: the
// original system let restart, pct_exec and systemctl skip the classifier, and a restart of
// the fleet's reverse proxy ran with no approval at all.
const (
	ActionRun        = "run"
	ActionPctCreate  = "pct_create"
	ActionAptUpgrade = "apt_upgrade"
	ActionRestart    = "restart"
	ActionSystemctl  = "systemctl"
	ActionPctExec    = "pct_exec"
	ActionDockerExec = "docker_exec"
)

// TypedActions lists the typed actions POST /executions/actions accepts.
func TypedActions() []string {
	return []string{ActionPctCreate, ActionAptUpgrade, ActionRestart, ActionSystemctl, ActionPctExec, ActionDockerExec}
}

// maxCommandBytes bounds a command; anything longer is a mistake or an attack, never a
// command a person would review.
const maxCommandBytes = 64 << 10

// actionFloor is the lowest class a typed action may have whatever the classifier says of the
// command it synthesises: a typed action that changes a machine must never run unattended
// because a rule list missed it. (The classifier only escalates from here.)
var actionFloor = map[string]policy.Class{
	ActionPctCreate:  policy.ConfigMutation,
	ActionAptUpgrade: policy.ConfigMutation,
	ActionRestart:    policy.ConfigMutation,
}

// Normalised is a typed action after validation: its canonical params (what is stored and
// what the scheduler reads) and the command it is classified and shown as. For every action
// but pct_create that command is exactly what runs on the target; pct_create's is what the
// scheduler runs on the Proxmox host once it has picked the template.
type Normalised struct {
	Action  string
	Params  map[string]any
	Command string
	// Floor is the minimum risk class of the action ("" for none).
	Floor policy.Class
}

// paramSet holds the raw params of a request while they are read one by one, so that an
// unknown key and a wrongly typed value are both reported with the field named.
type paramSet struct {
	action string
	raw    map[string]json.RawMessage
	seen   map[string]bool
}

func newParamSet(action string, data json.RawMessage) (*paramSet, error) {
	p := &paramSet{action: action, raw: map[string]json.RawMessage{}, seen: map[string]bool{}}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return p, nil
	}
	if data[0] != '{' {
		return nil, apierr.Invalid("params", "must be a JSON object")
	}
	if err := json.Unmarshal(data, &p.raw); err != nil {
		return nil, apierr.Invalid("params", "must be a JSON object: %v", err)
	}
	return p, nil
}

// get returns a param's raw value, treating JSON null as absent.
func (p *paramSet) get(name string) (json.RawMessage, bool) {
	p.seen[name] = true
	v, ok := p.raw[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

// done refuses any param the action does not know: a typo such as "privilidged" must not be
// silently ignored and the container created privileged-by-default or not as the caller meant.
func (p *paramSet) done() error {
	var unknown []string
	for k := range p.raw {
		if !p.seen[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	known := make([]string, 0, len(p.seen))
	for k := range p.seen {
		known = append(known, k)
	}
	sort.Strings(known)
	reason := fmt.Sprintf("unknown parameter for %s", p.action)
	if len(known) > 0 {
		reason += "; it takes " + strings.Join(known, ", ")
	} else {
		reason += "; it takes none"
	}
	return apierr.Invalid("params."+unknown[0], "%s", reason)
}

func (p *paramSet) str(name string, required bool, def string, re *regexp.Regexp, what string) (string, error) {
	v, ok := p.get(name)
	if !ok {
		if required {
			return "", apierr.Invalid("params."+name, "is required (%s)", what)
		}
		return def, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", apierr.Invalid("params."+name, "want a string (%s), got %s", what, describeJSON(v))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		if required {
			return "", apierr.Invalid("params."+name, "is required (%s)", what)
		}
		return def, nil
	}
	if re != nil && !re.MatchString(s) {
		return "", apierr.Invalid("params."+name, "%q is not %s", s, what)
	}
	return s, nil
}

// integer reads an integer param given as a JSON number or as a string of digits (models
// often quote numbers).
func (p *paramSet) integer(name string, required bool, def, lo, hi int) (int, error) {
	v, ok := p.get(name)
	if !ok {
		if required {
			return 0, apierr.Invalid("params."+name, "is required (an integer from %d to %d)", lo, hi)
		}
		return def, nil
	}
	n, err := flexInt(v)
	if err != nil {
		return 0, apierr.Invalid("params."+name, "%v", err)
	}
	if n < lo || n > hi {
		return 0, apierr.Invalid("params."+name, "%d is out of range (%d to %d)", n, lo, hi)
	}
	return n, nil
}

func (p *paramSet) boolean(name string, def bool) (bool, error) {
	v, ok := p.get(name)
	if !ok {
		return def, nil
	}
	b, err := FlexBool(v)
	if err != nil {
		return false, apierr.Invalid("params."+name, "%v", err)
	}
	return b, nil
}

// FlexBool reads a boolean the way language models write one: true/false, 0/1, or those as
// strings. The original pct_create failed in production because `"privileged": 0` did not fit
// a strict bool field and the container was silently never created. Anything else is an error
// that shows the value received.
func FlexBool(v json.RawMessage) (bool, error) {
	v = bytes.TrimSpace(v)
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return b, nil
	}
	var num json.Number
	if err := json.Unmarshal(v, &num); err == nil && len(v) > 0 && v[0] != '"' {
		switch num.String() {
		case "0", "0.0":
			return false, nil
		case "1", "1.0":
			return true, nil
		}
		return false, fmt.Errorf("want true, false, 0 or 1, got %s", num.String())
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return false, fmt.Errorf("want true, false, 0 or 1, got %q", s)
	}
	return false, fmt.Errorf("want true, false, 0 or 1, got %s", describeJSON(v))
}

func flexInt(v json.RawMessage) (int, error) {
	v = bytes.TrimSpace(v)
	var num json.Number
	if len(v) > 0 && v[0] != '"' {
		if err := json.Unmarshal(v, &num); err != nil {
			return 0, fmt.Errorf("want an integer, got %s", describeJSON(v))
		}
	} else {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, fmt.Errorf("want an integer, got %s", describeJSON(v))
		}
		num = json.Number(strings.TrimSpace(s))
	}
	if n, err := strconv.ParseInt(num.String(), 10, 64); err == nil && n >= math.MinInt32 && n <= math.MaxInt32 {
		return int(n), nil
	}
	f, err := strconv.ParseFloat(num.String(), 64)
	if err == nil && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 {
		return int(f), nil
	}
	return 0, fmt.Errorf("want an integer, got %s", describeJSON(v))
}

// describeJSON names a JSON value for an error message without echoing a huge one.
func describeJSON(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	if s == "" {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return s
}

var (
	hostnameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	storageRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	bridgeRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
	templateRE  = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*:vztmpl/)?[A-Za-z0-9][A-Za-z0-9_.+~-]{0,200}$`)
	unitRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9@._:+\\-]{0,250}$`)
	containerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

// Proxmox accepts VMIDs from 100 to 999999999.
const (
	minVMID = 100
	maxVMID = 999999999
)

// quoteWord quotes one shell word for the synthesised command exactly as the scheduler's
// host-hop quotes it. Validated params never need it; commands carried inside pct_exec and
// docker_exec do.
func quoteWord(s string) (string, error) { return remote.QuoteArg(s) }

// NormaliseAction validates a typed action's params and synthesises the command it is
// classified and shown as. Errors are *FieldError naming the param at fault.
func NormaliseAction(action string, params json.RawMessage) (Normalised, error) {
	p, err := newParamSet(action, params)
	if err != nil {
		return Normalised{}, err
	}
	var n Normalised
	switch action {
	case ActionPctCreate:
		n, err = normalisePctCreate(p)
	case ActionAptUpgrade:
		n = Normalised{Params: map[string]any{}, Command: "apt-get update && apt-get -y upgrade"}
	case ActionRestart:
		n, err = normaliseRestart(p)
	case ActionSystemctl:
		n, err = normaliseSystemctl(p)
	case ActionPctExec:
		n, err = normalisePctExec(p)
	case ActionDockerExec:
		n, err = normaliseDockerExec(p)
	case ActionRun:
		return Normalised{}, apierr.Invalid("action", "run is not a typed action: POST /api/v1/executions with a command")
	default:
		return Normalised{}, apierr.Invalid("action", "unknown action %q (want one of %s)",
			action, strings.Join(TypedActions(), ", "))
	}
	if err != nil {
		return Normalised{}, err
	}
	if err := p.done(); err != nil {
		return Normalised{}, err
	}
	n.Action = action
	n.Floor = actionFloor[action]
	return n, nil
}

func normalisePctCreate(p *paramSet) (Normalised, error) {
	vmid, err := p.integer("vmid", true, 0, minVMID, maxVMID)
	if err != nil {
		return Normalised{}, err
	}
	hostname, err := p.str("hostname", true, "", hostnameRE, "a hostname (letters, digits, hyphens)")
	if err != nil {
		return Normalised{}, err
	}
	storage, err := p.str("storage", false, "local", storageRE, "a Proxmox storage name")
	if err != nil {
		return Normalised{}, err
	}
	template, err := p.str("template", false, "", templateRE, "a template file name such as debian-12-standard_12.7-1_amd64.tar.zst")
	if err != nil {
		return Normalised{}, err
	}
	if prefix, name, ok := strings.Cut(template, ":vztmpl/"); ok {
		if prefix != storage {
			return Normalised{}, apierr.Invalid("params.template",
				"names storage %q but storage is %q; give the bare template name or set storage", prefix, storage)
		}
		template = name
	}
	bridge, err := p.str("bridge", false, "vmbr0", bridgeRE, "a bridge name such as vmbr0")
	if err != nil {
		return Normalised{}, err
	}
	ipRaw, err := p.str("ip", false, "dhcp", nil, "")
	if err != nil {
		return Normalised{}, err
	}
	gwRaw, err := p.str("gw", false, "", nil, "")
	if err != nil {
		return Normalised{}, err
	}
	ip, gw, err := normaliseAddress(ipRaw, gwRaw)
	if err != nil {
		return Normalised{}, err
	}
	memory, err := p.integer("memory", false, 512, 16, 1<<20)
	if err != nil {
		return Normalised{}, err
	}
	cores, err := p.integer("cores", false, 1, 1, 512)
	if err != nil {
		return Normalised{}, err
	}
	privileged, err := p.boolean("privileged", false)
	if err != nil {
		return Normalised{}, err
	}
	nesting, err := p.boolean("nesting", false)
	if err != nil {
		return Normalised{}, err
	}
	params := map[string]any{
		"vmid": vmid, "hostname": hostname, "template": template, "storage": storage, "bridge": bridge,
		"ip": ip, "gw": gw, "memory": memory, "cores": cores, "privileged": privileged, "nesting": nesting,
	}
	// The template is chosen at run time when none is named (the newest Debian template in the
	// host's cache), so the command shows a placeholder word for it.
	shownTemplate := template
	if shownTemplate == "" {
		shownTemplate = "newest-debian"
	}
	net0 := "name=eth0,bridge=" + bridge + ",ip=" + ip
	if gw != "" {
		net0 += ",gw=" + gw
	}
	unprivileged, nestingN := 1, 0
	if privileged {
		unprivileged = 0
	}
	if nesting {
		nestingN = 1
	}
	cmd := fmt.Sprintf("pct create %d %s:vztmpl/%s --hostname %s --storage %s --net0 %s --memory %d --cores %d --unprivileged %d --features nesting=%d && pct start %d",
		vmid, storage, shownTemplate, hostname, storage, net0, memory, cores, unprivileged, nestingN, vmid)
	return Normalised{Params: params, Command: cmd}, nil
}

// normaliseAddress validates the pct_create network: DHCP by default, else an IPv4 CIDR whose
// gateway is given and lies inside it (a gateway outside the subnet was how a container once
// ended up with no network while every retry guessed another address).
func normaliseAddress(ipRaw, gwRaw string) (string, string, error) {
	if strings.EqualFold(ipRaw, "dhcp") {
		if gwRaw != "" {
			return "", "", apierr.Invalid("params.gw", "a gateway is only used with a static ip; leave it out for dhcp")
		}
		return "dhcp", "", nil
	}
	prefix, err := netip.ParsePrefix(ipRaw)
	if err != nil || !prefix.Addr().Is4() {
		return "", "", apierr.Invalid("params.ip", `%q is neither "dhcp" nor an IPv4 address with a prefix length such as 192.0.2.10/24`, ipRaw)
	}
	if prefix.Bits() < 8 || prefix.Bits() > 30 {
		return "", "", apierr.Invalid("params.ip", "prefix length /%d leaves no room for a host and its gateway", prefix.Bits())
	}
	if prefix.Addr() == prefix.Masked().Addr() {
		return "", "", apierr.Invalid("params.ip", "%s is the network address, not a host address", prefix)
	}
	if gwRaw == "" {
		return "", "", apierr.Invalid("params.gw", "a static ip needs its gateway (gw); ask the operator for it rather than guessing")
	}
	gw, err := netip.ParseAddr(gwRaw)
	if err != nil || !gw.Is4() {
		return "", "", apierr.Invalid("params.gw", "%q is not an IPv4 address", gwRaw)
	}
	if !prefix.Masked().Contains(gw) {
		return "", "", apierr.Invalid("params.gw", "gateway %s is not inside %s", gw, prefix.Masked())
	}
	if gw == prefix.Addr() {
		return "", "", apierr.Invalid("params.gw", "the gateway cannot be the container's own address")
	}
	return prefix.String(), gw.String(), nil
}

func normaliseRestart(p *paramSet) (Normalised, error) {
	unit, err := p.str("unit", true, "", unitRE, "a systemd unit name such as caddy.service")
	if err != nil {
		return Normalised{}, err
	}
	return Normalised{Params: map[string]any{"unit": unit}, Command: "systemctl restart " + unit}, nil
}

func normaliseSystemctl(p *paramSet) (Normalised, error) {
	verb, err := p.str("verb", true, "", nil, "a systemctl verb")
	if err != nil {
		return Normalised{}, err
	}
	if !actions.SystemctlVerb(verb) {
		return Normalised{}, apierr.Invalid("params.verb", "%q is not one of %s", verb, strings.Join(actions.SystemctlVerbs(), ", "))
	}
	unit, err := p.str("unit", true, "", unitRE, "a systemd unit name such as caddy.service")
	if err != nil {
		return Normalised{}, err
	}
	return Normalised{Params: map[string]any{"verb": verb, "unit": unit}, Command: "systemctl " + verb + " " + unit}, nil
}

// innerCommand reads the command a pct_exec or docker_exec carries.
func innerCommand(p *paramSet) (string, error) {
	v, ok := p.get("command")
	if !ok {
		return "", apierr.Invalid("params.command", "is required (the shell command to run)")
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", apierr.Invalid("params.command", "want a string, got %s", describeJSON(v))
	}
	if strings.TrimSpace(s) == "" {
		return "", apierr.Invalid("params.command", "is required (the shell command to run)")
	}
	if len(s) > maxCommandBytes {
		return "", apierr.Invalid("params.command", "is longer than %d bytes", maxCommandBytes)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", apierr.Invalid("params.command", "contains a NUL byte, which no shell argument can carry")
	}
	return s, nil
}

// normalisePctExec reads a pct_exec: a command run inside an lxc target. Its command is
// what runs in the container (the scheduler's host-hop adds `pct exec <vmid> -- sh -c` on
// the owning Proxmox host), so it is classified as such; vmid, when given, must be the
// target's own (checked by the gate once the target is known).
func normalisePctExec(p *paramSet) (Normalised, error) {
	vmid, err := p.integer("vmid", false, 0, minVMID, maxVMID)
	if err != nil {
		return Normalised{}, err
	}
	inner, err := innerCommand(p)
	if err != nil {
		return Normalised{}, err
	}
	params := map[string]any{"command": inner}
	if vmid != 0 {
		params["vmid"] = vmid
	}
	return Normalised{Params: params, Command: inner}, nil
}

func normaliseDockerExec(p *paramSet) (Normalised, error) {
	container, err := p.str("container", true, "", containerRE, "a container name or id")
	if err != nil {
		return Normalised{}, err
	}
	inner, err := innerCommand(p)
	if err != nil {
		return Normalised{}, err
	}
	q, err := quoteWord(inner)
	if err != nil {
		return Normalised{}, apierr.Invalid("params.command", "cannot be quoted for the shell: %v", err)
	}
	return Normalised{Params: map[string]any{"container": container, "command": inner},
		Command: "docker exec " + container + " sh -c " + q}, nil
}
