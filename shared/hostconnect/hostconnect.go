// Package hostconnect is the contract between the api, which asks for a connection to a
// machine being added to the fleet, and the scheduler, which holds the SSH key and dials it
// (issue: onboarding a real fleet). The api inserts a host_connects row and sends NOTIFY
// oikos_connect with its id; a scheduler claims the row, dials, and writes the outcome with
// one of the events below; the api applies it to the graph.
//
// The host key is never trusted on first use here: without a fingerprint the operator
// vouched for, the scheduler only records the key the machine offered (StatusAwaiting) and
// the api asks the operator to confirm it; with one, the offered key must match it, and only
// then is it pinned.
package hostconnect

import (
	"fmt"
	"regexp"
)

// Channel carries a host_connects id from the api to the schedulers.
const Channel = "oikos_connect"

// Statuses of a host_connects row.
const (
	StatusPending    = "pending"               // written by the api, not claimed yet
	StatusConnecting = "connecting"            // claimed by a scheduler
	StatusAwaiting   = "awaiting_confirmation" // the offered key waits for the operator
	StatusConnected  = "connected"             // connected with the vouched key; facts read
	StatusFailed     = "failed"                // error says why
)

// Terminal reports whether a status ends the scheduler's part of a request.
func Terminal(status string) bool {
	return status == StatusAwaiting || status == StatusConnected || status == StatusFailed
}

// Events appended to the outbox, each in the transaction of its write.
const (
	EventRequested  = "host.connect_requested" // api: a connection was asked for
	EventKeyOffered = "host.key_offered"       // scheduler: the machine offered a key to confirm
	EventConnected  = "host.connected"         // scheduler: connected, facts read
	EventFailed     = "host.connect_failed"    // scheduler: could not connect, error says why
	EventOnboarded  = "host.onboarded"         // api: the entity is active with the facts
	// EventClusterDiscovered (scheduler): a Proxmox host just connected is a cluster member;
	// its cluster's members are recorded (cluster_nodes) and their host keys pinned on its
	// word.
	EventClusterDiscovered = "cluster.discovered"
)

// How a cluster member's host key stands after the discovery (cluster_nodes.key_status).
const (
	KeyConnected = "connected" // the member that answered: its key is the one the operator vouched for
	KeyVouched   = "vouched"   // pinned now, from the cluster's known_hosts
	KeyPinned    = "pinned"    // the same key was pinned already
	KeyConflict  = "conflict"  // another key is pinned for the address: refused, host_key_changed raised
	KeyMissing   = "missing"   // the cluster's files list no usable key for the node
)

// Facts are what the scheduler learned over the first connection. Zero values were not
// learned.
type Facts struct {
	Hostname   string `json:"hostname,omitempty"`
	OS         string `json:"os,omitempty"`
	Arch       string `json:"arch,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
	Cores      int    `json:"cores,omitempty"`
	MemoryMB   int    `json:"memory_mb,omitempty"`
	PVEVersion string `json:"pve_version,omitempty"`
	// Guests counts the LXCs and VMs a Proxmox host runs (from the discovery that follows).
	Guests int `json:"guests,omitempty"`
	// Cluster names the Proxmox cluster the host is a member of (pvesh get /cluster/status);
	// its members are in cluster_nodes.
	Cluster string `json:"cluster,omitempty"`
}

// fingerprintRE is OpenSSH's SHA256 fingerprint: "SHA256:" and 43 unpadded base64 characters.
var fingerprintRE = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// CheckFingerprint says what is wrong with a fingerprint an operator typed, or nil.
func CheckFingerprint(fp string) error {
	if !fingerprintRE.MatchString(fp) {
		return fmt.Errorf("%q is not an SSH fingerprint: want SHA256: and 43 base64 characters, as `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` prints it", fp)
	}
	return nil
}
