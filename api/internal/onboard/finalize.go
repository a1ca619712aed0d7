package onboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/hostconnect"
	"github.com/oikos-hq/oikos/shared/safego"
)

// EventNotConnected is appended when a machine that could not be connected stays planned
// with the reason on its status.
const EventNotConnected = "host.not_connected"

// meta is the graph service's Meta for this request.
func meta(c echo.Context) graph.Meta {
	m := request.MetaOf(c)
	return graph.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
}

// finalize applies a connection's outcome to the graph once: a connected machine becomes
// active with the facts the scheduler read; a machine that could not be reached stays
// planned, and its status says why. Safe to call any number of times, from any request.
func (a *API) finalize(ctx context.Context, id string) error {
	return a.store.InTx(ctx, func(st *fleetstore.Store, tx storage.DB) error {
		cn, by, err := st.ConnectToFinalize(ctx, id)
		if err != nil {
			return err
		}
		if cn.Finalized || (cn.Status != hostconnect.StatusConnected && cn.Status != hostconnect.StatusFailed) {
			return nil
		}
		m := graph.Meta{Actor: by, CorrelationID: cn.ID}
		ent, err := a.d.Graph.GetEntity(ctx, cn.EntityID)
		if err != nil {
			return err
		}
		if cn.Status == hostconnect.StatusFailed {
			if ent.State == "planned" {
				reason := "not connected: " + cn.Error
				if err := st.SetNotConnected(ctx, cn.EntityID, reason); err != nil {
					return err
				}
				payload := map[string]any{"request_id": cn.ID, "entity": ent.Slug, "reason": reason}
				if _, err := st.AppendEvent(ctx, eventbus.Event{Type: EventNotConnected, EntityID: cn.EntityID,
					Actor: by, CorrelationID: cn.ID}, payload); err != nil {
					return err
				}
				if err := st.WriteAudit(ctx, audit.Row{Actor: by, Action: EventNotConnected, CorrelationID: cn.ID,
					EntityID: cn.EntityID, After: payload}); err != nil {
					return err
				}
			}
		} else {
			attrs := factAttributes(cn.Facts, a.d.Graph.Ontology().IsA(ent.Type, "proxmox-host"))
			if len(attrs) > 0 {
				if _, err := a.d.Graph.UpdateAttributesTx(ctx, tx, m, cn.EntityID, attrs, nil); err != nil {
					return fmt.Errorf("record what %s said: %w", ent.Slug, err)
				}
			}
			if ent.State == "planned" || ent.State == "provisioning" {
				if _, err := a.d.Graph.SetStateTx(ctx, tx, m, cn.EntityID, "active", nil); err != nil {
					return fmt.Errorf("make %s active: %w", ent.Slug, err)
				}
			}
			payload := map[string]any{"request_id": cn.ID, "entity": ent.Slug, "facts": cn.Facts, "fingerprint": cn.Fingerprint}
			if _, err := st.AppendEvent(ctx, eventbus.Event{Type: hostconnect.EventOnboarded, EntityID: cn.EntityID,
				Actor: by, CorrelationID: cn.ID}, payload); err != nil {
				return err
			}
			if err := st.WriteAudit(ctx, audit.Row{Actor: by, Action: hostconnect.EventOnboarded, CorrelationID: cn.ID,
				EntityID: cn.EntityID, After: payload}); err != nil {
				return err
			}
		}
		return st.MarkFinalized(ctx, cn.ID)
	})
}

// factAttributes are the machine attributes the facts fill (seeds/ontology.yaml, machine
// and proxmox-host); values the ontology would refuse (an os other than linux or darwin)
// are left out.
func factAttributes(f hostconnect.Facts, proxmox bool) map[string]any {
	out := map[string]any{}
	if f.Hostname != "" {
		out["hostname"] = f.Hostname
		if proxmox {
			out["node"] = f.Hostname
		}
	}
	if f.OS == "linux" || f.OS == "darwin" {
		out["os"] = f.OS
	}
	if f.Arch == "amd64" || f.Arch == "arm64" {
		out["arch"] = f.Arch
	}
	if f.Cores > 0 {
		out["cores"] = f.Cores
	}
	if f.MemoryMB > 0 {
		out["memory_mb"] = f.MemoryMB
	}
	if proxmox && f.PVEVersion != "" {
		out["pve_version"] = f.PVEVersion
	}
	return out
}

// driftRequest is what NOTIFY oikos_drift carries.
type driftRequest struct {
	RequestID string `json:"request_id"`
}

// requestDrift asks the schedulers for a discovery and returns the request id.
func requestDrift(ctx context.Context, st *fleetstore.Store) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(driftRequest{RequestID: id.String()})
	if err != nil {
		return "", err
	}
	if err := st.Notify(ctx, eventbus.ChannelDrift, string(payload)); err != nil {
		return "", fmt.Errorf("request drift discovery: %w", err)
	}
	return id.String(), nil
}

// awaitDrift asks for a drift report and waits until deadline for the one that answers it.
func (a *API) awaitDrift(ctx context.Context, deadline time.Time) (readmodel.DriftReport, error) {
	id, err := requestDrift(ctx, a.store)
	if err != nil {
		return readmodel.DriftReport{}, err
	}
	tick := time.NewTicker(a.d.PollEvery)
	defer tick.Stop()
	for {
		rep, found, err := a.reader.DriftAnswering(ctx, id)
		switch {
		case err != nil:
			return rep, err
		case found && rep.Status != "completed":
			return rep, fmt.Errorf("drift discovery failed in the scheduler: %s", rep.Error)
		case found:
			return rep, nil
		}
		if !time.Now().Before(deadline) {
			return rep, fmt.Errorf("no drift report for request %s in time; `oikos drift` shows the latest", id)
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-tick.C:
		}
	}
}

// discover runs a drift discovery now and keeps what it found on host.
func (a *API) discover(ctx context.Context, host string, deadline time.Time) *Discovery {
	d := &Discovery{Missing: []json.RawMessage{}}
	rep, err := a.awaitDrift(ctx, deadline)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	d.ReportID = rep.ID
	missing, err := missingOf(rep.Report)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	for _, m := range missing {
		if m.Host == host {
			d.Missing = append(d.Missing, m.raw)
		}
	}
	for _, h := range hostsOf(rep.Report) {
		if h.Host == host && !h.Reachable {
			d.Error = "listing " + host + " failed: " + h.Error
		}
	}
	return d
}

// sshKey answers GET /ssh-key: the public keys the schedulers connect with.
func (a *API) sshKey(c echo.Context) error {
	ctx := c.Request().Context()
	keys, err := a.store.SchedulerKeys(ctx)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return request.Errorf(http.StatusNotFound, "no-scheduler-key", "",
			"no scheduler has published its SSH key yet: start oikos-scheduler (it generates one on first start when OIKOS_SSH_KEY_GENERATE=true)")
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": keys})
}

// Watch applies connection outcomes as the scheduler reports them, so a machine becomes
// active even when nobody is waiting on the request (the CLI gave up, the dashboard closed).
// It runs until ctx ends.
func (a *API) Watch(ctx context.Context, bus *eventbus.Bus) {
	sub := bus.Subscribe(64, hostconnect.EventConnected, hostconnect.EventFailed)
	safego.Go(a.log, "onboard-watch", func() {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.C:
				if !ok {
					return
				}
				var p struct {
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil || p.RequestID == "" {
					continue
				}
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := a.finalize(fctx, p.RequestID); err != nil && ctx.Err() == nil {
					a.log.Error().Err(err).Str("request", p.RequestID).Msg("apply a connection's outcome")
				}
				cancel()
			}
		}
	})
}
