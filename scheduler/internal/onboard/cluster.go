package onboard

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/hostkeys"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/hostconnect"
	"github.com/oikos-hq/oikos/shared/remote"
)

// A Proxmox host the operator vouched for is asked whether it is a cluster member, over the
// connection just pinned: `pvesh get /cluster/status` (pve-manager's API2/Cluster.pm: one
// `type: cluster` item with name, nodes and quorate, one `type: node` item per member with
// name, ip, nodeid, online and local; a node in no cluster lists only itself, nodeid 0) and
// the keys pmxcfs shares between the members: the merged /etc/pve/priv/known_hosts
// (OpenSSH's known_hosts format, each member by name and by address), and for a member that
// file lacks, its own /etc/pve/nodes/NAME/ssh_known_hosts (what PVE 8.1+ pins with
// HostKeyAlias=NAME). Those keys are trusted because the member the operator vouched for
// says so: they are pinned with that provenance (ssh_host_keys.vouched_by), never over a key
// pinned already.

// Files and commands of the discovery.
const (
	cmdClusterStatus = "pvesh get /cluster/status --output-format json"
	mergedKnownHosts = "/etc/pve/priv/known_hosts"
)

// nodeNameRE is a Proxmox node name (a hostname label, as pvecm accepts it); anything else
// is never put in a command line.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// clusterFound is what a member said about its cluster.
type clusterFound struct {
	Name    string
	Quorate bool
	Count   int
	Nodes   []clusterMember
}

// clusterMember is one node of it, and the key the cluster's files give it.
type clusterMember struct {
	Node, IP string
	Addr     string // ip:port the scheduler dials
	NodeID   int
	Online   bool
	Local    bool
	Key      ssh.PublicKey // nil: none usable
	Source   string        // the file the key was read from
	Status   string        // hostconnect.Key*
	Error    string
}

// statusItem is one item of /cluster/status; numbers may come as strings from older
// releases, so they are read loosely.
type statusItem struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	IP      string `json:"ip"`
	NodeID  any    `json:"nodeid"`
	Online  any    `json:"online"`
	Local   any    `json:"local"`
	Nodes   any    `json:"nodes"`
	Quorate any    `json:"quorate"`
}

func looseInt(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(strings.TrimSpace(x))
		return n
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

// parseClusterStatus reads /cluster/status; nil when the node is in no cluster.
func parseClusterStatus(out []byte) (*clusterFound, error) {
	var items []statusItem
	if err := json.Unmarshal(bytes.TrimSpace(out), &items); err != nil {
		return nil, fmt.Errorf("`%s` did not answer a JSON list: %w", cmdClusterStatus, err)
	}
	var c *clusterFound
	var nodes []clusterMember
	for _, it := range items {
		switch it.Type {
		case "cluster":
			c = &clusterFound{Name: it.Name, Quorate: looseInt(it.Quorate) == 1, Count: looseInt(it.Nodes)}
		case "node":
			nodes = append(nodes, clusterMember{Node: it.Name, IP: it.IP, NodeID: looseInt(it.NodeID),
				Online: looseInt(it.Online) == 1, Local: looseInt(it.Local) == 1})
		}
	}
	if c == nil || c.Name == "" {
		return nil, nil
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].NodeID < nodes[j].NodeID })
	c.Nodes = nodes
	if c.Count == 0 {
		c.Count = len(nodes)
	}
	return c, nil
}

// knownHost is one usable line of a known_hosts file.
type knownHost struct {
	hosts   []string
	key     ssh.PublicKey
	revoked bool
}

// parseKnownHosts reads OpenSSH's known_hosts format (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT):
// markers, comma-separated patterns, hashed names. Lines that do not parse, and
// @cert-authority lines (a CA, not a host's key), are left out.
func parseKnownHosts(data []byte) []knownHost {
	var out []knownHost
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		marker, hosts, key, _, _, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil || marker == "cert-authority" {
			continue
		}
		out = append(out, knownHost{hosts: hosts, key: key, revoked: marker == "revoked"})
	}
	return out
}

// matches reports whether pattern names host exactly: a plain name (case-insensitive, as
// OpenSSH lower-cases names), or a hashed one (|1|salt|hash: HMAC-SHA1 of the name keyed
// with the salt). Wildcards and negations vouch for no particular node and never match.
func matches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "|1|"); ok {
		salt64, hash64, ok := strings.Cut(rest, "|")
		if !ok {
			return false
		}
		salt, err1 := base64.StdEncoding.DecodeString(salt64)
		want, err2 := base64.StdEncoding.DecodeString(hash64)
		if err1 != nil || err2 != nil {
			return false
		}
		mac := hmac.New(sha1.New, salt)
		mac.Write([]byte(host))
		return hmac.Equal(mac.Sum(nil), want)
	}
	if strings.ContainsAny(pattern, "*?!") {
		return false
	}
	return strings.EqualFold(pattern, host)
}

// keysFor returns the keys the file gives host and the keys it revokes for it (@revoked).
func keysFor(entries []knownHost, host string) (keys, revoked []ssh.PublicKey) {
	for _, e := range entries {
		for _, p := range e.hosts {
			if matches(p, host) {
				if e.revoked {
					revoked = append(revoked, e.key)
				} else {
					keys = append(keys, e.key)
				}
				break
			}
		}
	}
	return keys, revoked
}

// keySet is keys without duplicates and without any of drop, in order.
func keySet(keys, drop []ssh.PublicKey) []ssh.PublicKey {
	var out []ssh.PublicKey
	for _, k := range keys {
		if !containsKey(drop, k) && !containsKey(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func containsKey(keys []ssh.PublicKey, k ssh.PublicKey) bool {
	for _, o := range keys {
		if bytes.Equal(o.Marshal(), k.Marshal()) {
			return true
		}
	}
	return false
}

// knownHostsName is how known_hosts names ip:port: the ip alone for port 22, [ip]:port
// otherwise.
func knownHostsName(ip string, port int) string {
	if port == 22 {
		return ip
	}
	return "[" + ip + "]:" + strconv.Itoa(port)
}

// portsListed are the ports the file names ip with, besides the candidates tried for hashed
// names (22 and the port the vouching member was reached on).
func portsListed(entries []knownHost, ip string, selfPort int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, e := range entries {
		for _, p := range e.hosts {
			if strings.HasPrefix(p, "|1|") {
				continue
			}
			if p == ip {
				add(22)
			} else if h, port, err := net.SplitHostPort(p); err == nil && strings.HasPrefix(p, "[") && h == ip {
				if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65536 {
					add(n)
				}
			}
		}
	}
	for _, p := range []int{selfPort, 22} {
		if keys, revoked := keysFor(entries, knownHostsName(ip, p)); !seen[p] && len(keys)+len(revoked) > 0 {
			add(p)
		}
	}
	return out
}

// keyPreference orders host key types as the scheduler's SSH client asks for them
// (x/crypto/ssh's default host key algorithms: RSA, then ECDSA, then Ed25519), so the key
// pinned for a member is the one its handshake will present; a member whose file lists
// several keys is pinned with the first of them in that order.
func keyPreference(t string) int {
	switch {
	case t == ssh.KeyAlgoRSA:
		return 0
	case strings.HasPrefix(t, "ecdsa-sha2-"):
		return 1
	case t == ssh.KeyAlgoED25519:
		return 2
	}
	return 3
}

func preferredKey(keys []ssh.PublicKey) ssh.PublicKey {
	if len(keys) == 0 {
		return nil
	}
	sorted := append([]ssh.PublicKey(nil), keys...)
	sort.SliceStable(sorted, func(i, j int) bool { return keyPreference(sorted[i].Type()) < keyPreference(sorted[j].Type()) })
	return sorted[0]
}

// placeMember finds m's address and key in the cluster's files: the address is m's ip at
// the port its known_hosts entries name (the vouching member's port when several do, else
// 22, where pvecm's own SSH between members goes); the key is what the entries for that
// address and for m's name agree on. It reports false when they disagree: such entries
// vouch for nothing.
func placeMember(m *clusterMember, entries []knownHost, selfPort int, source string) bool {
	port := 22
	if ports := portsListed(entries, m.IP, selfPort); len(ports) > 0 {
		port = ports[0]
		for _, p := range ports {
			if p == selfPort {
				port = p
			}
		}
	}
	m.Addr = net.JoinHostPort(m.IP, strconv.Itoa(port))
	addrKeys, addrRevoked := keysFor(entries, knownHostsName(m.IP, port))
	nameKeys, nameRevoked := keysFor(entries, strings.ToLower(m.Node))
	revoked := append(addrRevoked, nameRevoked...)
	byAddr, byName := keySet(addrKeys, revoked), keySet(nameKeys, revoked)
	// Entries for the name and for the address describe one machine: they must share a key.
	shared := false
	for _, k := range byAddr {
		shared = shared || containsKey(byName, k)
	}
	if len(byAddr) > 0 && len(byName) > 0 && !shared {
		m.Status, m.Error = hostconnect.KeyMissing, fmt.Sprintf("%s lists different keys for %s and for %s; none was trusted",
			source, m.Node, knownHostsName(m.IP, port))
		return false
	}
	keys := keySet(append(byAddr, byName...), nil)
	if k := preferredKey(keys); k != nil {
		m.Key, m.Source, m.Status, m.Error = k, source, "", ""
	}
	return true
}

// discoverCluster asks the member reached through t (at selfAddr) about its cluster; nil
// for a node in no cluster. The keys of the other members are found, not pinned: record
// pins them in the transaction of the outcome.
func (s *Service) discoverCluster(ctx context.Context, t remote.Target, selfAddr string) (*clusterFound, error) {
	res, err := s.opts.SSH.Exec(ctx, t, cmdClusterStatus, nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("`%s` exited %d: %s", cmdClusterStatus, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	c, err := parseClusterStatus(res.Stdout)
	if err != nil || c == nil {
		return nil, err
	}
	selfIP, selfPortS, _ := net.SplitHostPort(selfAddr)
	selfPort, _ := strconv.Atoi(selfPortS)
	read := func(path string) []knownHost {
		r, err := s.opts.SSH.Exec(ctx, t, "cat "+path, nil)
		if err != nil || r.ExitCode != 0 {
			return nil
		}
		return parseKnownHosts(r.Stdout)
	}
	merged := read(mergedKnownHosts)
	for i := range c.Nodes {
		m := &c.Nodes[i]
		if m.Local {
			// The member that answered is reached where the operator said, with the key the
			// operator vouched for.
			m.Addr, m.IP, m.Status = selfAddr, selfIP, hostconnect.KeyConnected
			continue
		}
		m.Status, m.Error = hostconnect.KeyMissing, "the cluster's known_hosts lists no key for it"
		if net.ParseIP(m.IP) == nil {
			m.Addr, m.Error = "", fmt.Sprintf("/cluster/status gives it no IP address (%q)", m.IP)
			continue
		}
		if agreed := placeMember(m, merged, selfPort, mergedKnownHosts); agreed && m.Key == nil && nodeNameRE.MatchString(m.Node) {
			own := "/etc/pve/nodes/" + m.Node + "/ssh_known_hosts"
			if entries := read(own); len(entries) > 0 {
				placeMember(m, append(merged, entries...), selfPort, own)
			}
		}
	}
	return c, nil
}

// keyTypeAndFP are the type and fingerprint of k ("" for nil).
func keyTypeAndFP(k ssh.PublicKey) (string, string) {
	if k == nil {
		return "", ""
	}
	return k.Type(), remote.Fingerprint(k.Marshal())
}

// recordCluster, in the transaction of a connected outcome, pins the members' keys on the
// word of the member that answered, records every member (cluster_nodes) and appends
// cluster.discovered with its audit row. A member whose address has another key pinned
// already is refused, as a changed key is on a dial: nothing is replaced, and a
// host_key_changed signal is raised.
func (s *Service) recordCluster(ctx context.Context, tx *storage.Store, r request, o outcome) error {
	c := o.cluster
	names := make([]string, 0, len(c.Nodes))
	var nodes []map[string]any
	for i := range c.Nodes {
		m := &c.Nodes[i]
		names = append(names, m.Node)
		keyType, fp := keyTypeAndFP(m.Key)
		if m.Local {
			keyType, fp = o.keyType, o.fingerprint
		} else if m.Key != nil {
			inserted, pinned, err := tx.VouchHostKey(ctx, m.Addr, keyType, m.Key.Marshal(), fp, r.addr, m.Source)
			if err != nil {
				return err
			}
			switch {
			case inserted:
				m.Status = hostconnect.KeyVouched
			case bytes.Equal(pinned, m.Key.Marshal()):
				m.Status = hostconnect.KeyPinned
			default:
				pinnedFP := remote.Fingerprint(pinned)
				m.Status = hostconnect.KeyConflict
				m.Error = fmt.Sprintf("%s already has the key %s pinned; %s (%s) vouches for %s: refused, nothing was replaced",
					m.Addr, pinnedFP, r.slug, m.Source, fp)
				if _, err := hostkeys.RaiseOn(ctx, tx, m.Addr, pinnedFP, fp); err != nil {
					return err
				}
			}
		}
		if err := tx.UpsertClusterNode(ctx, storage.ClusterNode{Cluster: c.Name, Node: m.Node, Address: m.Addr,
			NodeID: m.NodeID, Online: m.Online, Local: m.Local, Quorate: c.Quorate, ClusterNodes: c.Count,
			Fingerprint: fp, KeyType: keyType, KeyStatus: m.Status, KeyError: m.Error, VouchedBy: r.slug,
			User: r.user, ConnectID: r.id}); err != nil {
			return err
		}
		n := map[string]any{"node": m.Node, "address": m.Addr, "online": m.Online, "local": m.Local,
			"fingerprint": fp, "key_type": keyType, "key_status": m.Status}
		if m.Source != "" {
			n["source"] = m.Source
		}
		if m.Error != "" {
			n["error"] = m.Error
		}
		nodes = append(nodes, n)
	}
	if err := tx.PruneClusterNodes(ctx, c.Name, names); err != nil {
		return err
	}
	payload := map[string]any{"request_id": r.id, "cluster": c.Name, "vouched_by": r.slug, "address": r.addr,
		"quorate": c.Quorate, "nodes": nodes}
	if _, err := tx.AppendEvent(ctx, eventbus.Event{Type: hostconnect.EventClusterDiscovered, EntityID: r.entityID,
		Actor: "scheduler", CorrelationID: r.id}, payload); err != nil {
		return err
	}
	return tx.WriteAudit(ctx, audit.Row{Actor: "scheduler", Action: hostconnect.EventClusterDiscovered, CorrelationID: r.id,
		EntityID: r.entityID, After: payload})
}
