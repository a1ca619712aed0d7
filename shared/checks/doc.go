// Package checks derives check definitions from a graph entity and the ontology
// (docs/behaviours.md S1) and decides whether an entity is a monitoring coverage gap (S5).
//
// Derive is pure: no I/O, no database, no clock. Everything it needs from the graph (the
// owning Proxmox host of a guest, the machine holding a backup target) comes through the
// Lookup interface, so the api can call it inside the transaction of every create, update
// and seed ingest and get the same answer every time. A lookup that fails degrades to a
// Skip with a reason rather than failing the write: a derivation gap shows up in the
// coverage sweep and heals on the next mutation.
//
// # What an entity warrants
//
// The monitoring list comes from the entity's type, resolved through is-a by the ontology.
// A spec with requires_all / requires_any applies only when the entity carries those
// attributes; one that does not apply is recorded in Result.Skipped as "not applicable" and
// is never a coverage gap. Per entity:
//
//   - attribute `monitoring: "none"` disables every check (and is never a coverage gap);
//   - attribute `monitoring: [{kind, script, interval, timeout, args, disabled}, ...]`
//     changes the type's specs: an entry whose kind+script matches a type spec overrides the
//     fields it sets (or disables the spec with `disabled: true`); any other entry adds a
//     check. Intervals and timeouts are Go durations ("90s") or numbers of seconds;
//   - attribute `check_interval` sets the interval of every check that an entry above does
//     not set explicitly;
//   - an entity in state destroyed or deprecated derives nothing.
//
// Defaults: interval 60s, timeout 10s, and a timeout never exceeds its interval.
//
// # Check identity
//
// A check's entity name is "<target type>.<target name>.<kind>[.<script>]" and its slug is
// "check:" + that name. Nothing is truncated: the original system shortened slugs to their
// last eight characters, so all 21 ingress routes collapsed onto one check and
// service:jellyfin overwrote lxc:jellyfin. Re-deriving an unchanged entity yields the same
// slugs in the same order (Defs are sorted by slug), so a re-seed upserts and never
// duplicates.
//
// # Config keys read by the runner
//
// Def.Config holds exactly these keys per kind (the Key* constants name them):
//
//	ssh-script        script      string    cpu | memory | disk | load | process
//	                  args        []string  process: the entity's `unit` attribute (required;
//	                                        else the spec's args); others: the spec's args
//	                  os          string    linux | darwin (attribute `os`, default linux)
//	                  The probe runs on the target itself; the runner resolves the host-hop
//	                  (pct exec / qm guest exec for guests, SSH for machines). A guest with no
//	                  owning Proxmox host, or a vm without qemu_guest_agent, is skipped.
//	http              url           string  attribute `url`, else "https://<public_host>/"
//	                  expect_status int     attribute `expect_status`, default 200
//	                  body_match    string  attribute `body_match`; present only when set
//	                  headers       []string "Name: value" lines from attribute `http_headers`
//	                                        (an object); a value may be `secret:NAME`, resolved
//	                                        by the scheduler when it sends the request
//	tcp               host          string  attribute `host_address`, else `host` (not on
//	                                        guests, where `host` names the Proxmox host), else
//	                                        public_ipv4, mesh_ipv4, lan_ipv4 in that order
//	                  port          int     attribute `port`
//	backup-freshness  path            string  attribute `path`
//	                  max_age_minutes int     attribute `max_age_minutes`, default 1560
//	                  holder          string  slug of the machine with a backs-up-to edge
//	                                          into the target (Lookup.BackupHolder)
//	                  os              string  the holder's `os`, default linux
//	proxmox-guest     vmid        int       attribute `vmid`
//	                  guest_kind  string    lxc | vm (from the type, through is-a)
//	                  host        string    slug of the owning Proxmox host (Lookup.HostOf)
//	                  expected_status string "stopped" when the guest's attribute says it is
//	                                        meant to be stopped (then stopped is up); absent
//	                                        otherwise
//
// Every value is a plain string, int or []string, so Config marshals with encoding/json
// unchanged.
package checks
