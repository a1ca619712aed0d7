package onboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/shared/attr"
)

// guestConfig is drift's GuestConfig as the report stores it.
type guestConfig struct {
	Hostname     string   `json:"hostname"`
	Cores        int      `json:"cores"`
	MemoryMB     int      `json:"memory_mb"`
	SwapMB       int      `json:"swap_mb"`
	DiskGB       int      `json:"disk_gb"`
	Storage      string   `json:"storage"`
	OSType       string   `json:"ostype"`
	OnBoot       bool     `json:"onboot"`
	Tags         []string `json:"tags"`
	Unprivileged bool     `json:"unprivileged"`
	GuestAgent   bool     `json:"qemu_guest_agent"`
}

// missingGuest is one entry of a drift report's missing list.
type missingGuest struct {
	Host   string       `json:"host"`
	Kind   string       `json:"kind"`
	VMID   int          `json:"vmid"`
	Name   string       `json:"name"`
	Status string       `json:"status"`
	Config *guestConfig `json:"config"`
	raw    json.RawMessage
}

type hostListing struct {
	Host      string `json:"host"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error"`
}

func missingOf(report map[string]any) ([]missingGuest, error) {
	raw, err := json.Marshal(report["missing"])
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("drift report: missing: %w", err)
	}
	out := make([]missingGuest, 0, len(items))
	for _, it := range items {
		var m missingGuest
		if err := json.Unmarshal(it, &m); err != nil {
			return nil, fmt.Errorf("drift report: missing: %w", err)
		}
		m.raw = it
		out = append(out, m)
	}
	return out, nil
}

func hostsOf(report map[string]any) []hostListing {
	raw, _ := json.Marshal(report["hosts"])
	var hs []hostListing
	_ = json.Unmarshal(raw, &hs)
	return hs
}

// adoptBody is POST /audit/drift/adopt: every missing guest (all), or the ones named by vmid,
// optionally only on one host.
type adoptBody struct {
	All   bool   `json:"all"`
	VMIDs []int  `json:"vmids"`
	Host  string `json:"host"`
}

// Adopted is one guest made an entity.
type Adopted struct {
	Entity string `json:"entity"`
	Host   string `json:"host"`
	Kind   string `json:"kind"`
	VMID   int    `json:"vmid"`
	// StoppedOnPurpose: the guest was stopped when adopted, so it was recorded as meant to
	// be stopped (expected_status: stopped) rather than failing its first check.
	StoppedOnPurpose bool `json:"stopped_on_purpose,omitempty"`
}

// Skipped is a guest not adopted, and why.
type Skipped struct {
	Host   string `json:"host"`
	Kind   string `json:"kind"`
	VMID   int    `json:"vmid"`
	Reason string `json:"reason"`
}

// AdoptAnswer is what POST /audit/drift/adopt answers.
type AdoptAnswer struct {
	ReportID string    `json:"report_id"`
	Adopted  []Adopted `json:"adopted"`
	Skipped  []Skipped `json:"skipped"`
}

// adopt turns the latest drift report's missing guests into entities through the graph
// service: one transaction per host (its guests and their hosts edges, audited, checks
// derived). A guest the graph already has (same host, kind and vmid) is skipped, so adopting
// twice adopts nothing new.
func (a *API) adopt(c echo.Context) error {
	var b adoptBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if b.All == (len(b.VMIDs) > 0) {
		return request.Unprocessable("vmids", "say which guests: \"all\": true, or \"vmids\": [101, 102] (not both)")
	}
	ctx := c.Request().Context()
	rep, err := a.reader.LatestDrift(ctx)
	if errors.Is(err, apierr.ErrNotFound) {
		return request.NotFound("no drift report yet: GET /api/v1/audit/drift?refresh=true (oikos drift --refresh) asks for one")
	}
	if err != nil {
		return err
	}
	missing, err := missingOf(rep.Report)
	if err != nil {
		return err
	}
	hostSlugs := map[string]bool{}
	for _, h := range hostsOf(rep.Report) {
		hostSlugs[h.Host] = true
	}
	if b.Host != "" && !strings.Contains(b.Host, ":") {
		b.Host = "proxmox-host:" + b.Host
	}
	if b.Host != "" && !hostSlugs[b.Host] {
		return request.Unprocessable("host", "%s was not listed by the latest drift report (%s)", b.Host, rep.ID)
	}
	want := map[int]bool{}
	for _, v := range b.VMIDs {
		if v <= 0 {
			return request.Unprocessable("vmids", "%d is not a vmid", v)
		}
		want[v] = true
	}
	known, err := a.graphGuests(ctx, a.store)
	if err != nil {
		return err
	}
	out := AdoptAnswer{ReportID: rep.ID, Adopted: []Adopted{}, Skipped: []Skipped{}}
	byHost := map[string][]missingGuest{}
	found := map[int]bool{}
	for _, m := range missing {
		if (b.Host != "" && m.Host != b.Host) || (!b.All && !want[m.VMID]) {
			continue
		}
		found[m.VMID] = true
		if slug := known[guestKey{m.Host, m.Kind, m.VMID}]; slug != "" {
			out.Skipped = append(out.Skipped, Skipped{Host: m.Host, Kind: m.Kind, VMID: m.VMID, Reason: "already in the graph as " + slug})
			continue
		}
		byHost[m.Host] = append(byHost[m.Host], m)
	}
	for _, v := range b.VMIDs {
		if !found[v] {
			return request.Unprocessable("vmids", "vmid %d is not among the guests the latest drift report (%s) found missing; `oikos drift --refresh` lists them", v, rep.ID)
		}
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	m := meta(c)
	for _, h := range hosts {
		adopted, err := a.adoptOnHost(ctx, m, h, byHost[h])
		if err != nil {
			return fmt.Errorf("adopt the guests of %s: %w", h, err)
		}
		out.Adopted = append(out.Adopted, adopted...)
	}
	if len(out.Adopted) > 0 {
		// The stored report still lists them as missing; a fresh one says they are known.
		if _, err := requestDrift(ctx, a.store); err != nil {
			a.log.Warn().Err(err).Msg("request drift discovery after adopting")
		}
	}
	status := http.StatusOK
	if len(out.Adopted) > 0 {
		status = http.StatusCreated
	}
	return c.JSON(status, out)
}

type guestKey struct {
	host, kind string
	vmid       int
}

// graphGuests maps every guest the graph has (not destroyed) by host, kind and vmid to its
// slug; the host comes from the host attribute, else the hosts edge, as drift reads it.
func (a *API) graphGuests(ctx context.Context, st *fleetstore.Store) (map[guestKey]string, error) {
	o := a.d.Graph.Ontology()
	guests, err := st.Guests(ctx)
	if err != nil {
		return nil, err
	}
	out := map[guestKey]string{}
	for _, g := range guests {
		kind := ""
		switch {
		case o.IsA(g.Type, "lxc"):
			kind = "lxc"
		case o.IsA(g.Type, "vm"):
			kind = "vm"
		default:
			continue
		}
		vmid, err := attr.Int(g.VMID)
		if err != nil {
			continue
		}
		host := g.HostEdge
		if g.HostAttr != "" {
			host = g.HostAttr
			if !strings.Contains(host, ":") {
				host = "proxmox-host:" + host
			}
		}
		out[guestKey{host, kind, vmid}] = g.Slug
	}
	return out, nil
}

// adoptOnHost creates the guests of one host and their hosts edges in one transaction.
func (a *API) adoptOnHost(ctx context.Context, m graph.Meta, host string, guests []missingGuest) ([]Adopted, error) {
	hostName := strings.TrimPrefix(host, "proxmox-host:")
	var adopted []Adopted
	err := a.store.InTx(ctx, func(st *fleetstore.Store, tx storage.DB) error {
		adopted = adopted[:0]
		// Adopts run one at a time, and what the graph has is read under the lock: two
		// adopts at once must not both create a guest.
		if err := st.LockAdopt(ctx); err != nil {
			return err
		}
		known, err := a.graphGuests(ctx, st)
		if err != nil {
			return err
		}
		taken, err := takenNames(ctx, st)
		if err != nil {
			return err
		}
		var plan graph.BulkPlan
		var slugs []string
		for _, g := range guests {
			if known[guestKey{host, g.Kind, g.VMID}] != "" {
				continue // adopted meanwhile
			}
			name := guestName(g, taken)
			taken[g.Kind+":"+name] = true
			attrs := map[string]any{"vmid": g.VMID, "host": hostName}
			if c := g.Config; c != nil {
				setIf(attrs, "hostname", c.Hostname)
				setIf(attrs, "cores", c.Cores)
				setIf(attrs, "memory_mb", c.MemoryMB)
				setIf(attrs, "swap_mb", c.SwapMB)
				setIf(attrs, "disk_gb", c.DiskGB)
				setIf(attrs, "storage", c.Storage)
				setIf(attrs, "ostype", c.OSType)
				attrs["onboot"] = c.OnBoot
				if len(c.Tags) > 0 {
					tags := make([]any, len(c.Tags))
					for i, t := range c.Tags {
						tags[i] = t
					}
					attrs["tags"] = tags
				}
				if g.Kind == "lxc" {
					attrs["unprivileged"] = c.Unprivileged
				} else {
					attrs["qemu_guest_agent"] = c.GuestAgent
				}
			} else if g.Name != "" {
				attrs["hostname"] = g.Name
			}
			stopped := g.Status != "" && g.Status != "running"
			if stopped {
				attrs["expected_status"] = "stopped"
			}
			slug := g.Kind + ":" + name
			plan.Creates = append(plan.Creates, graph.NewEntity{Type: g.Kind, Name: name, State: "active", Attributes: attrs})
			plan.Edges = append(plan.Edges, graph.NewEdge{Type: "hosts", Source: host, Target: slug})
			slugs = append(slugs, slug)
			adopted = append(adopted, Adopted{Entity: slug, Host: host, Kind: g.Kind, VMID: g.VMID, StoppedOnPurpose: stopped})
		}
		if len(plan.Creates) == 0 {
			return nil
		}
		o := a.d.Graph.Ontology()
		if _, err := a.d.Graph.ApplyBulk(ctx, tx, m, o, plan); err != nil {
			return err
		}
		_, err = a.d.Graph.SyncChecksBulk(ctx, tx, m, o, slugs)
		return err
	})
	return adopted, err
}

func setIf[T comparable](attrs map[string]any, k string, v T) {
	var zero T
	if v != zero {
		attrs[k] = v
	}
}

// takenNames are the slugs in use (any state: a destroyed entity keeps its slug).
func takenNames(ctx context.Context, st *fleetstore.Store) (map[string]bool, error) {
	slugs, err := st.GuestSlugs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(slugs))
	for _, s := range slugs {
		out[s] = true
	}
	return out, nil
}

// guestName is the entity name for a guest: its hostname (pct config) or VM name, made a
// valid name; "ct-<vmid>" or "vm-<vmid>" when it has none; "-<vmid>" appended when another
// guest already has the name (two clusters both running a "debian").
func guestName(g missingGuest, taken map[string]bool) string {
	name := g.Name
	if g.Config != nil && g.Config.Hostname != "" {
		name = g.Config.Hostname
	}
	name = cleanName(name)
	prefix := "ct"
	if g.Kind == "vm" {
		prefix = "vm"
	}
	if name == "" {
		name = prefix + "-" + strconv.Itoa(g.VMID)
	}
	// A name in use gets the vmid, then a counter, until it is free.
	for i, base := 1, name; taken[g.Kind+":"+name]; i++ {
		if i == 1 {
			name = base + "-" + strconv.Itoa(g.VMID)
		} else {
			name = base + "-" + strconv.Itoa(g.VMID) + "-" + strconv.Itoa(i)
		}
	}
	return name
}

// cleanName lower-cases a hostname and keeps letters, digits, dots, dashes and underscores.
func cleanName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}
