package ontology

// Which edges mean "depends on", for everything that walks dependencies: the blast radius
// (the api), and incident grouping by root cause (the scheduler). For the forward types the
// source depends on the target (a service runs-on its LXC, a route routes-to its service, a
// guest's disk is stored-on a pool); for the reverse types the target depends on the source
// (a Proxmox host hosts its guests, a machine provides a service or exports a share, the
// machine holding a backup target backs-up-to it). Edges that only describe (about,
// monitors, targets, involves, located-in, member-of, protects, ...) are not dependencies.
var (
	// DependsForward are edge types whose source depends on their target.
	DependsForward = []string{"depends-on", "runs-on", "routes-to", "mounts", "stored-on", "powered-by", "resolves-to"}
	// DependsReverse are edge types whose target depends on their source.
	DependsReverse = []string{"hosts", "provides", "exports", "backs-up-to"}
)
