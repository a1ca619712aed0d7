package readmodel

import (
	"time"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

// Queries names every SQL text the package sends; storage_test.go prepares each against the
// migrated schema, and fails on a SQL constant missing here. The lists built at run time
// (optional filters, keyset pages) are registered as the variants their builders produce:
// "/min" with no optional clause, "/all" with every one (and, where the clauses exclude
// each other, one variant per choice).
var Queries = map[string]string{
	"qListEntities/min":     sqlOf(entityListSQL(EntityFilter{Limit: 1}, "")),
	"qListEntities/all":     sqlOf(entityListSQL(allEntities, "")),
	"qListEntities/audited": sqlOf(entityListSQL(allEntities, ", "+lastAuditedSQL)),

	"qRelations/out":  sqlOf(relationsSQL(sampleID, RelationsFilter{Direction: DirectionOut, Limit: 1})),
	"qRelations/in":   sqlOf(relationsSQL(sampleID, RelationsFilter{Direction: DirectionIn, IncludeEnded: true, Limit: 1})),
	"qRelations/both": sqlOf(relationsSQL(sampleID, RelationsFilter{Types: []string{"hosts"}, After: sampleID, Limit: 1})),

	"qGraphNodes/min": sqlOf(graphNodesSQL(GraphFilter{IncludeDestroyed: true, Limit: 1})),
	"qGraphNodes/all": sqlOf(graphNodesSQL(GraphFilter{Types: []string{"host"}, Limit: 1})),
	"qGraphEdges/min": sqlOf(graphEdgesSQL([]string{sampleID}, nil)),
	"qGraphEdges/all": sqlOf(graphEdgesSQL([]string{sampleID}, []string{"hosts"})),

	"qBlastRadius":     qBlastRadius,
	"qTopologyVersion": qTopologyVersion,
	"qAffected":        qAffected,
	// The root of RootAndAffected, read with the base layer's entity SELECT.
	"storage.EntitySQL/byID": rootByID,

	"qTopologyEvents": qTopologyEvents,
	"qTopologyCursor": qTopologyCursor,
	"qTopologyEdges":  qTopologyEdges,

	"qExportSnapshot": qExportSnapshot,
	"qExportNow":      qExportNow,
	"qExportEntities": qExportEntities,
	"qExportEdges":    qExportEdges,

	"qSeedEntitiesAll": qSeedEntitiesAll,
	"qSeedEntitiesIn":  qSeedEntitiesIn,
	"qSeedEdgesAll":    qSeedEdgesAll,
	"qSeedEdgesIn":     qSeedEdgesIn,
	"qSeedDocsAll":     qSeedDocsAll,
	"qSeedDocsIn":      qSeedDocsIn,
	// The heads: their variants above are the statements sent.
	"qSeedEntities/head": qSeedEntitiesAll,
	"qSeedEdges/head":    qSeedEdgesAll,
	"qSeedDocs/head":     qSeedDocsAll,

	"qSearch/min":     sqlOf(searchSQL(SearchFilter{Q: "x", Limit: 1})),
	"qSearch/all":     sqlOf(searchSQL(SearchFilter{Q: "x", Kinds: []string{"runbook"}, After: &SearchCursor{Rank: 0.5, Slug: "runbook:x"}, Limit: 1})),
	"qSearchPlanner":  qSearchPlanner,
	"qListKnowledge":  qListKnowledge,
	"qKnowledgeAbout": qKnowledgeAbout,

	"qEvents/min":    sqlOf(eventsSQL(EventFilter{Limit: 1})),
	"qEvents/after":  sqlOf(eventsSQL(EventFilter{Types: NewTypeMatcher([]string{"entity.created", "health."}), EntityID: sampleID, After: 1, Since: time.Unix(0, 0), Limit: 1})),
	"qEvents/before": sqlOf(eventsSQL(EventFilter{Newest: true, Before: 5, Limit: 1})),
	"qAudit/min":     sqlOf(auditSQL(AuditFilter{Limit: 1})),
	"qAudit/all":     sqlOf(auditSQL(AuditFilter{EntityID: sampleID, Actor: "a", Action: "b", CorrelationID: "c", Before: 5, Limit: 1})),

	"qListChecks/min": sqlOf(checksSQL(CheckFilter{Limit: 1})),
	"qListChecks/all": sqlOf(checksSQL(CheckFilter{TargetID: sampleID, Kinds: []string{"http"}, Health: []string{"up"}, After: "x", Limit: 1})),

	"qOrphanChecks":     qOrphanChecks,
	"qChecksOnRetired":  qChecksOnRetired,
	"qStuckProbes":      qStuckProbes,
	"qEdgesToDestroyed": qEdgesToDestroyed,
	"qUnmonitored":      qUnmonitored,

	"qHealthCounts":     qHealthCounts,
	"qHealthEntities":   qHealthEntities,
	"qHealthEntitiesIn": qHealthEntitiesIn,
	// The head alone is a statement too (the entities in no particular order).
	"qHealthEntitiesHead": qHealthEntitiesHead,

	"qIncidents/min":      sqlOf(incidentsSQL(IncidentFilter{Limit: 1})),
	"qIncidents/open":     sqlOf(incidentsSQL(IncidentFilter{Status: "open", EntityID: sampleID, Limit: 1})),
	"qIncidents/resolved": sqlOf(incidentsSQL(IncidentFilter{Status: "resolved", Limit: 1})),
	"qIncident":           qIncident,
	"qIncidentMembers":    qIncidentMembers,

	"qMetricNames":    qMetricNames,
	"qMetricBuckets":  qMetricBuckets,
	"qMetricTrend":    qMetricTrend,
	"qLatestDrift":    qLatestDrift,
	"qDriftAnswering": qDriftAnswering,

	"qSignals/min": sqlOf(signalsSQL(SignalFilter{Limit: 1})),
	"qSignals/all": sqlOf(signalsSQL(SignalFilter{Statuses: []string{"open"}, EntityID: sampleID, Kind: "k", After: sampleID, Limit: 1})),
}

// sampleID is an id the variants are built with (any uuid: only the text is prepared).
const sampleID = "00000000-0000-7000-8000-000000000000"

var (
	allEntities = EntityFilter{Types: []string{"host"}, NotTypes: []string{"check"}, States: []string{"active"},
		Health: []string{"up"}, Attrs: []AttrMatch{{Key: "vmid", Value: "101"}, {Key: "os", Value: "linux"}}, Q: "x", After: "host:a", Limit: 1}
	rootByID = entitySQLByID()
)

// sqlOf is a builder's text without its arguments.
func sqlOf(q string, _ args) string { return q }

func entitySQLByID() string { return storage.EntitySQL(sampleID, false, "") }
