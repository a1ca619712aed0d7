package storage

// Queries names every SQL constant of the package; storage_test.go prepares each against
// the migrated schema, and fails on a SQL constant missing here.
var Queries = map[string]string{
	"qPing":              qPing,
	"qMachineAt":         qMachineAt,
	"qPublishKey":        qPublishKey,
	"qHostConnectStatus": qHostConnectStatus,
	"qFailStaleConnects": qFailStaleConnects,
	"qClaimConnect":      qClaimConnect,
	"qRecordConnect":     qRecordConnect,
}
