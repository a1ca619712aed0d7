package probeparse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ClusterResourcesCommand lists every node and guest of the Proxmox cluster the host it runs
// on belongs to, whichever node each is on (docs/proxmox.md, `pvesh get … --output-format
// json`): one call answers for the whole cluster.
const ClusterResourcesCommand = "pvesh get /cluster/resources --output-format json"

// ClusterGuest is a guest as the cluster lists it.
type ClusterGuest struct {
	VMID int
	Kind string // lxc or qemu, as pvesh says
	Node string
	Name string
	// Status is running, stopped, … or unknown for a guest on a node that is down.
	Status string
	// HAState is ha-manager's state of an HA-managed guest (started, fence, recovery, …).
	HAState string
}

// ClusterResources is what ClusterResourcesCommand answered: the guests by vmid and each
// node's status (online, offline).
type ClusterResources struct {
	Guests map[int]ClusterGuest
	Nodes  map[string]string
}

// ParseClusterResources reads the JSON array pvesh printed. A vmid may be a number or, on
// older releases, a string; items that are neither guests nor nodes (storage, sdn, pools)
// are skipped.
func ParseClusterResources(out []byte) (ClusterResources, error) {
	var items []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&items); err != nil {
		return ClusterResources{}, fmt.Errorf("cluster resources are not a JSON array: %w", err)
	}
	cr := ClusterResources{Guests: map[int]ClusterGuest{}, Nodes: map[string]string{}}
	for _, it := range items {
		typ, node, status := jsonString(it["type"]), jsonString(it["node"]), jsonString(it["status"])
		switch typ {
		case "node":
			if node != "" {
				cr.Nodes[node] = status
			}
		case "lxc", "qemu":
			vmid, err := jsonVMID(it["vmid"])
			if err != nil || node == "" {
				return ClusterResources{}, fmt.Errorf("cluster resources: a %s item without a usable vmid and node (vmid %s, node %q)",
					typ, it["vmid"], node)
			}
			cr.Guests[vmid] = ClusterGuest{VMID: vmid, Kind: typ, Node: node, Name: jsonString(it["name"]), Status: status,
				HAState: jsonString(it["hastate"])}
		}
	}
	return cr, nil
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func jsonVMID(raw json.RawMessage) (int, error) {
	s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("vmid %s is not a positive integer", raw)
	}
	return n, nil
}
