package fleetstore

// Queries names every SQL constant of the package; store_test.go prepares each against the
// migrated schema, and fails on a SQL constant missing here.
var Queries = map[string]string{
	"qLockKey":                qLockKey,
	"qLatestConnect":          qLatestConnect,
	"qLatestConnectForUpdate": qLatestConnectForUpdate,
	"qConnectByID":            qConnectByID,
	"qConnectToFinalize":      qConnectToFinalize,
	"qMarkFinalized":          qMarkFinalized,
	"qSetNotConnected":        qSetNotConnected,
	"qEntityForUpdate":        qEntityForUpdate,
	"qBusyConnect":            qBusyConnect,
	"qInsertConnect":          qInsertConnect,
	"qSchedulerKeys":          qSchedulerKeys,
	"qGuests":                 qGuests,
	"qGuestSlugs":             qGuestSlugs,
	"qLockAdopt":              qLockAdopt,
	"qServicesOn":             qServicesOn,
	"qWhereRun":               qWhereRun,
	"qClusterNodes":           qClusterNodes,
	"qProxmoxHosts":           qProxmoxHosts,
	"qEntitySlugTaken":        qEntitySlugTaken,
}
