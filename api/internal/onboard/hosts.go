// Package onboard is the api's half of bringing a real fleet into the graph: adding a
// machine (POST /hosts: a planned entity and a connection request the scheduler answers,
// shared/hostconnect), confirming its host key, applying what the scheduler learned,
// adopting the guests drift discovery found (POST /audit/drift/adopt), and printing the
// scheduler's public key (GET /ssh-key). Every graph write goes through the graph service,
// audited, with its events, in the transaction of the change.
package onboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/duration"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/hostconnect"
)

// Defaults and bounds of the waits.
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 2 * time.Minute
)

// Deps are the API's collaborators. Pool and Graph are required.
type Deps struct {
	Pool   *storage.Pool
	Graph  *graph.Service
	Logger zerolog.Logger
	// PollEvery is how often a waiting request looks for the scheduler's answer (default 100 ms).
	PollEvery time.Duration
}

// API serves the onboarding routes.
type API struct {
	d      Deps
	log    zerolog.Logger
	reader *readmodel.Reader
	store  *fleetstore.Store
}

// New builds the API.
func New(d Deps) *API {
	if d.PollEvery <= 0 {
		d.PollEvery = 100 * time.Millisecond
	}
	return &API{d: d, log: d.Logger.With().Str("component", "onboard").Logger(),
		reader: readmodel.New(d.Pool, d.Graph.Ontology), store: fleetstore.New(d.Pool)}
}

// Routes are the onboarding routes. Adding a machine and vouching for its host key are an
// operator's decisions (the scheduler dials what is added and trusts what is confirmed);
// adopting guests the scheduler found writes facts, as any writer may.
func (a *API) Routes() []request.Route {
	return []request.Route{
		request.POST("/hosts", auth.PermTrust, a.addHost),
		request.GET("/hosts/:ref", auth.PermRead, a.getHost),
		request.POST("/hosts/:ref/confirm", auth.PermTrust, a.confirmHost),
		request.GET("/ssh-key", auth.PermRead, a.sshKey),
		request.POST("/audit/drift/adopt", auth.PermWrite, a.adopt),
		request.GET("/clusters", auth.PermRead, a.listClusters),
	}
}

// addHostBody is POST /hosts.
type addHostBody struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Address     string `json:"address"`
	Port        int    `json:"port"`
	User        string `json:"user"`
	Fingerprint string `json:"fingerprint"`
	Wait        string `json:"wait"`
}

// userRE is a POSIX login name.
var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)

// cgnat is 100.64.0.0/10, where mesh VPNs (Tailscale, NetBird, Headscale) number their peers.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// addressAttribute is the machine attribute an address belongs in: the resolver prefers
// public, then mesh, then lan, so a LAN address must not be recorded as public.
func addressAttribute(ip netip.Addr) string {
	switch {
	case cgnat.Contains(ip):
		return "mesh_ipv4"
	case ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast():
		return "lan_ipv4"
	default:
		return "public_ipv4"
	}
}

func (a *API) addHost(c echo.Context) error {
	var b addHostBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	o := a.d.Graph.Ontology()
	if b.Type == "" {
		b.Type = "host"
	}
	if t, ok := o.Type(b.Type); !ok || t.Abstract || !o.IsA(b.Type, "machine") {
		return request.Unprocessable("type", "%q is not a concrete machine type (proxmox-host, host, workstation, nas, sbc, vps)", b.Type)
	}
	ip, err := netip.ParseAddr(b.Address)
	switch {
	case b.Address == "":
		return request.Unprocessable("address", "address is required: the machine's IP address")
	case err != nil:
		return request.Unprocessable("address", "%q is not an IP address; names are not resolved (the scheduler dials IP literals only)", b.Address)
	case !ip.Is4():
		return request.Unprocessable("address", "%s: only IPv4 addresses are supported", b.Address)
	}
	if b.Port == 0 {
		b.Port = 22
	}
	if b.Port < 1 || b.Port > 65535 {
		return request.Unprocessable("port", "%d is not a TCP port", b.Port)
	}
	if b.User == "" {
		b.User = "root"
	}
	if !userRE.MatchString(b.User) {
		return request.Unprocessable("user", "%q is not a login name", b.User)
	}
	if b.Fingerprint != "" {
		if err := hostconnect.CheckFingerprint(b.Fingerprint); err != nil {
			return request.Unprocessable("fingerprint", "%v", err)
		}
	}
	wait, err := waitOf(b.Wait)
	if err != nil {
		return err
	}
	// The address goes in exactly one of the three: a re-add with a new address must not leave
	// the old one behind, where the resolver (public first) would still dial it.
	attrs := map[string]any{"public_ipv4": nil, "mesh_ipv4": nil, "lan_ipv4": nil, "ssh_port": b.Port, "user": b.User}
	attrs[addressAttribute(ip)] = ip.String()
	if o.IsA(b.Type, "proxmox-host") {
		attrs["node"] = b.Name // the node name until the host says its own
	}
	m := meta(c)
	var ent graph.Entity
	var connectID string
	err = a.store.InTx(c.Request().Context(), func(st *fleetstore.Store, tx storage.DB) error {
		ctx := c.Request().Context()
		slug := b.Type + ":" + b.Name
		cur, err := st.EntityForUpdate(ctx, slug)
		switch {
		case errors.Is(err, apierr.ErrNotFound):
			created := maps.Clone(attrs)
			maps.DeleteFunc(created, func(_ string, v any) bool { return v == nil })
			if ent, err = a.d.Graph.CreateEntityTx(ctx, tx, m, graph.CreateEntityInput{Type: b.Type, Name: b.Name,
				State: "planned", Attributes: created}); err != nil {
				return err
			}
		case err != nil:
			return err
		case cur.State != "planned":
			return request.Errorf(http.StatusConflict, "host-exists", "name",
				"%s is already in the graph (state %s); a machine is added once", slug, cur.State)
		default:
			// Adding it again after a failed attempt: the new address, port or user win.
			if ent, err = a.d.Graph.UpdateAttributesTx(ctx, tx, m, slug, attrs, nil); err != nil {
				return err
			}
		}
		if err := refuseBusy(ctx, st, ip.String(), b.Port); err != nil {
			return err
		}
		connectID, err = requestConnect(ctx, st, m, ent.ID, ent.Slug, ip.String(), b.Port, b.User, b.Fingerprint)
		return err
	})
	if err != nil {
		return err
	}
	return a.answer(c, ent.Slug, connectID, wait, http.StatusCreated)
}

// confirmBody is POST /hosts/{ref}/confirm.
type confirmBody struct {
	Fingerprint string `json:"fingerprint"`
	Wait        string `json:"wait"`
}

func (a *API) confirmHost(c echo.Context) error {
	var b confirmBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if err := hostconnect.CheckFingerprint(b.Fingerprint); err != nil {
		return request.Unprocessable("fingerprint", "%v", err)
	}
	wait, err := waitOf(b.Wait)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// A client that escapes the slug's colon (proxmox-host%3Aatlas) names the same machine.
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	m := meta(c)
	var slug, connectID string
	err = a.store.InTx(ctx, func(st *fleetstore.Store, _ storage.DB) error {
		last, err := st.LatestConnect(ctx, ref, true)
		if errors.Is(err, apierr.ErrNotFound) {
			return request.NotFound("no machine %s is being added (POST /api/v1/hosts first)", ref)
		}
		if err != nil {
			return err
		}
		slug = last.Entity
		switch {
		case last.Status != hostconnect.StatusAwaiting:
			return request.Errorf(http.StatusConflict, "host-not-awaiting", "",
				"%s has no host key waiting for confirmation (its last connection is %s)", slug, last.Status)
		case last.Fingerprint != b.Fingerprint:
			return request.Unprocessable("fingerprint",
				"%s is not the key %s offered (%s %s); nothing was trusted", b.Fingerprint, last.Address, last.KeyType, last.Fingerprint)
		}
		addr, port := splitAddr(last.Address)
		if err := refuseBusy(ctx, st, addr, port); err != nil {
			return err
		}
		connectID, err = requestConnect(ctx, st, m, last.EntityID, slug, addr, port, last.User, b.Fingerprint)
		return err
	})
	if err != nil {
		return err
	}
	return a.answer(c, slug, connectID, wait, http.StatusOK)
}

func (a *API) getHost(c echo.Context) error {
	ctx := c.Request().Context()
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	last, err := a.store.LatestConnect(ctx, ref, false)
	if errors.Is(err, apierr.ErrNotFound) {
		return request.NotFound("no machine %s was added through POST /api/v1/hosts", ref)
	}
	if err != nil {
		return err
	}
	if err := a.finalize(ctx, last.ID); err != nil {
		return err
	}
	return a.answer(c, last.Entity, last.ID, 0, http.StatusOK)
}

// refuseBusy refuses a second connection request for an address while one is unanswered:
// two dials of one address under two different expectations must never race (the scheduler
// also claims one per address at a time).
func refuseBusy(ctx context.Context, st *fleetstore.Store, ip string, port int) error {
	addr := netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port)).String()
	busy, err := st.LockAddressBusy(ctx, addr)
	if err != nil || busy == "" {
		return err
	}
	return request.Errorf(http.StatusConflict, "host-connect-busy", "address",
		"a connection to %s (%s) is already under way; wait for it (oikos hosts show %s)", addr, busy, busy)
}

func waitOf(s string) (time.Duration, error) {
	if s == "" {
		return DefaultWait, nil
	}
	d, err := duration.ParseNonNegative(s)
	if err != nil {
		return 0, request.Unprocessable("wait", "%v", err)
	}
	return min(d, MaxWait), nil
}

// requestConnect writes a connection request, its event and audit row, and wakes the
// schedulers, in st's transaction.
func requestConnect(ctx context.Context, st *fleetstore.Store, m graph.Meta, entityID, slug, ip string, port int, user, fingerprint string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port)).String()
	if err := st.InsertConnect(ctx, fleetstore.NewConnect{ID: id.String(), EntityID: entityID, Address: addr, User: user,
		ExpectFingerprint: fingerprint, RequestedBy: m.Actor}); err != nil {
		return "", err
	}
	payload := map[string]any{"request_id": id.String(), "entity": slug, "address": addr, "user": user,
		"fingerprint_given": fingerprint != ""}
	if _, err := st.AppendEvent(ctx, eventbus.Event{Type: hostconnect.EventRequested, EntityID: entityID,
		Actor: m.Actor, CorrelationID: m.CorrelationID}, payload); err != nil {
		return "", err
	}
	if err := st.WriteAudit(ctx, audit.Row{Actor: m.Actor, Action: hostconnect.EventRequested, Method: m.Method, Path: m.Path,
		CorrelationID: m.CorrelationID, EntityID: entityID, After: payload}); err != nil {
		return "", err
	}
	// Delivered when tx commits.
	return id.String(), st.Notify(ctx, hostconnect.Channel, id.String())
}

func splitAddr(addr string) (string, int) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr, 22
	}
	return ap.Addr().String(), int(ap.Port())
}

// Connect is a connection request as the api answers it.
type Connect = fleetstore.Connect

// HostAnswer is what POST /hosts, POST /hosts/{ref}/confirm and GET /hosts/{ref} answer.
type HostAnswer struct {
	Entity  graph.Entity `json:"entity"`
	Connect Connect      `json:"connect"`
	// Discovery lists the guests a connected Proxmox host runs that the graph lacks.
	Discovery *Discovery `json:"discovery,omitempty"`
	// Cluster is the Proxmox cluster a connected host is a member of: every node, and the
	// host key each was pinned with on this host's word.
	Cluster *Cluster `json:"cluster,omitempty"`
	// Next is the command an operator runs next, when there is one.
	Next string `json:"next,omitempty"`
}

// Discovery is the part of a drift report about one host.
type Discovery struct {
	ReportID string            `json:"report_id,omitempty"`
	Missing  []json.RawMessage `json:"missing"`
	Error    string            `json:"error,omitempty"`
}

// answer waits up to wait for the scheduler's answer to connectID, applies it, and writes
// the HostAnswer: code when the scheduler answered, 202 while it has not.
func (a *API) answer(c echo.Context, slug, connectID string, wait time.Duration, code int) error {
	ctx := c.Request().Context()
	deadline := time.Now().Add(wait)
	if _, err := a.waitConnect(ctx, connectID, deadline); err != nil {
		return err
	}
	if err := a.finalize(ctx, connectID); err != nil {
		return err
	}
	cn, err := a.store.ConnectByID(ctx, connectID)
	if err != nil {
		return err
	}
	ent, err := a.d.Graph.GetEntity(ctx, slug)
	if err != nil {
		return err
	}
	out := HostAnswer{Entity: ent, Connect: cn}
	switch cn.Status {
	case hostconnect.StatusPending, hostconnect.StatusConnecting:
		out.Next = "oikos hosts show " + slug
		if c.Request().Method == http.MethodPost {
			code = http.StatusAccepted
		}
	case hostconnect.StatusAwaiting:
		out.Next = fmt.Sprintf("oikos add %s %s --address %s", ent.Type, ent.Name, addrOnly(cn.Address))
		if cn.User != "root" {
			out.Next += " --user " + cn.User
		}
		out.Next += " --fingerprint " + cn.Fingerprint
	case hostconnect.StatusConnected:
		if out.Cluster, err = a.clusterOf(ctx, cn); err != nil {
			return err
		}
		if a.d.Graph.Ontology().IsA(ent.Type, "proxmox-host") && wait > 0 {
			out.Discovery = a.discover(ctx, slug, deadline)
			if len(out.Discovery.Missing) > 0 {
				out.Next = "oikos drift adopt --all --host " + slug
			}
		}
		if out.Cluster != nil && (!out.Cluster.InGraph || out.Discovery != nil && len(out.Discovery.Missing) > 0 ||
			slices.ContainsFunc(out.Cluster.Nodes, func(n ClusterNode) bool { return n.Host == "" })) {
			// A member brings its cluster: one adopt takes the cluster, its nodes and every guest.
			out.Next = "oikos drift adopt --all"
		}
	}
	return c.JSON(code, out)
}

func addrOnly(addr string) string {
	ip, port := splitAddr(addr)
	if port != 22 {
		return ip + " --port " + fmt.Sprint(port)
	}
	return ip
}

// waitConnect polls the request until the scheduler answered it or deadline passes.
func (a *API) waitConnect(ctx context.Context, id string, deadline time.Time) (Connect, error) {
	tick := time.NewTicker(a.d.PollEvery)
	defer tick.Stop()
	for {
		cn, err := a.store.ConnectByID(ctx, id)
		if err != nil || hostconnect.Terminal(cn.Status) || !time.Now().Before(deadline) {
			return cn, err
		}
		select {
		case <-ctx.Done():
			return cn, ctx.Err()
		case <-tick.C:
		}
	}
}
