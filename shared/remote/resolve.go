package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/attr"
)

// Entity is the slice of a graph entity that resolution reads.
type Entity struct {
	ID         string
	Slug       string // "<type>:<name>"
	Type       string
	Name       string
	Attributes map[string]any
}

// Graph is what the Resolver needs from the entity graph. Implementations
// return an error wrapping ErrNotFound when nothing matches, and any other
// error for a failed lookup, so a missing fact is never mistaken for an
// outage (or the other way round).
type Graph interface {
	EntityBySlug(ctx context.Context, slug string) (Entity, error)
	// EntityByName finds the entity called name whose type is one of types.
	EntityByName(ctx context.Context, types []string, name string) (Entity, error)
	// HostOf follows the `hosts` edge backwards from a guest to the Proxmox
	// host that runs it.
	HostOf(ctx context.Context, guestID string) (Entity, error)
}

// Resolver turns entities into Targets (docs/behaviours.md S2). It reads attributes
// live on every call, so an edited address or user takes effect without a
// re-seed.
type Resolver struct {
	Graph Graph
	// IsA reports whether typ is ancestor or descends from it through the
	// ontology. Nil means exact type names only.
	IsA    func(typ, ancestor string) bool
	Logger zerolog.Logger
	// GuestExecTimeout is passed to `qm guest exec --timeout`; zero means
	// DefaultGuestExecTimeout.
	GuestExecTimeout time.Duration
}

const proxmoxHostType = "proxmox-host"

// Resolve returns how to run commands on e. A failure caused by the graph
// lacking something is a *ResolutionError (matching ErrResolution) and is
// logged as a configuration problem; a failed graph lookup is returned as is
// and logged as such (S8). An entity that is not a machine at all
// (ErrNotRunnable) is left to the caller to log.
func (r *Resolver) Resolve(ctx context.Context, e Entity) (Target, error) {
	t, err := r.resolve(ctx, e)
	if err != nil {
		switch {
		case errors.Is(err, ErrNotRunnable):
			// Not a configuration problem by itself: see ErrNotRunnable.
		case errors.Is(err, ErrResolution):
			r.Logger.Warn().Err(err).Str("entity", slugOf(e)).
				Msg("target resolution failed: the graph is missing a fact (configuration problem, not an outage)")
		default:
			r.Logger.Error().Err(err).Str("entity", slugOf(e)).
				Msg("target resolution failed: graph lookup error")
		}
		return Target{}, err
	}
	return t, nil
}

func (r *Resolver) resolve(ctx context.Context, e Entity) (Target, error) {
	slug := slugOf(e)
	switch {
	// Guests first: an ontology may well make lxc and vm kinds of machine,
	// but a guest is never dialled directly.
	case r.isA(e.Type, KindLXC):
		return r.resolveGuest(ctx, e, KindLXC)
	case r.isA(e.Type, KindVM):
		if !attr.True(e.Attributes["qemu_guest_agent"]) {
			return Target{}, &ResolutionError{Entity: slug, Err: ErrNoGuestAgent,
				Reason: "vm has no QEMU guest agent (attribute qemu_guest_agent is not true), so qm guest exec cannot reach it"}
		}
		return r.resolveGuest(ctx, e, KindVM)
	case r.isA(e.Type, "machine"):
		return machineTarget(e, slug)
	default:
		return Target{}, &ResolutionError{Entity: slug, Err: ErrNotRunnable,
			Reason: fmt.Sprintf("type %q is not a machine, lxc or vm, so nothing can run on it", e.Type)}
	}
}

func (r *Resolver) resolveGuest(ctx context.Context, e Entity, kind string) (Target, error) {
	slug := slugOf(e)
	vmid, err := attr.Int(e.Attributes["vmid"])
	if err != nil || vmid <= 0 {
		reason := "missing `vmid` attribute"
		if err == nil || e.Attributes["vmid"] != nil {
			reason = fmt.Sprintf("`vmid` attribute %v is not a positive integer", e.Attributes["vmid"])
		}
		return Target{}, &ResolutionError{Entity: slug, Reason: reason}
	}
	host, err := r.owningHost(ctx, e)
	if err != nil {
		return Target{}, err
	}
	ht, err := machineTarget(host, slugOf(host))
	if err != nil {
		return Target{}, fmt.Errorf("owning host of %s: %w", slug, err)
	}
	t := Target{
		Slug: slug,
		Addr: ht.Addr,
		User: ht.User,
		Kind: kind,
		VMID: vmid,
		Host: slugOf(host),
		OS:   attrString(e.Attributes["os"], "linux"),

		StoppedOnPurpose: StoppedOnPurpose(e.Attributes),
	}
	if kind == KindLXC {
		t.Wrap = func(cmd string) (string, error) { return PctExecCommand(vmid, cmd) }
	} else {
		timeout := r.GuestExecTimeout
		if timeout <= 0 {
			timeout = DefaultGuestExecTimeout
		}
		t.Wrap = func(cmd string) (string, error) { return GuestExecCommand(vmid, timeout, cmd) }
	}
	return t, nil
}

// owningHost finds the Proxmox host of a guest: the `host` attribute first
// (a bare name such as "atlas", or a full slug "proxmox-host:atlas" — both
// occur, and looking a bare name up as a slug was a real bug), else the
// `hosts` edge. A guest without the attribute is normal (inventory-seeded
// guests have only the edge) and must not fail resolution.
func (r *Resolver) owningHost(ctx context.Context, e Entity) (Entity, error) {
	slug := slugOf(e)
	name := strings.TrimSpace(attrString(e.Attributes["host"], ""))
	if name != "" {
		var (
			h   Entity
			err error
		)
		if strings.Contains(name, ":") {
			h, err = r.Graph.EntityBySlug(ctx, name)
		} else {
			h, err = r.Graph.EntityByName(ctx, []string{proxmoxHostType}, name)
		}
		switch {
		case err == nil:
			if !r.isA(h.Type, proxmoxHostType) {
				return Entity{}, &ResolutionError{Entity: slug,
					Reason: fmt.Sprintf("`host` attribute %q names %s, which is not a proxmox-host", name, slugOf(h))}
			}
			return h, nil
		case errors.Is(err, ErrNotFound):
			// The attribute may be stale; the edge is the other source of
			// truth. Say so, so the broken attribute gets fixed.
			r.Logger.Warn().Str("entity", slug).Str("host", name).
				Msg("guest's `host` attribute names no proxmox-host; falling back to the hosts edge")
			h, edgeErr := r.hostByEdge(ctx, e)
			if edgeErr == nil {
				return h, nil
			}
			if errors.Is(edgeErr, ErrResolution) {
				return Entity{}, &ResolutionError{Entity: slug,
					Reason: fmt.Sprintf("`host` attribute %q names no proxmox-host and no proxmox-host has a `hosts` edge to it", name)}
			}
			return Entity{}, edgeErr
		default:
			return Entity{}, fmt.Errorf("resolve %s: look up its host %q: %w", slug, name, err)
		}
	}
	return r.hostByEdge(ctx, e)
}

func (r *Resolver) hostByEdge(ctx context.Context, e Entity) (Entity, error) {
	slug := slugOf(e)
	h, err := r.Graph.HostOf(ctx, e.ID)
	if errors.Is(err, ErrNotFound) {
		return Entity{}, &ResolutionError{Entity: slug,
			Reason: "no owning Proxmox host: no `host` attribute and no `hosts` edge from a proxmox-host"}
	}
	if err != nil {
		return Entity{}, fmt.Errorf("resolve %s: follow its hosts edge: %w", slug, err)
	}
	if !r.isA(h.Type, proxmoxHostType) {
		return Entity{}, &ResolutionError{Entity: slug,
			Reason: fmt.Sprintf("its `hosts` edge comes from %s, which is not a proxmox-host", slugOf(h))}
	}
	return h, nil
}

// machineTarget reads a machine's address (public, else mesh, else lan),
// port and user. Addresses must be IP literals: a name would need a DNS
// lookup at dial time, which makes reachability depend on a resolver.
func machineTarget(e Entity, slug string) (Target, error) {
	var ip string
	var from string
	for _, k := range []string{"public_ipv4", "mesh_ipv4", "lan_ipv4"} {
		if v := strings.TrimSpace(attrString(e.Attributes[k], "")); v != "" {
			ip, from = v, k
			break
		}
	}
	if ip == "" {
		return Target{}, &ResolutionError{Entity: slug,
			Reason: "no address: none of public_ipv4, mesh_ipv4, lan_ipv4 is set"}
	}
	if _, err := netip.ParseAddr(ip); err != nil {
		return Target{}, &ResolutionError{Entity: slug,
			Reason: fmt.Sprintf("`%s` %q is not an IP address", from, ip)}
	}
	port := 22
	if raw, ok := e.Attributes["ssh_port"]; ok && raw != nil {
		p, err := attr.Int(raw)
		if err != nil || p < 1 || p > 65535 {
			return Target{}, &ResolutionError{Entity: slug,
				Reason: fmt.Sprintf("`ssh_port` %v is not a port number", raw)}
		}
		port = p
	}
	return Target{
		Slug: slug,
		Addr: net.JoinHostPort(ip, strconv.Itoa(port)),
		User: attrString(e.Attributes["user"], "root"),
		Wrap: directWrap,
		Kind: KindMachine,
		OS:   attrString(e.Attributes["os"], "linux"),
	}, nil
}

func (r *Resolver) isA(typ, ancestor string) bool {
	if typ == ancestor {
		return true
	}
	return r.IsA != nil && r.IsA(typ, ancestor)
}

func slugOf(e Entity) string {
	if e.Slug != "" {
		return e.Slug
	}
	if e.Type != "" || e.Name != "" {
		return e.Type + ":" + e.Name
	}
	return "entity " + e.ID
}

// attrString returns a non-empty string attribute, else def.
func attrString(v any, def string) string {
	if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
		return s
	}
	return def
}
