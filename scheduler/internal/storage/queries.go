package storage

// Queries names every SQL constant of the package; storage_test.go prepares each against
// the migrated schema, and fails on a SQL constant missing here.
var Queries = map[string]string{
	"qEntityBySlug":       qEntityBySlug,
	"qEntityByID":         qEntityByID,
	"qEntityByName":       qEntityByName,
	"qHostOf":             qHostOf,
	"qRunsOn":             qRunsOn,
	"qPrefetchByID":       qPrefetchByID,
	"qPrefetchBySlug":     qPrefetchBySlug,
	"qTypeParents":        qTypeParents,
	"qMachineAt":          qMachineAt,
	"qPublishKey":         qPublishKey,
	"qHostConnectStatus":  qHostConnectStatus,
	"qFailStaleConnects":  qFailStaleConnects,
	"qClaimConnect":       qClaimConnect,
	"qRecordConnect":      qRecordConnect,
	"qPing":               qPing,
	"qTryXactLock":        qTryXactLock,
	"qSweepEntities":      qSweepEntities,
	"qSweepEdges":         qSweepEdges,
	"qEnabledCheckCounts": qEnabledCheckCounts,
	"qGoneSignals":        qGoneSignals,
	"qDeleteOldSamples":   qDeleteOldSamples,
	"qFailingResults":     qFailingResults,
	"qStaleCandidates":    qStaleCandidates,
	"qMarkStale":          qMarkStale,
}
