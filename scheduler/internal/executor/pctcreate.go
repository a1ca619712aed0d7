package executor

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/remote"
)

// pct_create defaults.
const (
	defaultTemplateStorage = "local"
	defaultRootfsStorage   = "local-lvm"
	defaultBridge          = "vmbr0"
	defaultDiskGB          = 8
	defaultCores           = 1
	defaultMemoryMB        = 512
	defaultSwapMB          = 512
	// gatewayPingBudget bounds the gateway pre-flight: ping waits 2 s for its one reply, and
	// a static address with a silent gateway must fail in seconds, not after minutes of a
	// container waiting on a network that will never come up.
	gatewayPingBudget = 10 * time.Second
)

// pctCreateSpec is a pct_create request after validation.
type pctCreateSpec struct {
	VMID          int // 0: ask the cluster for the next free id
	Hostname      string
	Template      string // as requested; "" means newest Debian
	Storage       string // template storage listed with pveam
	RootfsStorage string
	DiskGB        int
	Cores         int
	MemoryMB      int
	SwapMB        int
	Bridge        string
	IP            string // "dhcp" or a CIDR
	Gateway       string // static only
	Privileged    bool
	Nesting       bool
}

var (
	hostnameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	wordRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	templateRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/+-]*$`)
)

// parsePctCreate validates params. Booleans come in whatever shape the agent sent (0/1,
// "true", bool): a strict bool once made an approved container never get created.
func parsePctCreate(p map[string]any) (pctCreateSpec, error) {
	s := pctCreateSpec{
		Hostname:      paramString(p, "hostname", "name"),
		Template:      paramString(p, "template", "ostemplate"),
		Storage:       paramString(p, "storage", "template_storage"),
		RootfsStorage: paramString(p, "rootfs_storage", "disk_storage"),
		Bridge:        paramString(p, "bridge"),
		IP:            paramString(p, "ip", "ipv4"),
		Gateway:       paramString(p, "gw", "gateway"),
	}
	var err error
	ints := []struct {
		dst  *int
		keys []string
		def  int
		max  int
	}{
		{&s.VMID, []string{"vmid"}, 0, 999999999},
		{&s.DiskGB, []string{"disk_gb", "disk"}, defaultDiskGB, 65536},
		{&s.Cores, []string{"cores"}, defaultCores, 512},
		{&s.MemoryMB, []string{"memory_mb", "memory"}, defaultMemoryMB, 1 << 22},
		{&s.SwapMB, []string{"swap_mb", "swap"}, defaultSwapMB, 1 << 22},
	}
	for _, f := range ints {
		*f.dst = f.def
		for _, k := range f.keys {
			n, ok, err := paramInt(p, k)
			if err != nil {
				return s, err
			}
			if ok {
				if n < 0 || n > f.max || (n == 0 && k != "swap_mb" && k != "swap" && k != "vmid") {
					return s, fmt.Errorf("params.%s: %d is out of range", k, n)
				}
				*f.dst = n
				break
			}
		}
	}
	if s.VMID != 0 && s.VMID < 100 {
		return s, fmt.Errorf("params.vmid: %d is below 100 (Proxmox reserves 0-99)", s.VMID)
	}
	if b, ok, err := paramBool(p, "privileged"); err != nil {
		return s, err
	} else if ok {
		s.Privileged = b
	}
	if b, ok, err := paramBool(p, "unprivileged"); err != nil {
		return s, err
	} else if ok {
		s.Privileged = !b
	}
	if s.Nesting, _, err = paramBool(p, "nesting"); err != nil {
		return s, err
	}
	if s.Hostname == "" || !hostnameRe.MatchString(s.Hostname) {
		return s, fmt.Errorf("params.hostname %q is not a valid host name", s.Hostname)
	}
	if s.Storage == "" {
		s.Storage = defaultTemplateStorage
	}
	if s.RootfsStorage == "" {
		s.RootfsStorage = defaultRootfsStorage
	}
	if s.Bridge == "" {
		s.Bridge = defaultBridge
	}
	for name, v := range map[string]string{"storage": s.Storage, "rootfs_storage": s.RootfsStorage, "bridge": s.Bridge} {
		if !wordRe.MatchString(v) {
			return s, fmt.Errorf("params.%s %q is not a valid name", name, v)
		}
	}
	if s.Template != "" && !templateRe.MatchString(s.Template) {
		return s, fmt.Errorf("params.template %q is not a valid template name", s.Template)
	}
	// DHCP is the default; a static address must come with the gateway the operator gave.
	if s.IP == "" || strings.EqualFold(s.IP, "dhcp") {
		s.IP = "dhcp"
		if s.Gateway != "" {
			return s, fmt.Errorf("params.gw %q given without a static params.ip; DHCP supplies the gateway", s.Gateway)
		}
		return s, nil
	}
	prefix, err := netip.ParsePrefix(s.IP)
	if err != nil || !prefix.Addr().Is4() {
		return s, fmt.Errorf("params.ip %q must be \"dhcp\" or an IPv4 address with its prefix length, e.g. 192.0.2.10/24", s.IP)
	}
	if s.Gateway == "" {
		return s, fmt.Errorf("params.ip %s is static but params.gw is missing; use DHCP, or ask the operator for the gateway (do not guess it)", s.IP)
	}
	gw, err := netip.ParseAddr(s.Gateway)
	if err != nil || !gw.Is4() {
		return s, fmt.Errorf("params.gw %q is not an IPv4 address", s.Gateway)
	}
	if !prefix.Masked().Contains(gw) {
		return s, fmt.Errorf("params.gw %s is not inside %s; ask the operator for the right gateway (do not guess it)", gw, prefix.Masked())
	}
	return s, nil
}

// pveamTemplates reads `pveam list <storage>`: a header line, then one template volid per
// line in the first column.
func pveamTemplates(out []byte) []string {
	var names []string
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (i == 0 && f[0] == "NAME") {
			continue
		}
		names = append(names, f[0])
	}
	return names
}

var nonDigits = regexp.MustCompile(`[^0-9]+`)

var debianTemplateRe = regexp.MustCompile(`^debian-(\d+)-standard_([0-9][0-9A-Za-z.+~-]*)_[a-z0-9]+\.tar\.(gz|xz|zst)$`)

// pickTemplate returns the cached template to use: the requested one when the cache has it
// (by full volid or by file name), else the newest Debian standard template. auto reports
// that the request was replaced or absent.
func pickTemplate(cached []string, want string) (volid string, auto bool, err error) {
	if want != "" {
		for _, c := range cached {
			if c == want || path.Base(c) == path.Base(want) {
				return c, false, nil
			}
		}
	}
	best, bestKey := "", []int(nil)
	for _, c := range cached {
		m := debianTemplateRe.FindStringSubmatch(path.Base(c))
		if m == nil {
			continue
		}
		major, _ := strconv.Atoi(m[1])
		key := append([]int{major}, versionKey(m[2])...)
		if best == "" || compareKeys(key, bestKey) > 0 || (compareKeys(key, bestKey) == 0 && c > best) {
			best, bestKey = c, key
		}
	}
	if best == "" {
		return "", true, fmt.Errorf("no Debian standard template in the cache (have: %s); download one with `pveam download`",
			strings.Join(cached, ", "))
	}
	return best, true, nil
}

// versionKey splits "12.7-1" into [12 7 1] for ordering.
func versionKey(v string) []int {
	var key []int
	for _, part := range nonDigits.Split(v, -1) {
		if part == "" {
			continue
		}
		n, _ := strconv.Atoi(part)
		key = append(key, n)
	}
	return key
}

func compareKeys(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// gatewaySilentMessage is what a static address whose gateway does not answer fails with:
// guessing a neighbouring address once left a container hanging on a network that could
// never come up.
func gatewaySilentMessage(gw, host string) string {
	return fmt.Sprintf("gateway %s did not answer from %s; do not guess another address — ask the operator", gw, host)
}

// net0 renders the container's network device.
func (s pctCreateSpec) net0() string {
	n := "name=eth0,bridge=" + s.Bridge + ",ip=" + s.IP
	if s.IP != "dhcp" {
		n += ",gw=" + s.Gateway
	}
	return n + ",type=veth"
}

// createLine is the `pct create` command for the spec and the chosen template.
func (s pctCreateSpec) createLine(vmid int, template string) (string, error) {
	unpriv := "1"
	if s.Privileged {
		unpriv = "0"
	}
	words := []string{"pct", "create", strconv.Itoa(vmid), template,
		"--hostname", s.Hostname,
		"--cores", strconv.Itoa(s.Cores),
		"--memory", strconv.Itoa(s.MemoryMB),
		"--swap", strconv.Itoa(s.SwapMB),
		"--rootfs", fmt.Sprintf("%s:%d", s.RootfsStorage, s.DiskGB),
		"--net0", s.net0(),
		"--unprivileged", unpriv,
	}
	if s.Nesting {
		words = append(words, "--features", "nesting=1")
	}
	return shellLine(words...)
}

// pctCreateResult is the result JSON of pct_create; the api registers the new lxc from it.
type pctCreateResult struct {
	VMID              int    `json:"vmid"`
	Hostname          string `json:"hostname"`
	Template          string `json:"template"`
	TemplateRequested string `json:"template_requested,omitempty"`
	TemplateAutoPick  bool   `json:"template_auto_picked"`
	IP                string `json:"ip"`
	Gateway           string `json:"gw,omitempty"`
	Bridge            string `json:"bridge"`
	Host              string `json:"host"`
	Privileged        bool   `json:"privileged"`
	Nesting           bool   `json:"nesting"`
}

// pct_create on a Proxmox host: list the template cache, pick the template, ping a static
// gateway first, then create and start (create + start only; the api registers the entity).
func pctCreateAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	if t.Kind != remote.KindMachine {
		return failed(fmt.Sprintf("pct_create runs on a Proxmox host; target %s is a %s", t.Slug, t.Kind))
	}
	spec, err := parsePctCreate(j.Params)
	if err != nil {
		return failed("pct_create: " + err.Error())
	}
	// step runs one host command, echoing it into the log; a non-zero exit is returned as an
	// outcome with the command's own last words.
	step := func(ctx context.Context, line string) (remote.Result, *outcome) {
		s.System("$ %s", line)
		res, err := e.opts.SSH.Run(ctx, t, line, s)
		if err != nil {
			o := e.fromError(ctx, j, "", err)
			return res, &o
		}
		if res.ExitCode != 0 {
			code := res.ExitCode
			o := outcome{Status: StatusFailed, ExitCode: &code,
				Err: fmt.Sprintf("%s exited with status %d: %s", strings.Join(strings.Fields(line)[:2], " "), code, lastLine(res))}
			return res, &o
		}
		return res, nil
	}

	list, err := shellLine("pveam", "list", spec.Storage)
	if err != nil {
		return failed("pct_create: " + err.Error())
	}
	res, bad := step(ctx, list)
	if bad != nil {
		return *bad
	}
	template, auto, err := pickTemplate(pveamTemplates(res.Stdout), spec.Template)
	if err != nil {
		return failed(fmt.Sprintf("pct_create on %s: %v", t.Slug, err))
	}
	if auto && spec.Template != "" {
		s.System("template %s is not in the cache of %s; using the newest Debian template %s", spec.Template, spec.Storage, template)
	}

	if spec.IP != "dhcp" {
		pctx, cancel := context.WithTimeout(ctx, gatewayPingBudget)
		ping, _ := shellLine("ping", "-c", "1", "-W", "2", spec.Gateway)
		s.System("$ %s", ping)
		res, err := e.opts.SSH.Run(pctx, t, ping, s)
		silent := err == nil && res.ExitCode != 0 || err != nil && pctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case silent:
			return failed(gatewaySilentMessage(spec.Gateway, t.Slug))
		case err != nil:
			// The host itself failed us (or the execution's own deadline passed): say that,
			// not that the gateway is silent.
			return e.fromError(ctx, j, "", err)
		}
	}

	vmid := spec.VMID
	if vmid == 0 {
		res, bad := step(ctx, "pvesh get /cluster/nextid")
		if bad != nil {
			return *bad
		}
		n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(string(res.Stdout)), `"`))
		if err != nil || n < 100 {
			return failed(fmt.Sprintf("pct_create: pvesh get /cluster/nextid answered %q, not a vmid", bytes.TrimSpace(res.Stdout)))
		}
		vmid = n
	}
	create, err := spec.createLine(vmid, template)
	if err != nil {
		return failed("pct_create: " + err.Error())
	}
	if _, bad := step(ctx, create); bad != nil {
		return *bad
	}
	res, bad = step(ctx, "pct start "+strconv.Itoa(vmid))
	if bad != nil {
		bad.Err += fmt.Sprintf(" (container %d was created but did not start)", vmid)
		return *bad
	}
	code := res.ExitCode
	r := pctCreateResult{VMID: vmid, Hostname: spec.Hostname, Template: template, TemplateAutoPick: auto,
		IP: spec.IP, Bridge: spec.Bridge, Host: t.Slug, Privileged: spec.Privileged, Nesting: spec.Nesting}
	if auto {
		r.TemplateRequested = spec.Template
	}
	if spec.IP != "dhcp" {
		r.Gateway = spec.Gateway
	}
	return outcome{Status: StatusCompleted, ExitCode: &code, Result: r}
}

// lastLine is the last non-empty line a failed command printed (stderr first).
func lastLine(res remote.Result) string {
	for _, b := range [][]byte{res.Stderr, res.Stdout} {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
			return l
		}
	}
	return "(no output)"
}
