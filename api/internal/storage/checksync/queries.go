package checksync

// Queries names every SQL constant of the package; storage_test.go prepares each against
// the migrated schema, and fails on a SQL constant missing here. The savepoint statements
// around a lookup are not listed: they name no table, and the rollback is two statements,
// which a prepared statement cannot hold.
var Queries = map[string]string{
	"qLockHeldBySlug": qLockHeldBySlug,
	"qLockHeldByID":   qLockHeldByID,
	// The heads qLockHeld and qExisting, under the variants their statements are.
	"qLockHeld/bySlug":     qLockHeldBySlug,
	"qHeldBackups":         qHeldBackups,
	"qPrefetchBySlug":      qPrefetchBySlug,
	"qPrefetchByID":        qPrefetchByID,
	"qInsertStatus":        qInsertStatus,
	"qInsertEntity":        qInsertEntity,
	"qInsertDef":           qInsertDef,
	"qEnableCheckEntity":   qEnableCheckEntity,
	"qUpdateDef":           qUpdateDef,
	"qDisableDef":          qDisableDef,
	"qDisableCheckEntity":  qDisableCheckEntity,
	"qExisting/of":         qExistingOf,
	"qExistingOf":          qExistingOf,
	"qExistingBySlug":      qExistingBySlug,
	"qCheckEntitiesBySlug": qCheckEntitiesBySlug,
	"qHostBySlug":          qHostBySlug,
	"qHostByName":          qHostByName,
	"qEdgeSource":          qEdgeSource,
	"qProxmoxHosts":        qProxmoxHosts,
	"qHostEdges":           qHostEdges,
}
